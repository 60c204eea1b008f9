"""Benchmark: recovery of a real Typesense raft cluster after faults, with the Typesense operator in charge.

Runs three real nodes (a kubelet, containerd and runc each) and their control plane, the real
typesense-server 0.24.1 in their pods, and the typesense-operator process; creates a 3-node cluster,
keeps a steady write load, and for each scenario records:

- seconds from the fault to Ready=True;
- seconds from the fault to the first accepted write;
- writes acknowledged before the fault and missing afterwards (must be 0).

Scenarios (the quorum issue's numbering):

- "two-of-three-killed" (3): the leader and a follower die and stay dead;
- "two-of-three-hung" (3, harder): the leader and a follower hang (SIGSTOP) and stay hung;
- "full-restart" (4): a power cut: every container killed and every pod object removed at once
  (grace 0); the StatefulSet makes them again, with new IPs;
- "kubectl-delete-pods": ``kubectl delete pods --all`` as a user runs it (graceful termination, then
  re-creation by the real StatefulSet controller); its seconds count from the command's return.

Nothing is brought back by hand in any of them. Each scenario also records the operator's quorum
Events after the fault (seconds, reason, message) and what the writes met, so that where the time
goes can be read from the result.

With ``--rounds N`` every scenario runs N times, one after another on the same cluster: the
seconds depend on where each node's 10 s reading of its nodes file falls, so one round is one draw.
Each scenario reports every round and the minimum, median and maximum.

Usage: python bench/typesense_recovery.py [--only SCENARIO ...] [--rounds N]
    [--out bench/results/typesense_recovery.json]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import functools
import json
import statistics
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from operator_testkit.controlplane import ControlPlane
from operator_testkit.drivers.typesense import (
    Recovery,
    TypesenseCluster,
    Writer,
    delete_every_pod_as_a_user,
    full_restart,
    lose_two_of_three,
    typesense_rig,
)

ROOT = Path(__file__).resolve().parent.parent
EVENT_REASONS = ("QuorumDowngraded", "QuorumMemberFenced", "QuorumSurvivorRestarted", "QuorumUpgraded")


async def _report(cluster: TypesenseCluster, recovery: Recovery, counted: dict[str, int]) -> dict[str, Any]:
    """The figures of one scenario; Event counts are those the scenario added."""
    await asyncio.sleep(5)  # followers apply what the leader committed
    missing = await cluster.missing_on_every_node(recovery.acknowledged)
    added = {}
    for reason in EVENT_REASONS:
        total = len(await cluster.events(reason))
        added[reason], counted[reason] = total - counted.get(reason, 0), total
    first_write = recovery.seconds_to_first_write
    return {
        "seconds_to_ready": round(recovery.seconds_to_ready, 1),
        "seconds_to_first_accepted_write": None if first_write is None else round(first_write, 1),
        "acknowledged_writes": len(recovery.acknowledged),
        "acknowledged_missing_after": max((len(lost) for lost in missing.values()), default=0),
        "events": added,
        "timeline": await cluster.timeline(recovery.fault_at),
        "writes": recovery.writes,
    }


async def full_restart_scenario(cluster: TypesenseCluster, counted: dict[str, int]) -> dict[str, Any]:
    writer = Writer(cluster)
    writer.start("before")
    await writer.warmed_up()
    await writer.stop()
    recovery = await full_restart(cluster, timeout=300)
    everything = dataclasses.replace(recovery, acknowledged=[*writer.acknowledged, *recovery.acknowledged])
    return await _report(cluster, everything, counted)


async def kubectl_delete_scenario(
    cluster: TypesenseCluster, plane: ControlPlane, counted: dict[str, int]
) -> dict[str, Any]:
    deletion = await delete_every_pod_as_a_user(cluster, plane.kubectl, timeout=300)
    report = await _report(cluster, deletion.recovery, counted)
    return {"kubectl_delete_seconds": round(deletion.command_seconds, 1), **report}


async def two_of_three_scenario(
    cluster: TypesenseCluster, take_down: Callable[[str], Awaitable[object]], counted: dict[str, int]
) -> dict[str, Any]:
    _, recovery = await lose_two_of_three(cluster, take_down, timeout=300)
    return await _report(cluster, recovery, counted)


SCENARIOS = ("two-of-three-killed", "two-of-three-hung", "full-restart", "kubectl-delete-pods")


FIGURES = ("seconds_to_first_accepted_write", "seconds_to_ready", "acknowledged_missing_after")


def summary(rounds: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Minimum, median and maximum of each figure over the rounds (a figure a round lacks is left out)."""
    spread: dict[str, Any] = {}
    for figure in FIGURES:
        values = [r[figure] for r in rounds if r.get(figure) is not None]
        if values:
            spread[figure] = {"min": min(values), "median": statistics.median(values), "max": max(values)}
    return spread


async def run(only: Sequence[str] = SCENARIOS, rounds: int = 1) -> dict[str, Any]:
    async with typesense_rig(ROOT, "bench") as rig:
        cluster = TypesenseCluster(rig.kube, "bench")
        await cluster.create(replicas=3)
        bootstrap = await cluster.wait_ready(timeout=300)
        await cluster.create_collection()
        faults = rig.faults
        counted: dict[str, int] = {}
        scenarios: dict[str, Callable[[], Awaitable[dict[str, Any]]]] = {
            "two-of-three-killed": lambda: two_of_three_scenario(
                cluster, functools.partial(faults.down, "bench"), counted
            ),
            "two-of-three-hung": lambda: two_of_three_scenario(
                cluster, functools.partial(faults.freeze, "bench"), counted
            ),
            "full-restart": lambda: full_restart_scenario(cluster, counted),
            "kubectl-delete-pods": lambda: kubectl_delete_scenario(cluster, rig.plane, counted),
        }
        results: dict[str, Any] = {}
        for name in (name for name in SCENARIOS if name in only):
            reports = [await scenarios[name]() for _ in range(rounds)]
            results[name] = {"summary": summary(reports), "rounds": reports}
        await cluster.aclose()
    return {
        "benchmark": "typesense_recovery",
        "cluster": "3 nodes, typesense-server 0.24.1, operator grace 20 s",
        "bootstrap_seconds_to_ready": round(bootstrap, 1),
        "scenarios": results,
        "rounds": rounds,
        "targets": {
            name: {
                "seconds_to_first_accepted_write": 15,
                "seconds_to_ready": 20,
                "acknowledged_missing_after": 0,
            }
            for name in ("two-of-three-killed", "full-restart", "kubectl-delete-pods")
        },
        "target_notes": (
            "issue #35: killed members and deleted pods, 15 s to the first write and 20 s to Ready; hung "
            "members keep their grace (20 s), since a frozen node may come back. kubectl-delete-pods counts "
            "from the command's return. docs/typesense-quorum.md says where typesense-server 0.24.1 puts "
            "the floor."
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "typesense_recovery.json")
    parser.add_argument(
        "--only", nargs="+", choices=SCENARIOS, default=SCENARIOS, help="these scenarios only"
    )
    parser.add_argument("--rounds", type=int, default=1, help="runs of each scenario (default 1)")
    arguments = parser.parse_args()
    if arguments.rounds < 1:
        parser.error("--rounds must be at least 1")
    result = asyncio.run(run(arguments.only, arguments.rounds))
    arguments.out.parent.mkdir(parents=True, exist_ok=True)
    arguments.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
