"""A TypesenseScheduledBackup's reconcile against a stand-in API: it makes its backup once and says so,
prunes beyond its retention while suspended, names a schedule's bad field once, and a second look with
nothing new writes nothing."""

from __future__ import annotations

from typing import Any

from test_backup_schedule import at, schedule_object

from operator_core import errors
from operator_core.reconciling import Context
from operator_core.settings import KubeSettings
from recording import Recorder
from typesense_operator.backup.schedule import Schedule, scheduled_backup
from typesense_operator.controller.schedule.reconcile import reconcile_schedule


class FakeKube:
    """The schedule's cluster and backups in memory; counts every write."""

    def __init__(self, cluster_phase: str = "QuorumReady") -> None:
        self.cluster = {"metadata": {"name": "search"}, "status": {"phase": cluster_phase}}
        self.backups: dict[str, dict[str, Any]] = {}
        self.writes: list[tuple[str, Any]] = []

    async def get(self, api_version: str, kind: str, name: str, namespace: str) -> dict[str, Any] | None:
        return self.cluster if (kind, name) == ("TypesenseCluster", "search") else None

    async def list(self, api_version: str, kind: str, namespace: str, *, labels: Any) -> list[dict[str, Any]]:
        return [b for b in self.backups.values() if b["metadata"]["labels"].items() >= labels.items()]

    async def create(self, manifest: dict[str, Any]) -> dict[str, Any]:
        name = manifest["metadata"]["name"]
        self.writes.append(("create", name))
        if name in self.backups:
            raise errors.Conflict(f"{name} exists", status=409)
        self.backups[name] = {
            **manifest,
            "metadata": {**manifest["metadata"], "creationTimestamp": "2026-11-26T10:00:31Z"},
        }
        return self.backups[name]

    async def delete(self, api_version: str, kind: str, name: str, namespace: str) -> bool:
        self.writes.append(("delete", name))
        return self.backups.pop(name, None) is not None

    async def patch_status(self, api_version: str, kind: str, name: str, namespace: str, status: Any) -> None:
        self.writes.append(("status", dict(status)))


async def reconcile(
    kube: FakeKube, obj: dict[str, Any], recorder: Recorder, now: str = "10:00:31"
) -> dict[str, Any]:
    """One reconcile at ``now``; returns the object with the status it wrote."""
    context = Context(kube, recorder, KubeSettings())  # type: ignore[arg-type]
    await reconcile_schedule(obj, context, clock=lambda: at(now))
    status = dict(obj.get("status") or {})
    for kind, written in kube.writes:
        if kind == "status":
            status.update(written)
    return {**obj, "status": {key: value for key, value in status.items() if value is not None}}


async def test_a_schedule_makes_its_immediate_backup_once_and_a_second_look_writes_nothing() -> None:
    kube, recorder = FakeKube(), Recorder()
    obj = await reconcile(kube, schedule_object(), recorder)
    assert [w for w in kube.writes if w[0] == "create"] == [("create", "nightly-20261126100030")]
    assert obj["status"]["lastScheduleTime"] == "2026-11-26T10:00:30Z"
    assert obj["status"]["lastBackup"] == "nightly-20261126100030"
    (ready,) = obj["status"]["conditions"]
    assert (ready["type"], ready["status"], ready["reason"]) == ("Ready", "True", "Scheduled")
    assert ready["message"] == f"next backup at {obj['status']['nextScheduleTime']}"
    assert recorder.events == [
        ("Normal", "BackupScheduled", "made TypesenseBackup nightly-20261126100030 for 2026-11-26T10:00:30Z")
    ]
    kube.writes.clear()
    await reconcile(kube, obj, recorder)
    assert kube.writes == [], "nothing new: no write at all"


async def test_a_suspended_schedule_makes_nothing_and_still_prunes_beyond_its_retention() -> None:
    kube, recorder = FakeKube(), Recorder()
    schedule = Schedule.from_object(schedule_object())
    for hour in (1, 2, 3):
        made = scheduled_backup(schedule, at(f"0{hour}:00"))
        completed = f"2026-11-26T0{hour}:05:00Z"
        made["metadata"]["creationTimestamp"] = f"2026-11-26T0{hour}:00:01Z"
        kube.backups[made["metadata"]["name"]] = {
            **made,
            "status": {"phase": "Completed", "completedAt": completed},
        }
    obj = await reconcile(kube, schedule_object(suspend=True), recorder)
    assert [w for w in kube.writes if w[0] != "status"] == [("delete", "nightly-20261126010000")]
    assert recorder.events == [
        ("Normal", "BackupPruned", "deleted TypesenseBackup nightly-20261126010000: beyond the retention")
    ]
    conditions = {c["type"]: c for c in obj["status"]["conditions"]}
    assert (conditions["Suspended"]["status"], conditions["Suspended"]["reason"]) == ("True", "Suspended")
    assert (conditions["Ready"]["status"], conditions["Ready"]["reason"]) == ("True", "Suspended")
    assert "nextScheduleTime" not in obj["status"]


async def test_a_schedule_that_cannot_fire_says_which_field_once() -> None:
    kube, recorder = FakeKube(), Recorder()
    obj = await reconcile(kube, schedule_object(schedule="61 * * * *"), recorder)
    (ready,) = obj["status"]["conditions"]
    assert (ready["status"], ready["reason"]) == ("False", "InvalidSchedule")
    assert ready["message"] == "spec.schedule '61 * * * *': minute: 61 is outside 0-59"
    assert recorder.events == [("Warning", "InvalidSchedule", ready["message"])]
    kube.writes.clear()
    await reconcile(kube, obj, recorder)
    assert kube.writes == []
    assert len(recorder.events) == 1
