"""Benchmark: content declared as objects, many at once, against a real 3-node Typesense cluster.

Runs three real nodes (a kubelet, containerd and runc each) and their control plane, the real
typesense-server 0.24.1 in their pods, and the typesense-operator process as its own ServiceAccount;
makes a QuorumReady 3-node cluster, then declares at once 100 TypesenseCollections, 1,000
TypesenseSynonyms (10 per collection) and 100 TypesenseApiKeys, and measures:

- the time from the first object sent until every one of them is Ready (by a list every second);
- the operator's requests to the API server meanwhile, by verb and resource (its audit log);
- then an idle minute: the operator's requests to the API server during it (each object is still
  compared with Typesense once a minute, which costs the API server nothing).

No peer exists (the Go operator declares nothing inside a cluster), so there is no ratio.

Usage: python bench/typesense_content.py [--collections 100] [--synonyms-each 10] [--keys 100]
       [--out bench/results/typesense_content.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from pathlib import Path
from typing import Any

from scale import OUR_USER, AuditTail, summary

from operator_core.kube import Kube
from operator_testkit.assertions import condition
from operator_testkit.drivers.typesense import TypesenseCluster, typesense_rig

ROOT = Path(__file__).resolve().parent.parent
API = "ts.opentelekomcloud.com/v1alpha1"
NAMESPACE = "bench"
KINDS = ("TypesenseCollection", "TypesenseSynonym", "TypesenseApiKey")


def declared(collections: int, synonyms_each: int, keys: int) -> list[dict[str, Any]]:
    def one(kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
        metadata = {"name": name, "namespace": NAMESPACE}
        return {
            "apiVersion": API,
            "kind": kind,
            "metadata": metadata,
            "spec": {"cluster": {"name": "c"}, **spec},
        }

    objects = []
    for c in range(collections):
        fields = [{"name": "title", "type": "string"}, {"name": "year", "type": "int32", "facet": True}]
        objects.append(one("TypesenseCollection", f"col-{c:03d}", {"fields": fields}))
        for s in range(synonyms_each):
            words = [f"word{c}-{s}-a", f"word{c}-{s}-b"]
            objects.append(
                one(
                    "TypesenseSynonym",
                    f"syn-{c:03d}-{s:02d}",
                    {"collection": f"col-{c:03d}", "synonyms": words},
                )
            )
    for k in range(keys):
        spec = {
            "actions": ["documents:search"],
            "collections": [f"col-{k % max(collections, 1):03d}"],
            "secret": {"name": f"key-{k:03d}"},
        }
        objects.append(one("TypesenseApiKey", f"key-{k:03d}", spec))
    return objects


async def ready_count(kube: Kube) -> dict[str, int]:
    counts = {}
    for kind in KINDS:
        listed = await kube.list(API, kind, NAMESPACE)
        counts[kind] = sum(1 for obj in listed if (condition(obj, "Ready") or {}).get("status") == "True")
    return counts


async def run(collections: int, synonyms_each: int, keys: int, idle_seconds: float) -> dict[str, Any]:
    async with typesense_rig(ROOT, NAMESPACE) as rig:
        cluster = TypesenseCluster(rig.kube, NAMESPACE, name="c")
        await cluster.create(replicas=3)
        await cluster.wait_ready(timeout=300)
        audit = AuditTail(rig.plane.audit_log, OUR_USER)
        await asyncio.sleep(5)
        audit.new_requests()  # what the cluster's own start cost is not this benchmark's
        objects = declared(collections, synonyms_each, keys)
        expected = {kind: sum(1 for obj in objects if obj["kind"] == kind) for kind in KINDS}
        gate = asyncio.Semaphore(16)

        async def send(obj: dict[str, Any]) -> None:
            async with gate:
                await rig.kube.create(obj)

        started = time.monotonic()
        await asyncio.gather(*(send(obj) for obj in objects))
        sent = time.monotonic() - started
        counts: dict[str, int] = {}
        while time.monotonic() - started < 900:
            counts = await ready_count(rig.kube)
            if counts == expected:
                break
            await asyncio.sleep(1)
        all_ready = time.monotonic() - started
        declaring = audit.new_requests()
        await asyncio.sleep(idle_seconds)
        idle = audit.new_requests()
        await cluster.aclose()
        return {
            "declared": expected,
            "ready": counts,
            "all_ready": counts == expected,
            "seconds_to_send": round(sent, 1),
            "seconds_until_all_ready": round(all_ready, 1),
            "operator_requests_while_declaring": summary(declaring),
            "idle_seconds": idle_seconds,
            "operator_requests_while_idle": summary(idle),
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--collections", type=int, default=100)
    parser.add_argument("--synonyms-each", type=int, default=10)
    parser.add_argument("--keys", type=int, default=100)
    parser.add_argument("--idle-seconds", type=float, default=60.0)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "typesense_content.json")
    arguments = parser.parse_args()
    result = asyncio.run(
        run(arguments.collections, arguments.synonyms_each, arguments.keys, arguments.idle_seconds)
    )
    arguments.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({key: value for key, value in result.items() if "requests" not in key}, indent=2))


if __name__ == "__main__":
    main()
