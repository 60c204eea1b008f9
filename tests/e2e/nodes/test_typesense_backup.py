"""A TypesenseBackup of a real 3-node Typesense cluster (on real nodes) to a real S3 server
(versitygw over HTTPS, its CA from a Secret): a caught-up follower is snapshotted, the suite's image
uploads the snapshot from that node's own volume, the backup is Completed with what it holds, the
manifest and every file are in the bucket; deleting the backup removes them."""

from __future__ import annotations

import json
from typing import Any

import httpx

from operator_core.kube import Kube
from operator_testkit.assertions import wait_for_events
from operator_testkit.drivers.typesense_backups import (
    API,
    Nodes,
    backup_manifest,
    cluster_manifest,
    ready_cluster,
    s3_destination,
    store_s3_secrets,
)
from operator_testkit.fixtures import wait_until
from operator_testkit.operators import OperatorProcess
from operator_testkit.s3 import RunningS3

DOCUMENTS = 200


async def test_a_backup_of_a_ready_cluster_is_taken_from_a_follower_and_is_whole_in_s3(
    kube: Kube,
    namespace: str,
    typesense_operator: OperatorProcess,
    backup_job_image: str,
    s3_server: RunningS3,
    bucket: str,
) -> None:
    await kube.create(cluster_manifest("search", namespace))
    await ready_cluster(kube, namespace, "search")
    nodes = await Nodes.of(kube, namespace, "search")
    headers, addresses = nodes.headers, nodes.addresses

    async with httpx.AsyncClient(trust_env=False, timeout=10) as http:

        async def roles() -> dict[str, str] | None:
            found = {
                pod: (await http.get(f"http://{ip}:8108/status", headers=headers)).json().get("state", "")
                for pod, ip in addresses.items()
            }
            return found if sorted(found.values()) == ["FOLLOWER", "FOLLOWER", "LEADER"] else None

        states: Any = await wait_until(roles, timeout=60, interval=1, what="one leader and two followers")
        leader = addresses[next(pod for pod, state in states.items() if state == "LEADER")]
        schema = {"name": "books", "fields": [{"name": "title", "type": "string"}]}
        assert (
            await http.post(f"http://{leader}:8108/collections", headers=headers, json=schema)
        ).status_code == 201
        lines = "\n".join(json.dumps({"id": str(n), "title": f"Book {n}"}) for n in range(DOCUMENTS))
        imported = await http.post(
            f"http://{leader}:8108/collections/books/documents/import", headers=headers, content=lines
        )
        assert imported.status_code == 200

        async def caught_up() -> bool:
            counts = [
                (await http.get(f"http://{ip}:8108/collections/books", headers=headers))
                .json()
                .get("num_documents")
                for ip in addresses.values()
            ]
            return counts == [DOCUMENTS] * 3

        await wait_until(caught_up, timeout=60, interval=1, what="every node holding the documents")

    await store_s3_secrets(kube, namespace, s3_server)
    await kube.create(backup_manifest("nightly", namespace, "search", s3_destination(s3_server, bucket)))

    seen_jobs: list[dict[str, Any]] = []

    async def completed() -> dict[str, Any] | None:
        job = await kube.get("batch/v1", "Job", "nightly-backup", namespace)
        seen_jobs.extend([job] if job else [])
        found = await kube.get(API, "TypesenseBackup", "nightly", namespace)
        phase = ((found or {}).get("status") or {}).get("phase")
        assert phase != "Failed", (found or {}).get("status")
        return found if phase == "Completed" else None

    done: Any = await wait_until(completed, timeout=180, interval=1, what="the backup Completed")
    status = done["status"]
    assert states[status["node"]] == "FOLLOWER", "a caught-up follower was snapshotted, not the leader"
    assert (status["collections"], status["documents"]) == (1, DOCUMENTS)
    assert status["location"] == f"s3://{bucket}/typesense/{namespace}/search/nightly"
    assert status["files"] > 0
    assert status["sizeBytes"] > 0
    (ready,) = [c for c in status["conditions"] if c["type"] == "Ready"]
    assert (ready["status"], ready["reason"]) == ("True", "Completed")
    await wait_for_events(kube, namespace, "BackupCompleted")

    stored = s3_server.storage / bucket / "typesense" / namespace / "search" / "nightly"
    manifest = json.loads((stored / "manifest.json").read_text())
    assert manifest["node"] == status["node"]
    assert manifest["documents"] == DOCUMENTS
    assert len(manifest["files"]) == status["files"]
    for entry in manifest["files"]:
        assert (stored / entry["path"]).stat().st_size == entry["size"]
    assert seen_jobs, "the backup's Job was seen while it ran"
    job = seen_jobs[-1]

    # Its result is in the status: the ended Job goes, with its pod, which would hold the node's claim.
    async def job_gone() -> bool:
        return await kube.get("batch/v1", "Job", "nightly-backup", namespace) is None

    await wait_until(job_gone, timeout=30, interval=0.5, what="the ended backup Job deleted")
    snapshotted = await kube.get("v1", "Pod", status["node"], namespace)
    assert snapshotted is not None
    affinity = job["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]
    (term,) = affinity["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert term["matchFields"][0]["values"] == [snapshotted["spec"]["nodeName"]], "on the snapshot's node"
    for container in job["spec"]["template"]["spec"]["containers"]:
        assert s3_server.secret_key not in json.dumps(container), "the key only by reference"

    await kube.delete(API, "TypesenseBackup", "nightly", namespace)

    async def removed() -> bool:
        return (
            not (stored / "manifest.json").exists()
            and await kube.get(API, "TypesenseBackup", "nightly", namespace) is None
        )

    await wait_until(removed, timeout=120, interval=1, what="the backup's data removed and the backup gone")
