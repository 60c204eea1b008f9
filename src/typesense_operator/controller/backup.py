"""One TypesenseBackup, from asked-for to Completed or Failed, and its data removed when it goes.

Pending → the cluster is looked at (it must be QuorumReady), its nodes are probed, a caught-up
follower is chosen (:func:`~typesense_operator.backup.decide.choose_node`), asked for a snapshot, and
the backup Job is made on that node (:func:`~typesense_operator.resources.backup.backup_job`); Running
→ the Job's end is awaited (its changes wake the backup) and its termination message read back;
Completed and Failed are final: such a backup is never written again.

The operator never reads the storage credentials: only the Job does, from their Secrets.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from typing import Any

from operator_core import errors
from operator_core.clock import utcnow, wire_time
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
from typesense_operator.controller.jobs import delete_ended_job, job_result, job_state, no_image_message
from typesense_operator.controller.nodes import decoded_key, node_targets, probe_cluster
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

__all__ = [
    "DATA_FINALIZER",
    "finalize_backup",
    "reconcile_backup",
    "removes_data",
]

DATA_FINALIZER = "ts.opentelekomcloud.com/backup-data"
"""Held by a backup whose deletionPolicy is Delete: it goes once its data is removed."""
FINAL_PHASES = ("Completed", "Failed")
_MESSAGE_WAIT_SECONDS = 1.0


@dataclass
class _Report:
    """What one reconcile writes to the backup's status."""

    backup: Backup
    book: ConditionBook
    status: dict[str, Any]

    async def fail(self, reason: BackupReason, message: str) -> float:
        self.status.update(phase="Failed", completedAt=wire_time(utcnow()))
        await self.book.set("Ready", "False", reason, message)
        await self.book.event("Warning", EventReason.BACKUP_FAILED, message)
        return WAIT_FOR_CHANGE


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
            no_image_message("backup"),
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
        "taken-at": wire_time(started),
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
        startedAt=wire_time(started),
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
    state = job_state(job)
    if state is None:
        return WAIT_FOR_CHANGE
    result = await job_result(kube, job)
    if result is None:
        return _MESSAGE_WAIT_SECONDS
    if result.get("attempts"):
        report.status["attempts"] = int(result["attempts"])
    if state == "Failed" or "error" in result:
        reason = result.get("error") or "its Job failed without saying why"
        return await report.fail(BackupReason.UPLOAD_FAILED, reason)
    report.status.update(
        phase="Completed",
        completedAt=wire_time(utcnow()),
        sizeBytes=int(result.get("size") or 0),
        files=int(result.get("files") or 0),
    )
    note = f"{result.get('files')} files, {result.get('size')} bytes in {backup_location(backup)}"
    await report.book.set("Ready", "True", BackupReason.COMPLETED, note)
    await report.book.event("Normal", EventReason.BACKUP_COMPLETED, note)
    return WAIT_FOR_CHANGE


class _OneSnapshotAtATime:
    """A cluster takes one backup at a time: typesense-server 0.24.1 confirms a second snapshot asked
    for while one is being written, and writes nothing (seen when two backups started together). The
    lock covers a backup's start, up to its status saying Running; ``under_way`` remembers what this
    process started, which the watch cache may not show yet; after a restart, the cache tells."""

    def __init__(self) -> None:
        self.locks: dict[tuple[str, str], asyncio.Lock] = {}
        self.under_way: dict[tuple[str, str], str] = {}

    def lock(self, key: tuple[str, str]) -> asyncio.Lock:
        return self.locks.setdefault(key, asyncio.Lock())

    async def other(self, kube: Kube, backup: Backup) -> str | None:
        """Another backup of the same cluster under way (Running), by name; None when there is none."""
        key = (backup.namespace, backup.spec.cluster.name)
        started = self.under_way.get(key)
        if started and started != backup.name:
            found = await kube.get(
                TYPESENSE_BACKUP.api_version, TYPESENSE_BACKUP.kind, started, backup.namespace
            )
            if found is not None and ((found.get("status") or {}).get("phase")) not in FINAL_PHASES:
                return started
            self.under_way.pop(key, None)
        for found in await kube.list(TYPESENSE_BACKUP.api_version, TYPESENSE_BACKUP.kind, backup.namespace):
            same_cluster = ((found.get("spec") or {}).get("cluster") or {}).get(
                "name"
            ) == backup.spec.cluster.name
            running = (found.get("status") or {}).get("phase") == "Running"
            if same_cluster and running and found["metadata"]["name"] != backup.name:
                return str(found["metadata"]["name"])
        return None


_SNAPSHOTS = _OneSnapshotAtATime()
_WAIT_FOR_OTHER_SECONDS = 5.0
"""How soon a backup waiting for another of its cluster looks again (that one's end wakes only itself)."""


async def reconcile_backup(
    obj: dict[str, Any], context: Context, addressing: NodeAddressing, settings: TypesenseSettings
) -> float:
    """Move one backup along; returns seconds until the next look."""
    before = dict(obj.get("status") or {})
    backup = Backup.from_object(obj)
    if before.get("phase") in FINAL_PHASES:
        await delete_ended_job(context.kube, backup_job_name(backup), backup.namespace)
        return WAIT_FOR_CHANGE
    report = _Report(backup, ConditionBook.of(obj, context.recorder), dict(before))
    if before.get("phase") == "Running":
        after = await _follow(report, context.kube)
        await _write(report, obj, context, before)
    else:
        key = (backup.namespace, backup.spec.cluster.name)
        async with _SNAPSHOTS.lock(key):
            other = await _SNAPSHOTS.other(context.kube, backup)
            if other is not None:
                note = f"waiting for TypesenseBackup {other} to end: a cluster takes one backup at a time"
                await report.book.set("Ready", "False", BackupReason.PENDING, note)
                report.status["phase"] = "Pending"
                after = _WAIT_FOR_OTHER_SECONDS
            else:
                after = await _start(obj, report, context.kube, addressing, settings)
            await _write(report, obj, context, before)
            if report.status.get("phase") == "Running":
                _SNAPSHOTS.under_way[key] = backup.name
    if report.status.get("phase") in FINAL_PHASES:
        await delete_ended_job(context.kube, backup_job_name(backup), backup.namespace)
    return after


async def _write(report: _Report, obj: dict[str, Any], context: Context, before: dict[str, Any]) -> None:
    report.status["conditions"] = report.book.wire()
    report.status["observedGeneration"] = obj["metadata"].get("generation")
    changed = {key: value for key, value in report.status.items() if before.get(key) != value}
    await write_status(context.kube, TYPESENSE_BACKUP, obj, changed)


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
    state = job_state(job)
    if state is None:
        return WAIT_FOR_CHANGE
    if state == "Complete":
        await book.event("Normal", EventReason.BACKUP_DATA_REMOVED, f"removed {status['location']}")
    else:
        said = (await job_result(kube, job) or {}).get("error") or "no reason given"
        await book.event(
            "Warning",
            EventReason.BACKUP_DATA_LEFT,
            f"could not remove {status['location']}: {said}; it is left there",
        )
    return FINALIZED
