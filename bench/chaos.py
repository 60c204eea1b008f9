"""Chaos soak: a real Typesense cluster (3 or 5 nodes) under a steady write and read load, with the
Typesense operator in charge, and a seeded random schedule of faults, one or two at a time: killed or
frozen leader, follower or majority; one pod or all pods deleted; the StatefulSet deleted with its pods
orphaned; a node's disk filled; the Kubernetes node of the leader or of a follower powered off (then
rebooted), cut off from the API server, or drained (then uncordoned); the operator killed; the API
server restarted; a roll in the middle. The cluster is spread one member per Kubernetes node.

For each fault: seconds to the first accepted write and to a whole cluster again (Ready, every node in
the raft), the longest write gap, the operator's Events. For the run: acknowledged writes lost (every
acknowledged id looked for on every node at the end), the longest write gap, and each destructive
action of the operator, judged against the nodes' states seen just before it. The seed and the
schedule are in the JSON: a failure is replayable with --seed.

Per fault kind (a pod drawn at random is named leader or follower: "disk-full (leader)"), the longest
write gap and the longest time to whole, against the kind's target; the steps that missed it are listed.

The cluster takes a raft snapshot every 60 s (additionalServerConfiguration), not typesense-server's
hourly default: a node that starts replays every write since its last snapshot before it accepts one,
which after 25 minutes of this load put 4 to 6 s on a full restart (docs/typesense-quorum.md).

A step begins at least 60 s after the API server came back from a restart: until then a kubelet whose
watches failed over the outage may not yet act on a deleted pod (seed 2088441472: 38 s).

Targets: 0 lost; no destructive action while a majority was healthy; every fault recovered without a
person; a write gap of at most 20 s for any single fault, and of at most 2 s for one that touches no
leader (the StatefulSet orphaned; a follower killed, frozen, deleted or its disk filled; a follower's
node powered off, drained or cut off), leaves it running (the leader's kubelet cut off) or hands it
over first (the leader's node drained). Two faults at once have no gap target. A fault of a Kubernetes
node is held 10 to 70 s, past the node lifecycle controller's 50 s grace at times. The operator runs
as a process of this machine, not on a node: a fault of the operator's own node is the in-cluster
e2e test's (tests/e2e/nodes/test_in_cluster.py).

A frozen majority is held to its target from the thaw (no raft takes a write while two of three are
frozen); its gap from the freeze is reported beside it. Each step keeps the cluster's Ready condition
as it changed (the operator's decisions and waits). ``--only FAULT`` runs that node fault alone,
never paired, to look into one kind.

Usage: python bench/chaos.py [--minutes 30] [--seed N] [--replicas 3] [--out bench/results/chaos.json]
                           [--logs DIR] [--only FAULT ...]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import secrets
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from operator_testkit.drivers.typesense import typesense_rig
from operator_testkit.drivers.typesense_chaos import (
    GAP_TARGET_SECONDS,
    HANDED_OVER_GAP_TARGET_SECONDS,
    KUBE_NODE_FAULTS,
    NO_LEADER_GAP_TARGET_SECONDS,
    NODE_FAULTS,
    SNAPSHOT_INTERVAL_SECONDS,
    Soak,
    SteadyCluster,
)

ROOT = Path(__file__).resolve().parent.parent


async def run(
    minutes: float, seed: int, replicas: int, logs: Path | None, only: Sequence[str] = ()
) -> dict[str, Any]:
    async with typesense_rig(ROOT, "chaos", keep_logs=logs) as rig:
        cluster = SteadyCluster(rig.kube, "chaos")
        soak = Soak(cluster, rig.faults, rig.plane, rig.operator, replicas, nodes=rig.nodes)
        await soak.create()
        try:
            result = await soak.run(seed, minutes * 60, only)
        finally:
            await cluster.aclose()
    return {
        "benchmark": "chaos",
        "cluster": (
            f"{replicas} nodes, typesense-server 0.24.1, operator grace 20 s, "
            f"a raft snapshot every {SNAPSHOT_INTERVAL_SECONDS} s"
        ),
        **result,
        "targets": {
            "acknowledged_lost": 0,
            "unjustified_destructive_actions": 0,
            "unrecovered": None,
            "aborted": None,
            "write_gap_targets_missed": {},
            "single_fault_write_gap_seconds": GAP_TARGET_SECONDS,
            "no_leader_fault_write_gap_seconds": NO_LEADER_GAP_TARGET_SECONDS,
            "leader_node_drain_write_gap_seconds": HANDED_OVER_GAP_TARGET_SECONDS,
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--seed", type=int, default=None, help="replay a run (default: a new seed)")
    parser.add_argument("--replicas", type=int, default=3, choices=(3, 5))
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "chaos.json")
    parser.add_argument("--logs", type=Path, default=None, help="keep every log here for reading")
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        choices=(*NODE_FAULTS, *KUBE_NODE_FAULTS),
        help="this fault alone, never paired (repeat for several): a run that looks into one kind",
    )
    arguments = parser.parse_args()
    seed = arguments.seed if arguments.seed is not None else secrets.randbelow(2**31)
    result = asyncio.run(run(arguments.minutes, seed, arguments.replicas, arguments.logs, arguments.only))
    arguments.out.parent.mkdir(parents=True, exist_ok=True)
    arguments.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k not in ("steps", "schedule")}, indent=2))


if __name__ == "__main__":
    main()
