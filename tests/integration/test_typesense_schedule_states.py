"""A TypesenseScheduledBackup against the real API server, where no Typesense runs (no cluster here is
ever QuorumReady): a schedule the operator cannot parse names its bad field, once, and a look with
nothing new writes nothing; a suspended schedule says so, its retention still prunes, and it says when
it is resumed; a schedule of a missing cluster says so, and notices the cluster as
soon as it is made; deleting a schedule deletes its backups."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest

from operator_core.kube import Kube
from operator_testkit.assertions import (
    reconciles_counted,
    settle,
    wait_for_events,
    wait_for_reconcile,
    writes_since,
)
from operator_testkit.controlplane import ControlPlane
from operator_testkit.fixtures import wait_until
from operator_testkit.operators import OperatorProcess

pytestmark = pytest.mark.usefixtures("typesense_operator")

API = "ts.opentelekomcloud.com/v1alpha1"
OPERATOR_USER = "system:serviceaccount:typesense-system:typesense-operator"
SCHEDULE_LABEL = "ts.opentelekomcloud.com/schedule"
NEW_YEAR = "0 0 1 1 *"
"""A schedule that does not fire while a test runs (the times a schedule fires: tests/unit)."""


def schedule(name: str, namespace: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "TypesenseScheduledBackup",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "cluster": {"name": "search"},
            "schedule": "* * * * *",
            "destination": {"volume": {"claimName": "backups"}},
            **spec,
        },
    }


def cluster(namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "TypesenseCluster",
        "metadata": {"name": "search", "namespace": namespace},
        "spec": {"image": "typesense/typesense:27.1"},
    }


async def condition(
    kube: Kube, namespace: str, name: str, condition_type: str, status: str, reason: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The schedule once its condition is so, and that condition."""

    async def found() -> tuple[dict[str, Any], dict[str, Any]] | None:
        obj = await kube.get(API, "TypesenseScheduledBackup", name, namespace)
        for entry in ((obj or {}).get("status") or {}).get("conditions") or []:
            if entry["type"] == condition_type and (entry["status"], entry["reason"]) == (status, reason):
                assert obj is not None
                return obj, entry
        return None

    what = f"{name} {condition_type}={status} ({reason})"
    result: tuple[dict[str, Any], dict[str, Any]] = await wait_until(found, timeout=30, what=what)  # type: ignore[assignment]
    return result


async def backups(kube: Kube, namespace: str) -> list[str]:
    return sorted(b["metadata"]["name"] for b in await kube.list(API, "TypesenseBackup", namespace))


async def test_a_schedule_that_never_fires_names_its_field_once_and_a_look_writes_nothing(
    kube: Kube, namespace: str, control_plane: ControlPlane, typesense_operator: OperatorProcess
) -> None:
    await kube.create(cluster(namespace))
    await kube.create(schedule("hourly", namespace, schedule="61 * * * *"))
    obj, ready = await condition(kube, namespace, "hourly", "Ready", "False", "InvalidSchedule")
    assert ready["message"] == "spec.schedule '61 * * * *': minute: 61 is outside 0-59"
    assert "nextScheduleTime" not in obj["status"]
    (warning,) = await wait_for_events(kube, namespace, "InvalidSchedule")
    assert (warning["type"], warning["message"]) == ("Warning", ready["message"])

    settled = await settle(control_plane, OPERATOR_USER, namespace)
    before = await reconciles_counted(typesense_operator, at_or_after=time.time())
    poke = {"metadata": {"labels": {"poke": uuid.uuid4().hex}}}
    await kube.patch(API, "TypesenseScheduledBackup", "hourly", namespace, poke)
    await wait_for_reconcile(typesense_operator, more_than=before, since=time.time())
    assert writes_since(control_plane, OPERATOR_USER, namespace, settled) == []
    assert len(await wait_for_events(kube, namespace, "InvalidSchedule")) == 1
    assert await backups(kube, namespace) == []


async def test_a_suspended_schedule_says_so_prunes_all_the_same_and_says_when_it_is_resumed(
    kube: Kube, namespace: str
) -> None:
    await kube.create(cluster(namespace))
    made = await kube.create(
        schedule("nightly", namespace, schedule=NEW_YEAR, suspend=True, retention={"keep": 1})
    )
    obj, suspended = await condition(kube, namespace, "nightly", "Suspended", "True", "Suspended")
    assert suspended["message"] == "no new backup while spec.suspend is true; retention still applies"
    ready = next(c for c in obj["status"]["conditions"] if c["type"] == "Ready")
    assert (ready["status"], ready["reason"]) == ("True", "Suspended")
    assert "nextScheduleTime" not in obj["status"]
    assert await backups(kube, namespace) == []

    # Three backups of its own, as if made before it was suspended: the two older go.
    owner = {
        "apiVersion": API,
        "kind": "TypesenseScheduledBackup",
        "name": "nightly",
        "uid": made["metadata"]["uid"],
        "controller": True,
    }
    names = [f"nightly-2026112{day}030000" for day in (3, 4, 5)]
    for name in names:
        labels = {
            SCHEDULE_LABEL: "nightly",
            "app.kubernetes.io/instance": "nightly",
            "app.kubernetes.io/managed-by": "typesense-operator",
        }
        await kube.create(
            {
                "apiVersion": API,
                "kind": "TypesenseBackup",
                "metadata": {
                    "name": name,
                    "namespace": namespace,
                    "labels": labels,
                    "ownerReferences": [owner],
                },
                "spec": {
                    "cluster": {"name": "search"},
                    "destination": {"volume": {"claimName": "backups"}},
                    "deletionPolicy": "Retain",
                },
            }
        )
    for number, name in enumerate(names):

        async def failed(name: str = name) -> bool:
            found = await kube.get(API, "TypesenseBackup", name, namespace)
            return ((found or {}).get("status") or {}).get("phase") == "Failed"

        await wait_until(failed, what=f"{name} refused (the cluster is not QuorumReady)")
        # Completed, as far as the schedule can tell: a final phase, which the backup's controller keeps.
        completed = {"phase": "Completed", "completedAt": f"2026-11-2{3 + number}T03:10:00Z"}
        await kube.patch_status(API, "TypesenseBackup", name, namespace, completed)

    async def pruned() -> bool:
        return await backups(kube, namespace) == names[-1:]

    await wait_until(pruned, what="the two older backups pruned")
    notes = sorted(e["message"] for e in await wait_for_events(kube, namespace, "BackupPruned", 2))
    assert notes == [f"deleted TypesenseBackup {name}: beyond the retention" for name in names[:2]]

    await kube.patch(API, "TypesenseScheduledBackup", "nightly", namespace, {"spec": {"suspend": False}})
    obj, resumed = await condition(kube, namespace, "nightly", "Suspended", "False", "Resumed")
    assert resumed["message"] == "resumed: the times missed while suspended are not made up"
    ready = next(c for c in obj["status"]["conditions"] if c["type"] == "Ready")
    assert (ready["status"], ready["reason"]) == ("True", "Scheduled")
    assert ready["message"] == f"next backup at {obj['status']['nextScheduleTime']}"
    assert await backups(kube, namespace) == names[-1:]

    # Its backups are its children: deleting the schedule deletes them (the garbage collector).
    await kube.delete(API, "TypesenseScheduledBackup", "nightly", namespace)

    async def collected() -> bool:
        return await backups(kube, namespace) == []

    await wait_until(collected, timeout=60, what="the schedule's backups deleted with it")


async def test_a_schedule_of_a_missing_cluster_says_so_and_notices_the_cluster_when_it_is_made(
    kube: Kube, namespace: str
) -> None:
    await kube.create(schedule("early", namespace, schedule=NEW_YEAR, immediate=True))
    obj, ready = await condition(kube, namespace, "early", "Ready", "False", "ClusterNotFound")
    assert ready["message"] == f"TypesenseCluster search does not exist in namespace {namespace}"
    assert "nextScheduleTime" not in obj["status"]
    (warning,) = await wait_for_events(kube, namespace, "ClusterNotFound")
    assert warning["type"] == "Warning"

    await kube.create(cluster(namespace))  # woken by it, not by the resync (minutes away)
    obj, ready = await condition(kube, namespace, "early", "Ready", "True", "Scheduled")
    assert ready["message"] == (
        "the immediate backup waits for the cluster to be QuorumReady; "
        f"next backup at {obj['status']['nextScheduleTime']}"
    )
