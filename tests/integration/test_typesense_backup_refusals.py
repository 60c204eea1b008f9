"""A TypesenseBackup the operator refuses, against the real API server: of a cluster that does not exist,
or whose quorum is not ready (no node runs here). Each fails at once with its reason in the Ready
condition and one Warning Event, is never written again, and leaves no Job behind; the CRD's columns
and its immutable spec are what a user sees."""

from __future__ import annotations

from typing import Any

import pytest

from operator_core.errors import Invalid
from operator_core.kube import Kube
from operator_testkit.assertions import wait_for_events
from operator_testkit.fixtures import wait_until

pytestmark = pytest.mark.usefixtures("typesense_operator")

API = "ts.opentelekomcloud.com/v1alpha1"
DESTINATION = {"volume": {"claimName": "backups"}}


def backup(name: str, namespace: str, cluster: str) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "TypesenseBackup",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"cluster": {"name": cluster}, "destination": DESTINATION},
    }


async def failed(kube: Kube, namespace: str, name: str) -> dict[str, Any]:
    async def done() -> dict[str, Any] | None:
        found = await kube.get(API, "TypesenseBackup", name, namespace)
        return found if ((found or {}).get("status") or {}).get("phase") == "Failed" else None

    result: dict[str, Any] = await wait_until(done, timeout=30, what=f"TypesenseBackup {name} Failed")
    return result


def ready(obj: dict[str, Any]) -> dict[str, Any]:
    (condition,) = [c for c in obj["status"]["conditions"] if c["type"] == "Ready"]
    return dict(condition)


async def test_a_backup_of_a_cluster_that_is_not_quorum_ready_is_refused_with_its_reason(
    kube: Kube, namespace: str
) -> None:
    await kube.create(
        {
            "apiVersion": API,
            "kind": "TypesenseCluster",
            "metadata": {"name": "search", "namespace": namespace},
            "spec": {"image": "typesense/typesense:27.1"},
        }
    )
    await kube.create(backup("too-early", namespace, "search"))
    refused = await failed(kube, namespace, "too-early")
    condition = ready(refused)
    assert condition["status"] == "False"
    assert condition["reason"] == "ClusterNotReady"
    assert "not QuorumReady: only a cluster whose quorum is ready is backed up" in condition["message"]
    assert refused["status"]["completedAt"]
    (warning,) = await wait_for_events(kube, namespace, "BackupFailed")
    assert warning["type"] == "Warning"
    assert warning["involvedObject"]["name"] == "too-early"
    assert warning["message"] == condition["message"]
    assert await kube.list("batch/v1", "Job", namespace) == []
    version = refused["metadata"]["resourceVersion"]
    await kube.patch(
        API, "TypesenseBackup", "too-early", namespace, {"metadata": {"labels": {"look": "again"}}}
    )
    again = await kube.get(API, "TypesenseBackup", "too-early", namespace)
    assert again is not None
    assert again["status"] == refused["status"], "a failed backup is final: never written again"
    assert again["metadata"]["resourceVersion"] != version


async def test_a_backup_of_a_cluster_that_does_not_exist_says_so(kube: Kube, namespace: str) -> None:
    await kube.create(backup("orphan", namespace, "no-such-cluster"))
    condition = ready(await failed(kube, namespace, "orphan"))
    assert condition["reason"] == "ClusterNotFound"
    assert condition["message"] == f"TypesenseCluster no-such-cluster does not exist in namespace {namespace}"


async def test_a_backups_spec_is_not_changed_once_asked_for(kube: Kube, namespace: str) -> None:
    await kube.create(backup("fixed", namespace, "search"))
    with pytest.raises(Invalid, match="spec is immutable once set"):
        await kube.patch(API, "TypesenseBackup", "fixed", namespace, {"spec": {"deletionPolicy": "Retain"}})


async def test_a_namespace_being_deleted_lets_its_backups_go_though_their_data_cannot_be_removed(
    kube: Kube, namespace: str
) -> None:
    """A backup that wrote somewhere (status.location) and whose data is to be removed, in a namespace
    being deleted: no removal Job can be made there, so the backup goes all the same (the data stays),
    and the namespace is not held."""
    await kube.create(backup("written", namespace, "gone-cluster"))
    await failed(kube, namespace, "written")
    stored = await kube.get(API, "TypesenseBackup", "written", namespace)
    assert stored is not None
    assert stored["metadata"]["finalizers"] == ["ts.opentelekomcloud.com/backup-data"]
    await kube.patch_status(API, "TypesenseBackup", "written", namespace, {"location": "s3://bucket/x"})
    await kube.delete("v1", "Namespace", namespace)

    async def namespace_gone() -> bool:
        return await kube.get("v1", "Namespace", namespace) is None

    await wait_until(namespace_gone, timeout=60, what="the namespace, its backup let go")
