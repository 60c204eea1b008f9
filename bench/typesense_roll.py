"""Benchmark: a change that needs new pods, rolled by the operator and by a plain StatefulSet rolling
update, side by side in one run, on a real Typesense cluster that holds 100k documents, under writes.

Runs three real nodes (a kubelet, containerd and runc each) and their control plane, the real
typesense-server 0.24.1 in their pods, and the typesense-operator process; creates a 3-node cluster,
imports the documents (so that a restarted node takes real time to load and catch up), and rolls
four changes of the pod template (a new CPU request), each under a steady write load:

- "operator": the operator's roll (StatefulSet ``OnDelete``; followers first, each back and caught up
  before the next, the leader last);
- "statefulset-rolling-update": the same kind of change as the Go operator rolls it: the operator is
  stopped, the StatefulSet gets ``RollingUpdate`` and the new template (without our init container)
  and the nodes list the Go operator's DNS names (on real nodes a pod made again has a new address),
  so that the StatefulSet controller rolls it, seeing readiness only. The operator is started again
  afterwards and must find nothing to roll;
- "operator-hung-follower" and "statefulset-rolling-update-hung-follower": both again, with the
  lowest-numbered follower hung (the cgroup freezer) just before the change, and never thawed by hand.

For each: acknowledged writes lost, the longest gap between two acknowledged writes, failed write
attempts, the fewest caught-up nodes at any moment (answering as LEADER or FOLLOWER within 100
entries of the highest committed index), and the total time until every pod runs the new revision,
is Ready, and every node is caught up.

Usage: python bench/typesense_roll.py [--documents 100000] [--out bench/results/typesense_roll.json]
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from operator_testkit.assertions import condition
from operator_testkit.drivers.typesense import (
    Roll,
    TypesenseCluster,
    ready_condition,
    roll_under_writes,
    seed_documents,
    typesense_rig,
)
from operator_testkit.fixtures import wait_until
from operator_testkit.operators import OperatorProcess

ROOT = Path(__file__).resolve().parent.parent
NAMESPACE = "bench"
STATEFULSET = "cluster-1-sts"


async def _lost(cluster: TypesenseCluster, acknowledged: list[str], settle: float = 60) -> int:
    """Acknowledged writes missing on the node that misses most, once followers had time to apply."""
    deadline = time.monotonic() + settle
    while True:
        missing = await cluster.missing_on_every_node(acknowledged)
        worst = max((len(lost) for lost in missing.values()), default=0)
        if worst == 0 or time.monotonic() > deadline:
            return worst
        await asyncio.sleep(2)


def _figures(roll: Roll, lost: int) -> dict[str, Any]:
    return {
        "roll_seconds": round(roll.seconds, 1),
        "acknowledged_writes": len(roll.acknowledged),
        "acknowledged_lost": lost,
        "longest_write_gap_seconds": round(roll.longest_write_gap, 2),
        "failed_write_attempts": roll.failed_writes,
        "fewest_caught_up_nodes": roll.fewest_caught_up,
        "hung_follower": roll.hung,
        "writes": roll.writes,
    }


async def operator_roll(
    cluster: TypesenseCluster, cpu: str, freeze: Callable[[str], Awaitable[object]] | None
) -> dict[str, Any]:
    async def change() -> None:
        await cluster.create(replicas=3, resources={"requests": {"cpu": cpu}})

    roll = await roll_under_writes(cluster, change, freeze=freeze)
    figures = _figures(roll, await _lost(cluster, roll.acknowledged))
    await cluster.wait_ready(timeout=120)
    # Every Event of the operator's, not only the roll's: a quorum step taken during a roll (a
    # downgrade, a fenced member) is what would explain a write gap or a lost write.
    figures["timeline"] = await cluster.timeline(roll.started_at)
    return figures


async def statefulset_roll(
    cluster: TypesenseCluster,
    operator: OperatorProcess,
    kubectl: Callable[..., object],
    cpu: str,
    freeze: Callable[[str], Awaitable[object]] | None,
) -> dict[str, Any]:
    # Stopped, the operator neither rolls nor undoes the StatefulSet's strategy; the spec gets the
    # same change, so that the operator started afterwards finds the template it would make.
    operator.stop()
    kube = cluster.kube
    sts = await kube.get("apps/v1", "StatefulSet", STATEFULSET, NAMESPACE)
    assert sts is not None
    containers = [c["name"] for c in sts["spec"]["template"]["spec"]["containers"]]
    resources = {"requests": {"cpu": cpu}}

    async def change() -> None:
        await cluster.create(replicas=3, resources=resources)
        # As the Go operator runs a cluster: its nodes list names the pods by DNS name (a pod made
        # again has a new address, and no operator of ours is there to write it), and its pods have
        # no init container waiting for addresses (decision 39).
        go_list = ",".join(f"{STATEFULSET}-{i}.{STATEFULSET}-svc:8107:8108" for i in range(3))
        await kube.patch(
            "v1", "ConfigMap", f"{cluster.name}-nodeslist", NAMESPACE, {"data": {"nodes": go_list}}
        )
        patch = [
            {"op": "replace", "path": "/spec/updateStrategy", "value": {"type": "RollingUpdate"}},
            {
                "op": "replace",
                "path": f"/spec/template/spec/containers/{containers.index('typesense')}/resources",
                "value": resources,
            },
            {"op": "remove", "path": "/spec/template/spec/initContainers"},
        ]
        await asyncio.to_thread(
            kubectl,
            "patch",
            "statefulset",
            STATEFULSET,
            "-n",
            NAMESPACE,
            "--type=json",
            "-p",
            json.dumps(patch),
        )

    try:
        roll = await roll_under_writes(cluster, change, freeze=freeze)
    finally:
        operator.start()
    figures = _figures(roll, await _lost(cluster, roll.acknowledged))
    restarts_before = len(await cluster.events("NodeRestarted"))

    async def operator_content() -> bool:
        obj = await cluster.get()
        progressing = condition(obj, "Progressing") or {}
        return ready_condition(obj).get("status") == "True" and progressing.get("reason") == "UpToDate"

    await wait_until(
        operator_content, timeout=120, interval=1, what="the restarted operator to find it rolled"
    )
    figures["nodes_the_restarted_operator_restarted"] = (
        len(await cluster.events("NodeRestarted")) - restarts_before
    )
    return figures


def _ratio(ours: float, theirs: float) -> float | None:
    return round(ours / theirs, 2) if theirs else None


async def run(documents: int) -> dict[str, Any]:
    async with typesense_rig(ROOT, NAMESPACE) as rig:
        cluster = TypesenseCluster(rig.kube, NAMESPACE)
        await cluster.create(replicas=3, resources={"requests": {"cpu": "100m"}})
        await cluster.wait_ready(timeout=300)
        await cluster.create_collection()
        seeding = time.monotonic()
        await seed_documents(cluster, documents)
        seed_seconds = time.monotonic() - seeding
        freeze = functools.partial(rig.faults.freeze, NAMESPACE)
        kubectl, operator = rig.plane.kubectl, rig.operator
        results = {
            "operator": await operator_roll(cluster, "101m", None),
            "statefulset-rolling-update": await statefulset_roll(cluster, operator, kubectl, "102m", None),
            "operator-hung-follower": await operator_roll(cluster, "103m", freeze),
            "statefulset-rolling-update-hung-follower": await statefulset_roll(
                cluster, operator, kubectl, "104m", freeze
            ),
        }
        await cluster.aclose()
    pairs = {
        "no fault": ("operator", "statefulset-rolling-update"),
        "hung follower": ("operator-hung-follower", "statefulset-rolling-update-hung-follower"),
    }
    ratios = {
        label: {
            figure: _ratio(results[ours][figure], results[theirs][figure])
            for figure in ("roll_seconds", "longest_write_gap_seconds")
        }
        for label, (ours, theirs) in pairs.items()
    }
    return {
        "benchmark": "typesense_roll",
        "cluster": f"3 nodes, typesense-server 0.24.1, {documents} documents, one write every 0.2 s",
        "seed_seconds": round(seed_seconds, 1),
        "scenarios": results,
        "ratios_operator_to_statefulset": ratios,
        "targets": {
            "acknowledged_lost": 0,
            "fewest_caught_up_nodes (operator)": 2,
            "longest_write_gap_seconds (operator)": "<= 2 and <= the StatefulSet roll's",
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=100_000)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "typesense_roll.json")
    arguments = parser.parse_args()
    result = asyncio.run(run(arguments.documents))
    arguments.out.parent.mkdir(parents=True, exist_ok=True)
    arguments.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
