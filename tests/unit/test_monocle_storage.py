"""The Elasticsearch volume grows only where its StorageClass allows it, and never shrinks."""

from __future__ import annotations

import pytest

from monocle_operator.resources import Expansion, Instance, build_claim_expansion, decide_expansion


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


def test_the_claim_expansion_names_only_the_size_this_operator_owns() -> None:
    instance = Instance.from_object({"metadata": {"name": "demo", "namespace": "ns"}, "spec": {}})
    assert build_claim_expansion(instance, "2Gi") == {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": instance.elastic_claim_name, "namespace": "ns"},
        "spec": {"resources": {"requests": {"storage": "2Gi"}}},
    }


def test_a_size_that_is_no_quantity_is_refused() -> None:
    with pytest.raises(ValueError, match="not a Kubernetes quantity"):
        decide_expansion("a lot", "1Gi", "standard", True)
