"""A migration's three-way catch-up (issue 68): the old collection's changes since the copy go into the
new one, and no write a client made to the new one is undone."""

from __future__ import annotations

from typing import Any

import pytest

from typesense_operator.content.catch_up import CatchUp, catch_up, documents_by_id


def doc(document_id: str, year: Any) -> dict[str, Any]:
    return {"id": document_id, "year": year}


# The base: the old side holds year 1999 as a number, the new side the same document as a string.
OLD = {"1": doc("1", 1999), "2": doc("2", 2000)}
NEW = {"1": doc("1", "1999"), "2": doc("2", "2000")}


@pytest.mark.parametrize(
    ("old_now", "new_now", "expected"),
    [
        pytest.param(OLD, NEW, CatchUp(), id="nothing written since: nothing to carry"),
        pytest.param(
            {**OLD, "3": doc("3", 2001)},
            NEW,
            CatchUp(upserts=(doc("3", 2001),)),
            id="a document made in the old",
        ),
        pytest.param(
            {**OLD, "1": doc("1", 1998)},
            NEW,
            CatchUp(upserts=(doc("1", 1998),)),
            id="a document changed in the old",
        ),
        pytest.param({"2": OLD["2"]}, NEW, CatchUp(deletes=("1",)), id="a document deleted in the old"),
        pytest.param(
            {**OLD, "1": doc("1", 1998)},
            {**NEW, "1": doc("1", "1997")},
            CatchUp(),
            id="changed in both: the new side's write came later (after the alias moved), it stays",
        ),
        pytest.param(
            {"2": OLD["2"]},
            {**NEW, "1": doc("1", "1997")},
            CatchUp(),
            id="deleted in the old, written again in the new: it stays",
        ),
        pytest.param(
            {**OLD, "3": doc("3", 2001)},
            {**NEW, "3": doc("3", "2002")},
            CatchUp(),
            id="made in both: the new side's stays",
        ),
        pytest.param(
            {"2": OLD["2"]},
            {"2": NEW["2"]},
            CatchUp(),
            id="deleted in both: nothing to do",
        ),
    ],
)
def test_the_old_sides_changes_are_carried_unless_the_new_side_changed_since(
    old_now: dict[str, Any], new_now: dict[str, Any], expected: CatchUp
) -> None:
    assert catch_up(OLD, old_now, NEW, new_now) == expected


def test_an_export_is_read_by_document_id() -> None:
    export = b'{"id": "1", "year": 1999}\n\n{"id": "2", "year": 2000}\n'
    assert documents_by_id(export) == {"1": doc("1", 1999), "2": doc("2", 2000)}
    assert len(CatchUp(upserts=(doc("3", 1),), deletes=("1", "2"))) == 3
