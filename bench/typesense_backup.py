"""Benchmark: a TypesenseBackup of a real 3-node cluster to a real S3 server, and a new 3-node cluster
restored from it, for 10k and 100k small documents.

Runs three real nodes (a kubelet, containerd and runc each) and their control plane, the real
typesense-server 0.24.1 in their pods (the backup and restore Jobs run this checkout's image), the
typesense-operator, and versitygw over HTTPS where the pods reach this machine. For each size it
records:

- the backup: seconds from the TypesenseBackup's creation to Completed, its bytes and files, and its
  throughput (documents and MiB per second);
- the restore, after the cluster and its volumes are deleted: seconds from the new TypesenseCluster's
  creation (spec.bootstrap.fromBackup) to the first node's volume filled (Restored), to QuorumReady with
  all three nodes members, and to every document, synonym and alias on every node; and its throughput.

There is no peer: the Go operator makes no backups. Target: the 100k restore, to every node, under 60 s.

Usage: python bench/typesense_backup.py [--sizes 10000 100000] [--out bench/results/typesense_backup.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import secrets
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from operator_core.kube import Kube
from operator_testkit.drivers.typesense import typesense_rig
from operator_testkit.drivers.typesense_backups import (
    API,
    Library,
    Nodes,
    backup_ended,
    backup_manifest,
    cluster_manifest,
    delete_cluster_and_volumes,
    ready_cluster,
    s3_destination,
    store_s3_secrets,
)
from operator_testkit.fixtures import wait_until
from operator_testkit.image import image_of_sources
from operator_testkit.nodes.images import NodeImage
from operator_testkit.s3 import RunningS3, ensure_versitygw, running_s3

ROOT = Path(__file__).resolve().parent.parent
JOB_IMAGE = "localhost/operator-suite:bench-backup-jobs"
NAMESPACE = "bench"
MIB = 1024 * 1024


async def _size(kube: Kube, s3: RunningS3, bucket: str, documents: int) -> dict[str, Any]:
    name = f"docs{documents // 1000}k"
    library = Library(books=documents, authors=100)
    await kube.create(cluster_manifest(name, NAMESPACE, storage={"size": "2Gi"}))
    await ready_cluster(kube, NAMESPACE, name, timeout=300)
    nodes = await Nodes.of(kube, NAMESPACE, name)
    async with httpx.AsyncClient(trust_env=False, timeout=120) as http:
        started = time.monotonic()
        await library.write(http, nodes)
        written = time.monotonic() - started
        await nodes.on_every_node(
            http, lambda c, pod: library.held_by(c, nodes, pod), "every node holding it"
        )

    backup_name = f"{name}-backup"
    started = time.monotonic()
    await kube.create(backup_manifest(backup_name, NAMESPACE, name, s3_destination(s3, bucket)))
    backup = (await backup_ended(kube, NAMESPACE, backup_name, timeout=600))["status"]
    backup_seconds = time.monotonic() - started
    assert backup["phase"] == "Completed", backup

    await delete_cluster_and_volumes(kube, NAMESPACE, name)
    restored = cluster_manifest(name, NAMESPACE, storage={"size": "2Gi"})
    restored["spec"]["bootstrap"] = {"fromBackup": {"backup": {"name": backup_name}}}
    started = time.monotonic()
    await kube.create(restored)

    async def volume_filled() -> bool:
        cluster = await kube.get(API, "TypesenseCluster", name, NAMESPACE)
        restore = ((cluster or {}).get("status") or {}).get("restore") or {}
        assert restore.get("phase") != "Failed", restore
        return restore.get("phase") == "Completed"

    await wait_until(volume_filled, timeout=600, interval=0.2, what="the first volume filled")
    filled = time.monotonic() - started
    await ready_cluster(kube, NAMESPACE, name, timeout=600)
    ready = time.monotonic() - started
    nodes = await Nodes.of(kube, NAMESPACE, name)
    async with httpx.AsyncClient(trust_env=False, timeout=120) as http:
        await nodes.on_every_node(http, lambda c, pod: library.held_by(c, nodes, pod), "every node restored")
    everywhere = time.monotonic() - started
    size = int(backup["sizeBytes"])
    total = library.books + library.authors
    return {
        "documents": total,
        "import_seconds": round(written, 1),
        "backup": {
            "seconds": round(backup_seconds, 1),
            "bytes": size,
            "files": backup["files"],
            "documents_per_second": round(total / backup_seconds),
            "mib_per_second": round(size / MIB / backup_seconds, 2),
        },
        "restore": {
            "seconds_to_first_volume_filled": round(filled, 1),
            "seconds_to_quorum_ready_3_members": round(ready, 1),
            "seconds_to_every_node_holding_all": round(everywhere, 1),
            "documents_per_second": round(total / everywhere),
            "mib_per_second": round(size / MIB / everywhere, 2),
        },
    }


async def run(sizes: list[int]) -> dict[str, Any]:
    image = await asyncio.to_thread(image_of_sources, ROOT)
    environment = {"OPERATOR_SUITE_BACKUP_IMAGE": JOB_IMAGE}
    jobs = [NodeImage(image.name, (JOB_IMAGE,))]
    async with typesense_rig(ROOT, NAMESPACE, environment, images=jobs) as rig:
        with (
            tempfile.TemporaryDirectory(prefix="bench-s3-") as scratch,
            running_s3(Path(scratch), binary=ensure_versitygw(), tls=True, address=rig.address) as s3,
        ):
            bucket = f"bench-{secrets.token_hex(4)}"
            s3.create_bucket(bucket)
            await store_s3_secrets(rig.kube, NAMESPACE, s3)
            results = {f"{size // 1000}k": await _size(rig.kube, s3, bucket, size) for size in sizes}
    return {
        "benchmark": "typesense_backup",
        "cluster": "3 real nodes (kubelet v1.35.4, containerd 2.3.7, runc), typesense-server 0.24.1; "
        "S3: versitygw v1.8.0 over HTTPS on the nodes' link to this machine",
        "documents": "small: {id, title} with one string field, in two collections (+100 authors)",
        "sizes": results,
        "targets": {"100k": {"restore.seconds_to_every_node_holding_all": 60}},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "typesense_backup.json")
    parser.add_argument("--sizes", nargs="+", type=int, default=[10_000, 100_000])
    arguments = parser.parse_args()
    result = asyncio.run(run(arguments.sizes))
    arguments.out.parent.mkdir(parents=True, exist_ok=True)
    arguments.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
