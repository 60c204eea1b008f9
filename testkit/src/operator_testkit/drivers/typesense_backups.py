"""TypesenseBackups and restores, driven as a user would, for end-to-end tests and bench/typesense_backup.py:
a TypesenseCluster made ready, a library of data written into it (documents in two collections, a
synonym, an alias) and found again on every node, the storage Secrets and a destination in a real S3
server."""

from __future__ import annotations

import asyncio
import base64
import json
import time
from dataclasses import dataclass
from typing import Any, cast

import httpx

from operator_core.kube import Kube
from operator_testkit.drivers.typesense import Nodes
from operator_testkit.fixtures import wait_until
from operator_testkit.s3 import RunningS3

API = "ts.opentelekomcloud.com/v1alpha1"
IMAGE = "typesense/typesense:27.1"
LAGGING_WITHIN = 30.0
"""How long a write refused with 503 "Not Ready or Lagging" is asked again: a leader elected moments
before applies its log first (seconds on a loaded machine)."""


def secret(name: str, namespace: str, data: dict[str, str]) -> dict[str, Any]:
    encoded = {key: base64.b64encode(value.encode()).decode() for key, value in data.items()}
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace},
        "data": encoded,
    }


def cluster_manifest(name: str, namespace: str, replicas: int = 3, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "TypesenseCluster",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"image": IMAGE, "replicas": replicas, "storage": {"size": "100Mi"}, **spec},
    }


async def ready_cluster(kube: Kube, namespace: str, name: str, timeout: float = 180) -> dict[str, Any]:
    """The cluster once it is QuorumReady with every node a member (not growing back)."""

    async def ready() -> dict[str, Any] | None:
        cluster = await kube.get(API, "TypesenseCluster", name, namespace)
        status = (cluster or {}).get("status") or {}
        whole = not (status.get("quorum") or {}).get("members")
        return cluster if status.get("phase") == "QuorumReady" and whole else None

    return cast(
        dict[str, Any], await wait_until(ready, timeout=timeout, interval=0.5, what=f"{name} QuorumReady")
    )


async def store_s3_secrets(
    kube: Kube, namespace: str, s3: RunningS3, *, secret_key: str | None = None
) -> None:
    """Secrets s3-user (the access key; ``secret_key`` replaces the right one) and s3-ca."""
    assert s3.ca_cert is not None
    user = {"ACCESS_KEY_ID": s3.access_key, "SECRET_ACCESS_KEY": secret_key or s3.secret_key}
    await kube.create(secret("s3-user", namespace, user))
    await kube.create(secret("s3-ca", namespace, {"ca.crt": s3.ca_cert.read_text()}))


def s3_destination(s3: RunningS3, bucket: str, prefix: str = "typesense") -> dict[str, Any]:
    """A destination in ``bucket``, reached with the Secrets of :func:`store_s3_secrets`."""
    return {
        "s3": {
            "bucket": bucket,
            "prefix": prefix,
            "endpoint": s3.endpoint,
            "region": s3.region,
            "credentials": {
                "accessKeyId": {"name": "s3-user", "key": "ACCESS_KEY_ID"},
                "secretAccessKey": {"name": "s3-user", "key": "SECRET_ACCESS_KEY"},
            },
            "ca": {"name": "s3-ca", "key": "ca.crt"},
        }
    }


def backup_manifest(name: str, namespace: str, cluster: str, destination: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "TypesenseBackup",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"cluster": {"name": cluster}, "destination": destination},
    }


async def backup_ended(kube: Kube, namespace: str, name: str, timeout: float = 180) -> dict[str, Any]:
    """The backup once it is Completed or Failed."""

    async def ended() -> dict[str, Any] | None:
        found = await kube.get(API, "TypesenseBackup", name, namespace)
        phase = ((found or {}).get("status") or {}).get("phase")
        return found if phase in ("Completed", "Failed") else None

    found = await wait_until(ended, timeout=timeout, interval=0.5, what=f"backup {name} ended")
    return cast(dict[str, Any], found)


async def delete_cluster_and_volumes(kube: Kube, namespace: str, name: str) -> None:
    """The disaster: the cluster deleted, then its volumes (which it keeps)."""
    await kube.delete(API, "TypesenseCluster", name, namespace)
    labels = {"app.kubernetes.io/instance": name}

    async def no_pods() -> bool:
        return not await kube.list("v1", "Pod", namespace, labels=labels)

    await wait_until(no_pods, timeout=120, interval=0.5, what="the cluster's pods gone")
    claims = await kube.list("v1", "PersistentVolumeClaim", namespace, labels=labels)
    for claim in claims:
        await kube.delete("v1", "PersistentVolumeClaim", claim["metadata"]["name"], namespace)

    async def no_claims() -> bool:
        return not await kube.list("v1", "PersistentVolumeClaim", namespace, labels=labels)

    await wait_until(no_claims, timeout=60, interval=0.5, what="the cluster's claims gone")


@dataclass(frozen=True)
class Library:
    """What a restore must bring back: documents in two collections, a synonym and an alias."""

    books: int = 300
    authors: int = 40

    async def write(self, http: httpx.AsyncClient, nodes: Nodes) -> None:
        leader = await nodes.leader(http)

        async def call(method: str, path: str, **kwargs: Any) -> httpx.Response:
            nonlocal leader
            deadline = time.monotonic() + LAGGING_WITHIN
            while True:
                answer = await http.request(method, nodes.url(leader, path), headers=nodes.headers, **kwargs)
                if answer.status_code != 503 or time.monotonic() > deadline:
                    break
                # 503 "Not Ready or Lagging": refused unapplied, by a leader still applying its log (a
                # Ready cluster may have elected again since), so asked again, of the leader then.
                await asyncio.sleep(0.5)
                leader = await nodes.leader(http)
            assert answer.status_code in (200, 201), (path, answer.status_code, answer.text)
            return answer

        for collection, count in (("books", self.books), ("authors", self.authors)):
            schema = {"name": collection, "fields": [{"name": "title", "type": "string"}]}
            await call("POST", "/collections", json=schema)
            for start in range(0, count, 10_000):
                lines = "\n".join(
                    json.dumps({"id": str(n), "title": f"{collection} {n}"})
                    for n in range(start, min(count, start + 10_000))
                )
                answer = await call("POST", f"/collections/{collection}/documents/import", content=lines)
                assert '"success":false' not in answer.text, answer.text[:300]
        await call("PUT", "/collections/books/synonyms/tome", json={"synonyms": ["book", "tome", "volume"]})
        await call("PUT", "/aliases/library", json={"collection_name": "books"})

    async def held_by(self, http: httpx.AsyncClient, nodes: Nodes, pod: str) -> bool:
        """Whether ``pod`` serves all of it."""

        async def get(path: str) -> Any:
            answer = await http.get(nodes.url(pod, path), headers=nodes.headers)
            return answer.json() if answer.status_code == 200 else None

        counts = {c["name"]: c["num_documents"] for c in (await get("/collections") or [])}
        synonym = await get("/collections/books/synonyms/tome")
        alias = await get("/aliases/library")
        last_book = await get(f"/collections/books/documents/{self.books - 1}")
        return (
            counts == {"books": self.books, "authors": self.authors}
            and sorted((synonym or {}).get("synonyms") or []) == ["book", "tome", "volume"]
            and (alias or {}).get("collection_name") == "books"
            and (last_book or {}).get("title") == f"books {self.books - 1}"
        )
