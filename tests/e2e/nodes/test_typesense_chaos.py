"""The chaos soak, shortened for CI: a real 3-node Typesense cluster on real nodes under writes and
reads, and three minutes of a fixed seed's faults, one or two at a time (killed and frozen nodes,
deleted pods, an orphaned StatefulSet, a full disk, the operator killed, the API server restarted, a
roll in the middle). Nothing acknowledged is lost, no destructive action is taken while a majority is
healthy, and every fault is recovered without a person. bench/chaos.py runs the same for 30 minutes."""

from __future__ import annotations

import json

import pytest

from operator_core.kube import Kube
from operator_testkit.controlplane import ControlPlane
from operator_testkit.drivers.typesense_chaos import Soak, SteadyCluster
from operator_testkit.nodes.faults import NodeFaults
from operator_testkit.operators import OperatorProcess

SEED = 4
"""Its first steps: a frozen leader during a roll, a killed majority with the operator killed, a
frozen follower, a frozen leader, a killed majority, a killed leader, ..."""
MINUTES = 3
"""Three, not the five it once ran: CI's whole run must stay short, and bench/chaos.py soaks 30."""


@pytest.mark.timeout(MINUTES * 60 + 420)
async def test_three_minutes_of_faults_lose_nothing_acknowledged_and_recover_by_themselves(
    kube: Kube,
    namespace: str,
    control_plane: ControlPlane,
    faults: NodeFaults,
    typesense_operator: OperatorProcess,
) -> None:
    cluster = SteadyCluster(kube, namespace)
    soak = Soak(cluster, faults, control_plane, typesense_operator, replicas=3)
    await soak.create()
    try:
        result = await soak.run(SEED, MINUTES * 60)
    finally:
        await cluster.aclose()
    headline = {k: v for k, v in result.items() if k not in ("schedule", "steps", "destructive_actions")}
    failed = [s for s in result["steps"] if not s["recovered"] or s["seconds_to_whole"] > 60]
    unjustified = [a for a in result["destructive_actions"] if not a["justified"]]
    said = json.dumps(
        {**headline, "slow_or_unrecovered_steps": failed, "unjustified_actions": unjustified}, indent=1
    )[:8000]
    assert result["aborted"] is None, said
    assert result["unrecovered"] is None, said
    assert result["acknowledged_lost"] == 0, said
    assert result["nodes_not_read"] == [], said
    assert result["unjustified_destructive_actions"] == 0, said
    assert result["unhealed_faults"] == [], said
    assert len(result["steps"]) >= 3, said
    assert result["acknowledged_writes"] > 100, said
