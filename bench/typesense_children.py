"""Benchmark: Typesense operator speed to build children, cost of a no-op reconcile, and memory.

Runs a real local control plane and the typesense-operator process (as its own
ServiceAccount), then measures:

- seconds from creating a TypesenseCluster to all of its children existing, p50 and p95 over N clusters;
- API requests the operator sends for one no-op reconcile (from the API server's audit log), writes apart;
- the operator's RSS when idle, and with M clusters.

Usage: python bench/typesense_children.py [--clusters 20] [--many 100] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from operator_core.kube import Kube
from operator_testkit.assertions import operator_requests, writes_since
from operator_testkit.controlplane import ControlPlane
from operator_testkit.operators import OperatorProcess, service_account_kubeconfig

ROOT = Path(__file__).resolve().parent.parent
API = "ts.opentelekomcloud.com/v1alpha1"
OPERATOR_USER = "system:serviceaccount:typesense-system:typesense-operator"
CHILDREN = (
    ("v1", "Secret", "{name}-admin-key"),
    ("v1", "ConfigMap", "{name}-nodeslist"),
    ("v1", "Service", "{name}-sts-svc"),
    ("v1", "Service", "{name}-svc"),
    ("apps/v1", "StatefulSet", "{name}-sts"),
    ("policy/v1", "PodDisruptionBudget", "{name}-pdb"),
)


def cluster(name: str, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "TypesenseCluster",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"image": "typesense/typesense:27.1", "replicas": 3},
    }


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def all_children_present(kube: Kube, name: str, namespace: str) -> bool:
    for api_version, kind, pattern in CHILDREN:
        if await kube.get(api_version, kind, pattern.format(name=name), namespace) is None:
            return False
    return True


async def wait_for_children(kube: Kube, name: str, namespace: str, started: float, poll: float) -> float:
    """Seconds from ``started`` until every child of ``name`` exists (polling is the measurement)."""
    while not await all_children_present(kube, name, namespace):
        if time.monotonic() - started > 120:
            raise TimeoutError(f"children of {name} did not appear within 120 s")
        await asyncio.sleep(poll)
    return time.monotonic() - started


async def time_to_children(kube: Kube, name: str, namespace: str) -> float:
    started = time.monotonic()
    await kube.create(cluster(name, namespace))
    return await wait_for_children(kube, name, namespace, started, poll=0.01)


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


async def no_op_reconcile_requests(plane: ControlPlane, kube: Kube, namespace: str) -> dict[str, int]:
    """Poke a settled cluster, alone in its namespace, with a change that asks nothing; count what follows."""
    await kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    await time_to_children(kube, "bench-0", namespace)
    await asyncio.sleep(8)  # let the status writes and Events of the creation settle
    before = len(operator_requests(plane, OPERATOR_USER, namespace))
    poke = f"bench/poke={time.time_ns()}"
    await asyncio.to_thread(plane.kubectl, "annotate", "-n", namespace, "configmap/bench-0-nodeslist", poke)
    await asyncio.sleep(3)
    requests = operator_requests(plane, OPERATOR_USER, namespace)[before:]
    return {
        "requests": len(requests),
        "writes": len(writes_since(plane, OPERATOR_USER, namespace, before)),
    }


async def run(clusters: int, many: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-") as scratch, ControlPlane(Path(scratch) / "cp") as plane:
        await asyncio.to_thread(plane.kubectl, "apply", "--server-side", "-f", str(ROOT / "deploy" / "crds"))
        kubeconfig = service_account_kubeconfig(
            plane,
            ROOT / "charts" / "typesense-operator" / "files" / "rbac-rules.yaml",
            Path(scratch) / "operator.kubeconfig",
        )
        async with Kube.connect(plane.kubeconfig) as kube:
            namespace = "bench"
            await kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
            await asyncio.sleep(2)  # the CRD's watch must be up before the clock starts
            with OperatorProcess(
                "typesense-operator", kubeconfig, Path(scratch) / "operator.log"
            ) as operator:
                pid = operator.pid
                await asyncio.sleep(3)
                idle_rss = rss_mib(pid)
                no_op = await no_op_reconcile_requests(plane, kube, "bench-noop")
                durations = [await time_to_children(kube, f"bench-{i}", namespace) for i in range(clusters)]
                for i in range(clusters, many - 1):
                    await kube.create(cluster(f"bench-{i}", namespace))
                await time_to_children(kube, f"bench-{many - 1}", namespace)
                await asyncio.sleep(10)
                loaded_rss = rss_mib(pid)
    return {
        "benchmark": "typesense_children",
        "clusters_timed": clusters,
        "create_to_children_seconds": {
            "p50": round(statistics.median(durations), 3),
            "p95": round(percentile(durations, 0.95), 3),
            "max": round(max(durations), 3),
        },
        "no_op_reconcile": no_op,
        "operator_rss_mib": {"idle": round(idle_rss, 1), f"with_{many}_clusters": round(loaded_rss, 1)},
        "targets": {"p95_seconds": 0.5, "no_op_writes": 0, "rss_mib_with_100": 100},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clusters", type=int, default=20)
    parser.add_argument("--many", type=int, default=100)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "typesense_children.json")
    arguments = parser.parse_args()
    result = asyncio.run(run(arguments.clusters, arguments.many))
    arguments.out.parent.mkdir(parents=True, exist_ok=True)
    arguments.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
