"""Benchmark: content declared as objects, many at once, against a real 3-node Typesense cluster.

Runs three real nodes (a kubelet, containerd and runc each) and their control plane, the real
typesense-server 0.24.1 in their pods, and the typesense-operator process as its own ServiceAccount;
makes a QuorumReady 3-node cluster, then declares at once 100 TypesenseCollections, 1,000
TypesenseSynonyms (10 per collection) and 100 TypesenseApiKeys, and measures:

- the time from the first object sent until every one of them is Ready (by a list every second);
- the operator's requests to the API server meanwhile, by verb and resource (its audit log);
- then an idle minute: the operator's requests to the API server during it (each object is still
  compared with Typesense once a minute, which costs the API server nothing).

With ``--migrate N`` instead (issue 68): a TypesenseCollection with ``spec.migration`` holding N
documents migrated (a number field into a string) while a client writes through its alias 10 times a
second; reported: the time from the spec's change to Ready on the new collection, the documents the
catch-up carried over, the operator's requests to the API server meanwhile, and the acknowledged
writes missing from the new collection (the target: 0).

No peer exists (the Go operator declares nothing inside a cluster), so there is no ratio.

Usage: python bench/typesense_content.py [--collections 100] [--synonyms-each 10] [--keys 100]
       [--out bench/results/typesense_content.json]
       python bench/typesense_content.py --migrate 100000 [--out bench/results/typesense_migration.json]
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
from operator_testkit.drivers.typesense import CollectionWriter, TypesenseCluster, typesense_rig

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


MIGRATED = "big"
WRITES_PER_SECOND = 10


def _migrated(fields_year: str, drop_after: int = 30) -> dict[str, Any]:
    fields = [{"name": "title", "type": "string"}, {"name": "year", "type": fields_year}]
    spec = {
        "cluster": {"name": "c"},
        "fields": fields,
        "migration": {"batchSize": 1000, "dropOldAfterSeconds": drop_after},
    }
    return {
        "apiVersion": API,
        "kind": "TypesenseCollection",
        "metadata": {"name": MIGRATED, "namespace": NAMESPACE},
        "spec": spec,
    }


async def _collection_ready(kube: Kube, collection: str, timeout: float) -> dict[str, Any]:
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        obj = await kube.get(API, "TypesenseCollection", MIGRATED, NAMESPACE)
        if (condition(obj or {}, "Ready") or {}).get("status") == "True" and (obj or {}).get(
            "status", {}
        ).get("name") == collection:
            return obj or {}
        await asyncio.sleep(0.5)
    raise TimeoutError(f"{collection} not Ready within {timeout:.0f} s")


async def run_migration(documents: int) -> dict[str, Any]:
    async with typesense_rig(ROOT, NAMESPACE) as rig:
        cluster = TypesenseCluster(rig.kube, NAMESPACE, name="c")
        await cluster.create(replicas=3)
        await cluster.wait_ready(timeout=300)
        await rig.kube.apply(_migrated("int32"))
        await _collection_ready(rig.kube, f"{MIGRATED}-1", 120)
        leader = await cluster.leader_ip()
        base = f"http://{leader}:8108/collections/{MIGRATED}/documents"
        for start in range(0, documents, 10_000):
            lines = (
                json.dumps({"id": str(i), "title": f"item {i}", "year": 1900 + i % 120})
                for i in range(start, min(start + 10_000, documents))
            )
            answer = await cluster.http.post(
                f"{base}/import?action=create", headers=cluster.headers, content="\n".join(lines), timeout=300
            )
            answer.raise_for_status()
        audit = AuditTail(rig.plane.audit_log, OUR_USER)
        writer = CollectionWriter(
            cluster,
            leader,
            MIGRATED,
            lambda n: {"id": f"w{n}", "title": f"written {n}", "year": n},
            rate=WRITES_PER_SECOND,
        )
        writer.start()
        await asyncio.sleep(3)
        audit.new_requests()
        started = time.monotonic()
        await rig.kube.apply(_migrated("string"))
        done = await _collection_ready(rig.kube, f"{MIGRATED}-2", 1800)
        took = time.monotonic() - started
        requests = audit.new_requests()
        await asyncio.sleep(3)
        await writer.stop()
        lost = await writer.missing_from(f"{MIGRATED}-2")
        await cluster.aclose()
        migration = done["status"]["migration"]
        return {
            "documents": documents,
            "writes_per_second": WRITES_PER_SECOND,
            "seconds_from_change_to_ready": round(took, 1),
            "documents_copied": migration.get("documents"),
            "documents_caught_up": migration.get("caughtUp"),
            "acknowledged_writes": len(writer.acknowledged),
            "acknowledged_writes_lost": len(lost),
            "operator_requests_while_migrating": summary(requests),
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--collections", type=int, default=100)
    parser.add_argument("--synonyms-each", type=int, default=10)
    parser.add_argument("--keys", type=int, default=100)
    parser.add_argument("--idle-seconds", type=float, default=60.0)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "typesense_content.json")
    parser.add_argument(
        "--migrate", type=int, default=0, help="documents of a migration under writes instead"
    )
    arguments = parser.parse_args()
    if arguments.migrate:
        result = asyncio.run(run_migration(arguments.migrate))
    else:
        result = asyncio.run(
            run(arguments.collections, arguments.synonyms_each, arguments.keys, arguments.idle_seconds)
        )
    arguments.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({key: value for key, value in result.items() if "requests" not in key}, indent=2))


if __name__ == "__main__":
    main()
