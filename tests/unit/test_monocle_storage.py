"""The Elasticsearch volume grows only where its StorageClass allows it, and never shrinks."""

from __future__ import annotations

from decimal import Decimal

import pytest

from monocle_operator.resources import Expansion, decide_expansion, parse_quantity


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1Gi", 2**30),
        ("500Mi", 500 * 2**20),
        ("2G", 2 * 10**9),
        ("1.5Gi", Decimal("1.5") * 2**30),
        ("1e3", 1000),
    ],
)
def test_parse_quantity(text: str, value: int | Decimal) -> None:
    assert parse_quantity(text) == value


def test_parse_quantity_refuses_nonsense() -> None:
    with pytest.raises(ValueError, match="not a Kubernetes quantity"):
        parse_quantity("a lot")


@pytest.mark.parametrize(
    ("wanted", "claimed", "allows", "action"),
    [
        ("1Gi", None, True, Expansion.NONE),
        ("1Gi", "1Gi", False, Expansion.NONE),
        ("1024Mi", "1Gi", False, Expansion.NONE),
        ("1Gi", "2Gi", True, Expansion.NONE),
        ("2Gi", "1Gi", True, Expansion.EXPAND),
        ("2Gi", "1Gi", False, Expansion.NOT_EXPANDABLE),
    ],
)
def test_decide_expansion(wanted: str, claimed: str | None, allows: bool, action: Expansion) -> None:
    plan = decide_expansion(wanted, claimed, "standard", allows)
    assert plan.action is action
    if action is Expansion.EXPAND:
        assert plan.size == wanted
    if action is Expansion.NOT_EXPANDABLE:
        assert "StorageClass standard does not allow volume expansion" in plan.message
