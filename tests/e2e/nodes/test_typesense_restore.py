"""The whole backup journey on real parts: a real 3-node Typesense cluster (on real nodes) holds
documents in two collections, a synonym and an alias; it is backed up (to a real S3 server over HTTPS,
or to a PersistentVolumeClaim); a synonym and an alias are declared as objects after that; the cluster
and its volumes are deleted (with the volume, its TypesenseBackup too: the backup is then found by its
location); a new 3-node cluster restored from the backup serves all of it on every node, is
QuorumReady, and gets the declared synonym and alias back from their objects. Before the good backup,
backups that cannot reach their storage (a wrong key, an endpoint nobody listens on) fail with the
reason, leave nothing in the bucket, and leave the cluster as it was. The cluster backed up to a
volume, and the one restored from it, serve their API over TLS (spec.tls): the operator's snapshot and
every check here go over verified HTTPS."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from operator_core.kube import Kube
from operator_testkit.drivers.typesense import certificate_names, certificate_secret
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
from operator_testkit.operators import OperatorProcess
from operator_testkit.pki import CertificateAuthority
from operator_testkit.s3 import RunningS3

LIBRARY = Library(books=300, authors=40)
DECLARED_AFTER_THE_BACKUP = (
    ("TypesenseSynonym", "after-the-backup", {"collection": "books", "synonyms": ["tome", "volume"]}),
    ("TypesenseAlias", "library", {"collection": "books"}),
)


async def content_ready(kube: Kube, namespace: str, kind: str, name: str) -> None:
    async def ready() -> bool:
        found = await kube.get(API, kind, name, namespace)
        conditions = ((found or {}).get("status") or {}).get("conditions") or []
        return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)

    await wait_until(ready, timeout=60, interval=0.5, what=f"{kind} {name} Ready")


def _objects(s3: RunningS3, bucket: str) -> list[str]:
    """The bucket's objects (its posix backend keeps each as a file of its folder)."""
    return sorted(
        str(path.relative_to(s3.storage / bucket))
        for path in (s3.storage / bucket).rglob("*")
        if path.is_file()
    )


async def _failing_backups_leave_nothing(
    kube: Kube, namespace: str, s3: RunningS3, bucket: str, nodes: Nodes
) -> None:
    """A wrong secret key, then an endpoint where nothing listens: each backup fails with the
    storage's reason, nothing is left in the bucket, and the cluster keeps serving everything."""
    wrong_key = {**s3_destination(s3, bucket, prefix="wrong-key")}
    wrong_key["s3"] = {
        **wrong_key["s3"],
        "credentials": {
            "accessKeyId": {"name": "s3-user", "key": "ACCESS_KEY_ID"},
            "secretAccessKey": {"name": "s3-wrong", "key": "SECRET_ACCESS_KEY"},
        },
    }
    nobody = s3_destination(s3, bucket, prefix="nobody")
    nobody["s3"] = {**nobody["s3"], "endpoint": "https://127.0.0.1:9"}
    failing = (
        ("wrong-key", wrong_key, "SignatureDoesNotMatch"),
        ("nobody-listens", nobody, "127.0.0.1:9"),
    )
    for name, destination, _ in failing:  # at once: each retries (bounded) before it fails
        await kube.create(backup_manifest(name, namespace, "search", destination))
    for name, _, said in failing:
        failed = (await backup_ended(kube, namespace, name))["status"]
        assert failed["phase"] == "Failed", failed
        (ready,) = [c for c in failed["conditions"] if c["type"] == "Ready"]
        assert (ready["status"], ready["reason"]) == ("False", "UploadFailed")
        assert said in ready["message"], ready["message"]
        assert s3.secret_key not in str(failed)
        assert "wrong-secret" not in str(failed)
    events = str(await kube.list("v1", "Event", namespace))
    assert "SignatureDoesNotMatch" in events, "the reason is in the Events"
    assert s3.secret_key not in events
    assert "wrong-secret" not in events
    assert _objects(s3, bucket) == [], "a failed backup left objects behind"
    cluster = await kube.get(API, "TypesenseCluster", "search", namespace)
    assert ((cluster or {}).get("status") or {}).get("phase") == "QuorumReady"
    async with httpx.AsyncClient(trust_env=False, timeout=10) as http:
        for pod in nodes.addresses:
            assert await LIBRARY.held_by(http, nodes, pod), f"{pod} lost data to a failed backup"


@pytest.mark.timeout(600)
@pytest.mark.parametrize("where", ["s3", "volume"])
async def test_a_cluster_deleted_with_its_volumes_is_restored_whole_from_its_backup(
    kube: Kube,
    namespace: str,
    typesense_operator: OperatorProcess,
    backup_job_image: str,
    s3_server: RunningS3,
    bucket: str,
    where: str,
) -> None:
    tls: dict[str, Any] = {}
    ca = None
    if where == "volume":
        authority = CertificateAuthority.create("backups-ca")
        certificate = authority.issue(*certificate_names("search", namespace))
        await kube.create(certificate_secret("search-certificate", namespace, certificate, authority.pem))
        tls, ca = {"tls": {"certificateSecret": {"name": "search-certificate"}}}, authority.pem
    await kube.create(cluster_manifest("search", namespace, **tls))
    if where == "s3":
        await store_s3_secrets(kube, namespace, s3_server)
        await kube.create(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "s3-wrong", "namespace": namespace},
                "stringData": {"SECRET_ACCESS_KEY": "wrong-secret"},
            }
        )
        destination: dict[str, Any] = s3_destination(s3_server, bucket)
    else:
        claim = {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "backups", "namespace": namespace},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "200Mi"}}},
        }
        await kube.create(claim)
        destination = {"volume": {"claimName": "backups", "subPath": "typesense"}}
    await ready_cluster(kube, namespace, "search")
    nodes = await Nodes.of(kube, namespace, "search")
    assert len(nodes.server_names) == (3 if tls else 0), nodes.server_names
    async with nodes.client(ca) as http:
        await LIBRARY.write(http, nodes)
        await nodes.on_every_node(
            http, lambda client, pod: LIBRARY.held_by(client, nodes, pod), "every node holding the library"
        )
    if where == "s3":
        await _failing_backups_leave_nothing(kube, namespace, s3_server, bucket, nodes)

    made = backup_manifest("before-the-fall", namespace, "search", destination)
    made["spec"]["deletionPolicy"] = "Retain"
    await kube.create(made)
    backup = (await backup_ended(kube, namespace, "before-the-fall"))["status"]
    assert backup["phase"] == "Completed", backup
    assert (backup["collections"], backup["documents"]) == (2, LIBRARY.books + LIBRARY.authors)

    # Declared after the backup was taken: the restored cluster gets them from their objects, which
    # wait while the cluster is gone and go in as soon as the restored one is QuorumReady.
    for kind, name, spec in DECLARED_AFTER_THE_BACKUP:
        await kube.create(
            {
                "apiVersion": API,
                "kind": kind,
                "metadata": {"name": name, "namespace": namespace},
                "spec": {"cluster": {"name": "search"}, **spec},
            }
        )
        await content_ready(kube, namespace, kind, name)

    await delete_cluster_and_volumes(kube, namespace, "search")
    restored = cluster_manifest("search", namespace, **tls)
    if where == "s3":
        restored["spec"]["bootstrap"] = {"fromBackup": {"backup": {"name": "before-the-fall"}}}
    else:
        # The disaster took the TypesenseBackup too (its data kept: Retain): found by where it is.
        await kube.delete(API, "TypesenseBackup", "before-the-fall", namespace)
        location = {"destination": destination, "path": f"{namespace}/search/before-the-fall"}
        restored["spec"]["bootstrap"] = {"fromBackup": {"location": location}}
    await kube.create(restored)
    cluster = await ready_cluster(kube, namespace, "search")
    status = cluster["status"]
    assert status["restore"]["phase"] == "Completed", status["restore"]
    assert status["restore"]["location"] == backup["location"]
    assert status["restore"].get("backup") == ("before-the-fall" if where == "s3" else None)
    (condition,) = [c for c in status["conditions"] if c["type"] == "Restored"]
    assert condition["status"] == "True", condition

    nodes = await Nodes.of(kube, namespace, "search")
    assert len(nodes.addresses) == 3
    assert len(nodes.server_names) == (3 if tls else 0), "the restored cluster serves HTTPS too"
    async with nodes.client(ca) as http:
        # Ready after a restore means served: every node holds the whole library at once, no waiting.
        for pod in nodes.addresses:
            assert await LIBRARY.held_by(http, nodes, pod), f"{pod} does not serve the restore at Ready"
        assert status["restore"].get("servedByEveryNodeAt"), status["restore"]
        # The restored cluster takes writes, and they reach every node.
        leader = await nodes.leader(http)
        written = await http.post(
            nodes.url(leader, "/collections/authors/documents"),
            headers=nodes.headers,
            json={"id": "new", "title": "written after the restore"},
        )
        assert written.status_code == 201, written.text

        async def has_new(client: httpx.AsyncClient, pod: str) -> bool:
            answer = await client.get(
                nodes.url(pod, "/collections/authors/documents/new"), headers=nodes.headers
            )
            return answer.status_code == 200

        await nodes.on_every_node(http, has_new, "the new document on every node")

        async def declared_back(client: httpx.AsyncClient, pod: str) -> bool:
            synonym = await client.get(
                nodes.url(pod, "/collections/books/synonyms/after-the-backup"), headers=nodes.headers
            )
            alias = await client.get(nodes.url(pod, "/aliases/library"), headers=nodes.headers)
            return synonym.status_code == 200 and alias.status_code == 200

        await nodes.on_every_node(
            http, declared_back, "the declared synonym and alias on every restored node"
        )
