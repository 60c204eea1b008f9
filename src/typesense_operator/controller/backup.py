"""One TypesenseBackup, from asked-for to Completed or Failed, and its data removed when it goes.

Pending → the cluster is looked at (it must be QuorumReady), its nodes are probed, a caught-up
follower is chosen (:func:`~typesense_operator.backup.decide.choose_node`), asked for a snapshot, and
the backup Job is made on that node (:func:`~typesense_operator.resources.backup.backup_job`); Running
→ the Job's end is awaited (its changes wake the backup) and its termination message read back;
Completed and Failed are final: such a backup is never written again.

The operator never reads the storage credentials: only the Job does, from their Secrets.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from operator_core import errors
from operator_core.conditions import utcnow
from operator_core.controller import FINALIZED
from operator_core.kube import Kube
from operator_core.reconciling import WAIT_FOR_CHANGE, Context
from operator_core.secrets import register_secret
from operator_core.steps import ConditionBook, write_status
from typesense_operator.api import TYPESENSE_CLUSTER
from typesense_operator.api.backups import TYPESENSE_BACKUP
from typesense_operator.api.reasons import BackupReason, EventReason
from typesense_operator.backup.decide import NotBackedUp, choose_node
from typesense_operator.backup.node import SnapshotFailed, take_snapshot
from typesense_operator.controller.reconcile import decoded_key, node_targets, probe_cluster
from typesense_operator.controller.settings import TypesenseSettings
from typesense_operator.quorum.probe import NodeAddressing
from typesense_operator.resources.backup import (
    Backup,
    backup_job,
    backup_job_name,
    backup_location,
    remove_job,
    remove_job_name,
    snapshot_dir,
)
from typesense_operator.resources.model import Cluster

__all__ = ["DATA_FINALIZER", "finalize_backup", "reconcile_backup", "removes_data"]

DATA_FINALIZER = "ts.opentelekomcloud.com/backup-data"
"""Held by a backup whose deletionPolicy is Delete: it goes once its data is removed."""
FINAL_PHASES = ("Completed", "Failed")
_TIME = "%Y-%m-%dT%H:%M:%SZ"
_MESSAGE_WAIT_SECONDS = 1.0
_MESSAGE_GRACE_SECONDS = 15.0
"""How long after its Job's end a pod's termination message is waited for."""


def _stamp(moment: datetime) -> str:
    return moment.strftime(_TIME)


@dataclass
class _Report:
    """What one reconcile writes to the backup's status."""

    backup: Backup
    book: ConditionBook
    status: dict[str, Any]

    async def fail(self, reason: BackupReason, message: str) -> float:
        self.status.update(phase="Failed", completedAt=_stamp(utcnow()))
        await self.book.set("Ready", "False", reason, message)
        await self.book.event("Warning", EventReason.BACKUP_FAILED, message)
        return WAIT_FOR_CHANGE


def _job_state(job: dict[str, Any] | None) -> str | None:
    """ "Complete" or "Failed" once the Job ended, else None."""
    for condition in ((job or {}).get("status") or {}).get("conditions") or []:
        if condition.get("type") in ("Complete", "Failed") and condition.get("status") == "True":
            return str(condition["type"])
    return None


async def _termination_message(kube: Kube, namespace: str, job_name: str) -> str:
    """The last ended pod's termination message: the command's JSON result, or its reason."""
    pods = await kube.list("v1", "Pod", namespace, labels={"job-name": job_name})
    ended = []
    for pod in pods:
        for status in (pod.get("status") or {}).get("containerStatuses") or []:
            terminated = (status.get("state") or {}).get("terminated")
            if terminated:
                ended.append((terminated.get("finishedAt") or "", terminated.get("message") or ""))
    return max(ended)[1].strip() if ended else ""


def _ended_recently(job: dict[str, Any]) -> bool:
    ended = (job.get("status") or {}).get("completionTime")
    if not ended:
        return True
    moment = datetime.fromisoformat(str(ended).replace("Z", "+00:00"))
    return (utcnow() - moment).total_seconds() < _MESSAGE_GRACE_SECONDS


def _result(message: str) -> dict[str, Any]:
    try:
        parsed = json.loads(message.splitlines()[-1]) if message else {}
    except ValueError:
        return {"error": message}
    return parsed if isinstance(parsed, dict) else {"error": message}


async def _start(
    obj: dict[str, Any], report: _Report, kube: Kube, addressing: NodeAddressing, settings: TypesenseSettings
) -> float:
    backup = report.backup
    cluster_obj = await kube.get(
        TYPESENSE_CLUSTER.api_version, "TypesenseCluster", backup.spec.cluster.name, backup.namespace
    )
    if cluster_obj is None:
        return await report.fail(
            BackupReason.CLUSTER_NOT_FOUND,
            f"TypesenseCluster {backup.spec.cluster.name} does not exist in namespace {backup.namespace}",
        )
    phase = (cluster_obj.get("status") or {}).get("phase")
    if phase != "QuorumReady":  # said before anything else: a new cluster may not have its key yet
        refused = choose_node(phase, [])
        assert isinstance(refused, NotBackedUp)
        return await report.fail(BackupReason(refused.reason), refused.message)
    cluster = Cluster.from_object(cluster_obj)
    key = decoded_key(await kube.get("v1", "Secret", cluster.admin_key_secret_name, cluster.namespace))
    if not key:
        return await report.fail(
            BackupReason.ADMIN_KEY_MISSING,
            f"the cluster's admin key (Secret {cluster.admin_key_secret_name}) is not there",
        )
    register_secret(key)
    targets, pods = await node_targets(kube, cluster)
    probes = await probe_cluster(addressing, settings, cluster, targets, key)
    choice = choose_node(phase, probes)
    if isinstance(choice, NotBackedUp):
        return await report.fail(BackupReason(choice.reason), choice.message)
    if not settings.backup_image:
        return await report.fail(
            BackupReason.NO_BACKUP_IMAGE,
            "the operator has no image for backup Jobs: set OPERATOR_SUITE_BACKUP_IMAGE to this suite's "
            "image (the chart sets it to the operator's own)",
        )
    target, pod = next((t, p) for t, p in zip(targets, pods, strict=True) if t.index == choice.index)
    started = utcnow()
    try:
        taken = await take_snapshot(addressing, target, key, snapshot_dir(backup))
    except SnapshotFailed as error:
        return await report.fail(BackupReason.SNAPSHOT_FAILED, str(error))
    facts = {
        "typesense-version": taken.typesense_version,
        "collections": str(taken.collections),
        "documents": str(taken.documents),
        "taken-at": _stamp(started),
    }
    job = backup_job(
        backup, cluster, pod=target.pod, node_name=(pod.get("spec") or {}).get("nodeName"),
        image=settings.backup_image, facts=facts,
    )  # fmt: skip
    # Made already by an earlier reconcile that did not get to write the status: it is the same Job.
    with contextlib.suppress(errors.Conflict):
        await kube.create(job)
    report.status.update(
        phase="Running",
        startedAt=_stamp(started),
        node=target.pod,
        location=backup_location(backup),
        typesenseVersion=taken.typesense_version,
        collections=taken.collections,
        documents=taken.documents,
        attempts=1,
    )
    note = f"snapshot of {target.pod} ({choice.why}) going to {backup_location(backup)}"
    await report.book.set("Ready", "False", BackupReason.UPLOADING, note)
    await report.book.event("Normal", EventReason.BACKUP_STARTED, note)
    return WAIT_FOR_CHANGE


async def _follow(report: _Report, kube: Kube) -> float:
    backup = report.backup
    name = backup_job_name(backup)
    job = await kube.get("batch/v1", "Job", name, backup.namespace)
    if job is None:
        return await report.fail(BackupReason.JOB_LOST, f"its Job {name} is gone before it ended")
    counts = job.get("status") or {}
    attempts = max(1, sum(int(counts.get(key) or 0) for key in ("failed", "succeeded", "active")))
    if attempts != report.status.get("attempts"):
        report.status["attempts"] = attempts
    state = _job_state(job)
    if state is None:
        return WAIT_FOR_CHANGE
    message = await _termination_message(kube, backup.namespace, name)
    if not message and state == "Complete" and _ended_recently(job):
        # The Job's end can reach the watch before its pod's last status does: look again shortly.
        return _MESSAGE_WAIT_SECONDS
    result = _result(message)
    if state == "Failed" or "error" in result:
        reason = result.get("error") or "its Job failed without saying why"
        return await report.fail(BackupReason.UPLOAD_FAILED, f"after {attempts} attempts: {reason}")
    report.status.update(
        phase="Completed",
        completedAt=_stamp(utcnow()),
        sizeBytes=int(result.get("size") or 0),
        files=int(result.get("files") or 0),
    )
    note = f"{result.get('files')} files, {result.get('size')} bytes in {backup_location(backup)}"
    await report.book.set("Ready", "True", BackupReason.COMPLETED, note)
    await report.book.event("Normal", EventReason.BACKUP_COMPLETED, note)
    return WAIT_FOR_CHANGE


async def reconcile_backup(
    obj: dict[str, Any], context: Context, addressing: NodeAddressing, settings: TypesenseSettings
) -> float:
    """Move one backup along; returns seconds until the next look."""
    before = dict(obj.get("status") or {})
    if before.get("phase") in FINAL_PHASES:
        return WAIT_FOR_CHANGE
    report = _Report(Backup.from_object(obj), ConditionBook.of(obj, context.recorder), dict(before))
    if before.get("phase") == "Running":
        after = await _follow(report, context.kube)
    else:
        after = await _start(obj, report, context.kube, addressing, settings)
    report.status["conditions"] = report.book.wire()
    report.status["observedGeneration"] = obj["metadata"].get("generation")
    changed = {key: value for key, value in report.status.items() if before.get(key) != value}
    await write_status(context.kube, TYPESENSE_BACKUP, obj, changed)
    return after


def removes_data(obj: dict[str, Any]) -> bool:
    """Whether deleting this backup removes its data: deletionPolicy Delete (the default)."""
    return ((obj.get("spec") or {}).get("deletionPolicy") or "Delete") == "Delete"


async def finalize_backup(obj: dict[str, Any], context: Context, settings: TypesenseSettings) -> float:
    """Remove the backup's data with a Job, then let it go. A removal that fails is said (the data's
    location named) and the backup goes all the same: a deletion is never blocked for good."""
    backup = Backup.from_object(obj)
    kube = context.kube
    status = obj.get("status") or {}
    book = ConditionBook.of(obj, context.recorder)
    if not status.get("location") or not settings.backup_image:
        return FINALIZED  # nothing was ever written
    name = remove_job_name(backup)
    job = await kube.get("batch/v1", "Job", name, backup.namespace)
    if job is None:
        cluster_obj = await kube.get(
            TYPESENSE_CLUSTER.api_version, "TypesenseCluster", backup.spec.cluster.name, backup.namespace
        )
        # The Job takes the cluster's pod context and pull secrets when the cluster is still there.
        cluster = Cluster.from_object(cluster_obj) if cluster_obj else None
        try:
            with contextlib.suppress(errors.Conflict):
                await kube.create(remove_job(backup, cluster, image=settings.backup_image))
        except errors.Forbidden as error:
            # A namespace being deleted takes no new Job: the data stays, and the backup goes all the same.
            note = f"could not remove {status['location']}: no Job can be made ({error}); it is left there"
            await book.event("Warning", EventReason.BACKUP_DATA_LEFT, note)
            return FINALIZED
        return WAIT_FOR_CHANGE
    state = _job_state(job)
    if state is None:
        return WAIT_FOR_CHANGE
    if state == "Complete":
        await book.event("Normal", EventReason.BACKUP_DATA_REMOVED, f"removed {status['location']}")
    else:
        said = (
            _result(await _termination_message(kube, backup.namespace, name)).get("error")
            or "no reason given"
        )
        await book.event(
            "Warning",
            EventReason.BACKUP_DATA_LEFT,
            f"could not remove {status['location']}: {said}; it is left there",
        )
    return FINALIZED
