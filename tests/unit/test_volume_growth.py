"""The shared volume-growth decision (operator_core.storage): sizes compared as quantities, the claim
template read from a live StatefulSet, the messages that name the operator's own field, and autoGrow's
decision from the file systems' fill."""

from __future__ import annotations

import pytest

from operator_core.storage import (
    AutoGrowth,
    AutoGrowthPlan,
    Expansion,
    VolumeUsage,
    claim_expansion,
    claim_template_size,
    decide_auto_growth,
    decide_expansion,
    format_bytes,
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


GI = 1024**3


def _usage(volume: str, used_gi: float, total_gi: float = 1.0) -> VolumeUsage:
    return VolumeUsage(volume, int(used_gi * GI), int(total_gi * GI))


def _decide(usages: list[VolumeUsage], current: str = "1Gi") -> AutoGrowthPlan:
    return decide_auto_growth(usages, current, threshold_percent=80, step="1Gi", max_size="3Gi")


@pytest.mark.parametrize(
    ("usages", "current", "action", "size"),
    [
        pytest.param(
            [_usage("node 0", 0.5), _usage("node 1", 0.79)], "1Gi", AutoGrowth.NONE, "1Gi", id="below"
        ),
        pytest.param(
            [_usage("node 0", 0.5), _usage("node 1", 0.81)], "1Gi", AutoGrowth.GROW, "2Gi", id="past"
        ),
        pytest.param([_usage("node 2", 2.9, 3.0)], "3Gi", AutoGrowth.AT_MAX, "3Gi", id="at-max"),
        pytest.param([_usage("node 0", 2.5, 2.9)], "2560Mi", AutoGrowth.GROW, "3Gi", id="capped-at-max"),
        # node 1 still shows the old size: the last growth is being made on its node.
        pytest.param(
            [_usage("node 0", 1.7, 2.0), _usage("node 1", 0.9)], "2Gi", AutoGrowth.NONE, "2Gi", id="behind"
        ),
        pytest.param([], "1Gi", AutoGrowth.NONE, "1Gi", id="no-metrics"),
        pytest.param([VolumeUsage("node 0", 10, 0)], "1Gi", AutoGrowth.NONE, "1Gi", id="no-total"),
    ],
)
def test_auto_growth_steps_up_to_the_maximum_once_a_file_system_passes_the_threshold(
    usages: list[VolumeUsage], current: str, action: AutoGrowth, size: str
) -> None:
    plan = _decide(usages, current)
    assert (plan.action, plan.size) == (action, size)


def test_auto_growth_says_which_node_is_how_full_and_what_to_do_at_the_maximum() -> None:
    grow = _decide([_usage("node 0", 0.5), _usage("node 2", 0.9)])
    assert grow.message == (
        "node 2's volume is 90% full (921.6 MiB of 1.0 GiB; autoGrow.thresholdPercent is 80): growing every "
        "claim from 1Gi to 2Gi (autoGrow.maxSize 3Gi)"
    )
    assert grow.condition == (
        "node 2's volume is past autoGrow.thresholdPercent (80%): growing every claim from 1Gi to 2Gi "
        "(autoGrow.maxSize 3Gi)"
    ), "no figure that moves with every write: a condition is written when it changes"
    at_max = _decide([_usage("node 1", 2.9, 3.0)], "3Gi")
    assert "autoGrow.maxSize (3Gi) already: raise autoGrow.maxSize" in at_max.message
    assert at_max.condition == (
        "node 1's volume is past autoGrow.thresholdPercent (80%) and the volumes have autoGrow.maxSize (3Gi) "
        "already: raise autoGrow.maxSize, or make room in the data"
    )
    behind = _decide([_usage("node 0", 1.7, 2.0), _usage("node 1", 0.9)], "2Gi")
    assert behind.message == "waiting for the file systems of node 1 to show the claims' 2Gi"


@pytest.mark.parametrize(
    ("count", "written"), [(3 * GI, "3Gi"), (1536 * 1024**2, "1536Mi"), (1000, "1000"), (2048, "2Ki")]
)
def test_sizes_are_written_as_the_largest_exact_binary_quantity(count: int, written: str) -> None:
    from decimal import Decimal

    assert format_bytes(Decimal(count)) == written
