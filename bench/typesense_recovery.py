"""Benchmark: recovery of a real Typesense raft cluster after faults, with the Typesense operator in charge.

Runs a local control plane, the node agent (real typesense-server processes) and
the typesense-operator process, creates a 3-node cluster, keeps a steady write
load, and for each scenario records:

- seconds from the fault to Ready=True;
- seconds from the fault to the first accepted write;
- writes acknowledged before the fault and missing afterwards (must be 0).

Scenario "full-restart" (issue scenario 4): every pod re-created at once, with new IPs.

Usage: python bench/typesense_recovery.py [--out bench/results/typesense_recovery.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
from pathlib import Path
from typing import Any

from operator_core.kube import Kube
from operator_core.testing.controlplane import ENDPOINT_CONTROLLERS, ControlPlane
from operator_core.testing.nodeagent.harness import start_agent
from operator_core.testing.operators import OperatorRegistry
from typesense_operator.testing import TypesenseCluster, Writer, full_restart

ROOT = Path(__file__).resolve().parent.parent


async def full_restart_scenario(cluster: TypesenseCluster) -> dict[str, Any]:
    writer = Writer(cluster)
    writer.start("before")
    await asyncio.sleep(5)
    await writer.stop()
    before = list(writer.acknowledged)
    recovery = await full_restart(cluster, timeout=300)
    await asyncio.sleep(5)  # followers apply what the leader committed
    missing = await cluster.missing_on_every_node(before)
    return {
        "seconds_to_ready": round(recovery.seconds_to_ready, 1),
        "seconds_to_first_accepted_write": round(recovery.seconds_to_first_write or -1, 1),
        "acknowledged_before_fault": len(before),
        "acknowledged_missing_after": max((len(lost) for lost in missing.values()), default=0),
        "downgrades": len(await cluster.events("QuorumDowngraded")),
    }


async def run() -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-") as scratch:
        directory = Path(scratch)
        with ControlPlane(directory / "cp", disabled_controllers=ENDPOINT_CONTROLLERS) as plane:
            await asyncio.to_thread(
                plane.kubectl, "apply", "--server-side", "-f", str(ROOT / "deploy" / "crds")
            )
            agent = start_agent(plane, directory / "agent")
            operators = OperatorRegistry(directory / "operators")
            try:
                operators.get(
                    "typesense-operator", plane, ROOT / "deploy" / "rbac" / "typesense-operator.yaml"
                )
                async with Kube.connect(plane.kubeconfig) as kube:
                    await kube.create(
                        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "bench"}}
                    )
                    cluster = TypesenseCluster(kube, "bench")
                    await cluster.create(replicas=3)
                    bootstrap = await cluster.wait_ready(timeout=300)
                    await cluster.create_collection()
                    results = {"full-restart": await full_restart_scenario(cluster)}
                    await cluster.http.aclose()
            finally:
                operators.stop_all()
                agent.stop()
    return {
        "benchmark": "typesense_recovery",
        "cluster": "3 nodes, typesense-server 0.24.1, operator grace 20 s",
        "bootstrap_seconds_to_ready": round(bootstrap, 1),
        "scenarios": results,
        "targets": {"full-restart": {"seconds_to_ready": 60, "acknowledged_missing_after": 0}},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "typesense_recovery.json")
    arguments = parser.parse_args()
    result = asyncio.run(run())
    arguments.out.parent.mkdir(parents=True, exist_ok=True)
    arguments.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
