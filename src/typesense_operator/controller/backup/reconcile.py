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
from dataclasses import dataclass
from typing import Any

from operator_core import errors
from operator_core.clock import utcnow, wire_time
from operator_core.jobs import job_state
from operator_core.reconciling import WAIT_FOR_CHANGE, Context
from operator_core.secrets import register_secret
from operator_core.steps import Finalizing, Outcome, Scope, Steps
from typesense_operator.api import TYPESENSE_CLUSTER
from typesense_operator.api.backups import TYPESENSE_BACKUP
from typesense_operator.api.reasons import BackupReason, EventReason
from typesense_operator.backup.decide import NotBackedUp, choose_node
from typesense_operator.backup.node import SnapshotFailed, take_snapshot
from typesense_operator.controller.cluster.nodes import decoded_key, node_targets, probe_cluster
from typesense_operator.controller.jobs import delete_ended_job, job_result, no_image_message
from typesense_operator.controller.runtime import FINAL_PHASES, TypesenseRuntime
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
_MESSAGE_WAIT_SECONDS = 1.0
_WAIT_FOR_OTHER_SECONDS = 5.0
"""How soon a backup waiting for another of its cluster looks again (that one's end wakes only itself)."""


@dataclass(kw_only=True)
class BackupScope(Scope):
    """One reconcile of one TypesenseBackup: its status is all its own (:attr:`status` starts as it is)."""

    backup: Backup
    runtime: TypesenseRuntime
    phase: str | None = None
    """The phase the reconcile found."""
    settled: bool = False
    """A step went as far as it could and said so (not cut short by an error): the status is written with
    ``observedGeneration``."""

    @classmethod
    def of(cls, obj: dict[str, Any], context: Context) -> BackupScope:
        status = dict(obj.get("status") or {})
        return cls(
            **Scope.parts(obj, context),
            backup=Backup.from_object(obj),
            runtime=context.runtime_of(TypesenseRuntime),
            phase=status.get("phase"),
            status=status,
        )

    @property
    def cluster_key(self) -> tuple[str, str]:
        return (self.backup.namespace, self.backup.spec.cluster.name)

    async def fail(self, reason: BackupReason, message: str) -> Outcome:
        self.status.update(phase="Failed", completedAt=wire_time(utcnow()))
        await self.book.set("Ready", "False", reason, message)
        await self.book.event("Warning", EventReason.BACKUP_FAILED, message)
        return self.wait(WAIT_FOR_CHANGE)

    def wait(self, seconds: float) -> Outcome:
        """The reconcile is over for now: look again in ``seconds``."""
        self.next_look, self.settled = seconds, True
        return Outcome.STOP


async def let_go_if_ended(scope: BackupScope) -> Outcome:
    """Completed and Failed are final: such a backup is never written again, and its Job goes."""
    if scope.phase not in FINAL_PHASES:
        return Outcome.CONTINUE
    await delete_ended_job(scope.kube, backup_job_name(scope.backup), scope.backup.namespace)
    scope.next_look = WAIT_FOR_CHANGE
    return Outcome.STOP


async def one_at_a_time(scope: BackupScope) -> Outcome:
    """A backup that has not started waits while another of its cluster runs; the guard holds until its
    status says whether it started (:class:`~typesense_operator.controller.runtime.OneBackupAtATime`)."""
    if scope.phase == "Running":
        return Outcome.CONTINUE
    guard, backup = scope.runtime.backups, scope.backup
    await scope.held.enter_async_context(guard.lock(scope.cluster_key))
    other = await guard.other(scope.kube, backup)
    if other is not None:
        note = f"waiting for TypesenseBackup {other} to end: a cluster takes one backup at a time"
        await scope.book.set("Ready", "False", BackupReason.PENDING, note)
        scope.status["phase"] = "Pending"
        return scope.wait(_WAIT_FOR_OTHER_SECONDS)

    async def started() -> None:
        if scope.status.get("phase") == "Running":
            guard.under_way[scope.cluster_key] = backup.name

    scope.after_status.append(started)
    return Outcome.CONTINUE


async def start(scope: BackupScope) -> Outcome:
    """Pending: the cluster must be QuorumReady; a caught-up node is chosen, asked for a snapshot, and the
    backup Job made on its node."""
    if scope.phase == "Running":
        return Outcome.CONTINUE
    backup, kube = scope.backup, scope.kube
    addressing, settings = scope.runtime.addressing, scope.runtime.settings
    cluster_obj = await kube.get(
        TYPESENSE_CLUSTER.api_version, "TypesenseCluster", backup.spec.cluster.name, backup.namespace
    )
    if cluster_obj is None:
        return await scope.fail(
            BackupReason.CLUSTER_NOT_FOUND,
            f"TypesenseCluster {backup.spec.cluster.name} does not exist in namespace {backup.namespace}",
        )
    phase = (cluster_obj.get("status") or {}).get("phase")
    if phase != "QuorumReady":  # said before anything else: a new cluster may not have its key yet
        refused = choose_node(phase, [])
        assert isinstance(refused, NotBackedUp)
        return await scope.fail(BackupReason(refused.reason), refused.message)
    cluster = Cluster.from_object(cluster_obj)
    key = decoded_key(await kube.get("v1", "Secret", cluster.admin_key_secret_name, cluster.namespace))
    if not key:
        return await scope.fail(
            BackupReason.ADMIN_KEY_MISSING,
            f"the cluster's admin key (Secret {cluster.admin_key_secret_name}) is not there",
        )
    register_secret(key)
    targets, pods = await node_targets(kube, cluster)
    probes = await probe_cluster(addressing, settings, cluster, targets, key)
    choice = choose_node(phase, probes)
    if isinstance(choice, NotBackedUp):
        return await scope.fail(BackupReason(choice.reason), choice.message)
    if not settings.backup_image:
        return await scope.fail(
            BackupReason.NO_BACKUP_IMAGE,
            no_image_message("backup"),
        )
    target, pod = next((t, p) for t, p in zip(targets, pods, strict=True) if t.index == choice.index)
    started = utcnow()
    try:
        taken = await take_snapshot(addressing, target, key, snapshot_dir(backup))
    except SnapshotFailed as error:
        return await scope.fail(BackupReason.SNAPSHOT_FAILED, str(error))
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
    scope.status.update(
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
    await scope.book.set("Ready", "False", BackupReason.UPLOADING, note)
    await scope.book.event("Normal", EventReason.BACKUP_STARTED, note)
    return scope.wait(WAIT_FOR_CHANGE)


async def follow(scope: BackupScope) -> Outcome:
    """Running: the Job's end is awaited (its changes wake the backup) and its result read back."""
    backup, kube = scope.backup, scope.kube
    name = backup_job_name(backup)
    job = await kube.get("batch/v1", "Job", name, backup.namespace)
    if job is None:
        return await scope.fail(BackupReason.JOB_LOST, f"its Job {name} is gone before it ended")
    state = job_state(job)
    if state is None:
        return scope.wait(WAIT_FOR_CHANGE)
    result = await job_result(kube, job)
    if result is None:
        return scope.wait(_MESSAGE_WAIT_SECONDS)
    if result.get("attempts"):
        scope.status["attempts"] = int(result["attempts"])
    if state == "Failed" or "error" in result:
        reason = result.get("error") or "its Job failed without saying why"
        return await scope.fail(BackupReason.UPLOAD_FAILED, reason)
    scope.status.update(
        phase="Completed",
        completedAt=wire_time(utcnow()),
        sizeBytes=int(result.get("size") or 0),
        files=int(result.get("files") or 0),
    )
    note = f"{result.get('files')} files, {result.get('size')} bytes in {backup_location(backup)}"
    await scope.book.set("Ready", "True", BackupReason.COMPLETED, note)
    await scope.book.event("Normal", EventReason.BACKUP_COMPLETED, note)
    return scope.wait(WAIT_FOR_CHANGE)


async def report(scope: BackupScope, completed: bool) -> None:
    """Once a step settled, the status says which generation it saw; a backup that has ended lets its
    Job go once that is written (an ended pod that mounted the node's claim would hold the claim)."""
    if scope.settled:
        scope.status["observedGeneration"] = scope.obj["metadata"].get("generation")
    if scope.phase not in FINAL_PHASES and scope.status.get("phase") in FINAL_PHASES:

        async def let_go() -> None:
            await delete_ended_job(scope.kube, backup_job_name(scope.backup), scope.backup.namespace)

        scope.after_status.append(let_go)


STEPS = Steps(TYPESENSE_BACKUP, BackupScope.of, (let_go_if_ended, one_at_a_time, start, follow), report)
reconcile_backup = STEPS.reconcile
"""Move one backup along (guard one backup of a cluster at a time, start, follow); returns seconds until
the next look."""


def removes_data(obj: dict[str, Any]) -> bool:
    """Whether deleting this backup removes its data: deletionPolicy Delete (the default)."""
    return ((obj.get("spec") or {}).get("deletionPolicy") or "Delete") == "Delete"


async def only_with_data(scope: BackupScope) -> Outcome:
    """A backup that never wrote anything (or an operator without the backup image) goes at once."""
    if not scope.current.get("location") or not scope.runtime.settings.backup_image:
        return scope.let_go()
    return Outcome.CONTINUE


async def remove_the_data(scope: BackupScope) -> Outcome:
    """The backup's data removed by a Job. A removal that fails is said (the data's location named) and
    the backup goes all the same: a deletion is never blocked for good."""
    backup, kube, book, status = scope.backup, scope.kube, scope.book, scope.current
    settings = scope.runtime.settings
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
            return scope.let_go()
        return scope.retry_in(WAIT_FOR_CHANGE)
    state = job_state(job)
    if state is None:
        return scope.retry_in(WAIT_FOR_CHANGE)
    if state == "Complete":
        await book.event("Normal", EventReason.BACKUP_DATA_REMOVED, f"removed {status['location']}")
    else:
        said = (await job_result(kube, job) or {}).get("error") or "no reason given"
        await book.event(
            "Warning",
            EventReason.BACKUP_DATA_LEFT,
            f"could not remove {status['location']}: {said}; it is left there",
        )
    return Outcome.CONTINUE


FINALIZING = Finalizing(BackupScope.of, [only_with_data, remove_the_data])
"""Remove the backup's data with a Job, then let it go."""
finalize_backup = FINALIZING.finalize
