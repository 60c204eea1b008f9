"""The shared volume-growth decision (operator_core.storage): sizes compared as quantities, the claim
template read from a live StatefulSet, and the messages that name the operator's own field."""

from __future__ import annotations

import pytest

from operator_core.storage import (
    Expansion,
    claim_expansion,
    claim_template_size,
    decide_expansion,
    smaller,
)


@pytest.mark.parametrize(
    ("size", "than", "expected"),
    [("1Gi", "2Gi", True), ("1024Mi", "1Gi", False), ("2Gi", "1Gi", False), ("500M", "1Gi", True)],
)
def test_sizes_compare_as_quantities(size: str, than: str, expected: bool) -> None:
    assert smaller(size, than) is expected


def test_the_claim_template_size_is_read_from_a_live_statefulset() -> None:
    sts = {"spec": {"volumeClaimTemplates": [{"spec": {"resources": {"requests": {"storage": "1Gi"}}}}]}}
    assert claim_template_size(sts) == "1Gi"
    assert claim_template_size({"spec": {}}) is None
    assert claim_template_size(None) is None


def test_the_messages_name_the_field_and_the_volume() -> None:
    refused = decide_expansion("2Gi", "1Gi", "slow", False, field="storage.size", volume="Typesense volumes")
    assert refused.action is Expansion.NOT_EXPANDABLE
    assert refused.size == "1Gi"
    assert refused.message.startswith(
        "storage.size asks for 2Gi but the volume has 1Gi and StorageClass slow"
    )
    grown = decide_expansion("2Gi", "1Gi", "fast", True, field="storage.size", volume="Typesense volumes")
    assert (grown.action, grown.size) == (Expansion.EXPAND, "2Gi")
    assert grown.message == "growing the Typesense volumes from 1Gi to 2Gi"
    assert claim_expansion("data-c-0", "ns", "2Gi")["spec"] == {"resources": {"requests": {"storage": "2Gi"}}}
