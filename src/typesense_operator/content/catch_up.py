"""What a migration carries from the old collection into the new one, so that it loses no write
(issue 68). Pure: exports in, writes out; table-tested in tests/unit/test_typesense_catch_up.py.

A migration copies the old collection, then moves the alias. Clients keep writing through the alias:
to the old collection until it moves, to the new one after. A write to the old collection after its
export was taken would be lost with it; a write to the new one after the move must not be undone.
So the catch-up is three-way, per document id, between a base (both collections as they were when
last made to agree) and now:

- the old side has not changed since the base: nothing to carry;
- the new side has changed since the base: a client wrote it through the alias after the move, a
  later write than anything the old side holds, so it stays;
- otherwise the new side takes the old side's document as it is now (an upsert), or loses it when
  the old side deleted it.

The comparison is of each side with its own base, never of the old side with the new (their schemas
differ: a number in one may be a string in the other).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["CatchUp", "catch_up", "documents_by_id"]

Documents = Mapping[str, Mapping[str, Any]]
"""A collection's documents by id."""


@dataclass(frozen=True)
class CatchUp:
    """The writes that carry the old collection's changes into the new one."""

    upserts: tuple[Mapping[str, Any], ...] = ()
    deletes: tuple[str, ...] = ()

    def __len__(self) -> int:
        return len(self.upserts) + len(self.deletes)


def documents_by_id(export: bytes) -> dict[str, dict[str, Any]]:
    """A collection's JSONL export (``GET .../documents/export``) by document id."""
    documents = (json.loads(line) for line in export.splitlines() if line.strip())
    return {str(document["id"]): document for document in documents}


def catch_up(old_base: Documents, old_now: Documents, new_base: Documents, new_now: Documents) -> CatchUp:
    """What the new collection must take so that it holds every change the old one received since the
    base, and nothing a client wrote to the new one since is overwritten (the module says why)."""
    upserts: list[Mapping[str, Any]] = []
    deletes: list[str] = []
    for document_id in sorted(old_base.keys() | old_now.keys()):
        if old_now.get(document_id) == old_base.get(document_id):
            continue
        if new_now.get(document_id) != new_base.get(document_id):
            continue
        if document_id in old_now:
            upserts.append(old_now[document_id])
        elif document_id in new_now:
            deletes.append(document_id)
    return CatchUp(tuple(upserts), tuple(deletes))
