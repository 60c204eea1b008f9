"""A new cluster's first data from a backup (spec.bootstrap.fromBackup): the reconcile step that runs
before the quorum is looked at.

The first node's claim is made before the StatefulSet, and a Job of this suite's image fills it with
the backup (``typesense-backup restore``: every file checked against the manifest, only into an empty
volume). Only then is the StatefulSet made, with the nodes list naming that node alone, as after a
quorum downgrade: the restored node elects itself, and the quorum decision's upgrade path adds the
other nodes as they answer, each catching up from it. Nothing Typesense runs before its data is whole,
and no pod template carries anything of the restore (so nothing rolls when it is over).

A failed restore stays Failed (the Restored condition says why) until its Job is deleted, which starts
it again: a volume a failed restore wrote into holds nothing (the download lands whole or not at all).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from operator_core import errors
from operator_core.clock import utcnow, wire_time
from operator_core.jobs import job_state
from operator_core.steps import Outcome
from typesense_operator.api.backups import TYPESENSE_BACKUP
from typesense_operator.api.destinations import BackupDestination
from typesense_operator.api.reasons import ConditionType, EventReason, RestoreReason
from typesense_operator.api.v1alpha1 import FromBackup
from typesense_operator.backup.decide import collections_held, not_serving_the_restore
from typesense_operator.controller.cluster.scope import Scope
from typesense_operator.controller.jobs import delete_ended_job, job_result, no_image_message
from typesense_operator.quorum.probe import API_KEY_HEADER, NodeTarget, Unreachable
from typesense_operator.resources.backup import (
    Backup,
    backup_location,
    location_in,
    restore_claim,
    restore_job,
    restore_job_name,
)

__all__ = ["BACKUP_RECHECK_SECONDS", "confirm_restore_served", "restore_from_backup"]

STATUS_LOOK_SECONDS = 0.5
"""How soon after writing the restore's end the cluster looks again, to make its nodes."""
SERVED_LOOK_SECONDS = 2.0
"""How soon a restored cluster whose nodes do not all serve the restore yet looks again."""
BACKUP_RECHECK_SECONDS = 10.0
"""How soon a cluster waiting for its backup (not there, or not Completed yet) looks again: a backup
does not wake the cluster that restores it."""


async def restore_from_backup(scope: Scope) -> Outcome:
    """CONTINUE once the first node's volume holds the backup (or when there is nothing to restore);
    STOP while it is filled, or when it cannot be."""
    from_backup = scope.cluster.spec.bootstrap.from_backup if scope.cluster.spec.bootstrap else None
    status = (scope.obj.get("status") or {}).get("restore") or {}
    cluster, kube = scope.cluster, scope.kube
    if from_backup is None:
        return Outcome.CONTINUE
    if status.get("phase") == "Completed":
        await delete_ended_job(kube, restore_job_name(cluster), cluster.namespace)
        return Outcome.CONTINUE
    if await kube.get("apps/v1", "StatefulSet", cluster.statefulset_name, cluster.namespace) is not None:
        # Nodes run already (a status lost, say): nothing is ever restored under them.
        return Outcome.CONTINUE
    restore = dict(status)
    scope.restore = restore
    job = await kube.get("batch/v1", "Job", restore_job_name(cluster), cluster.namespace)
    if job is None:
        await _start(scope, from_backup, restore)
        return Outcome.STOP
    state = job_state(job)
    if state is None:
        return Outcome.STOP
    result = await job_result(kube, job)
    if result is None:
        scope.restore_look = 1.0  # its pod's last status is on its way
        return Outcome.STOP
    if state == "Failed" or "error" in result:
        said = result.get("error") or "its Job failed without saying why"
        message = f"{said}; delete Job {restore_job_name(cluster)} to try again"
        if restore.get("phase") != "Failed":
            restore.update(phase="Failed", completedAt=wire_time(utcnow()))
        await scope.set_condition(
            ConditionType.RESTORED,
            "False",
            RestoreReason.RESTORE_FAILED,
            message,
            warn=EventReason.RESTORE_FAILED,
        )
        return Outcome.STOP
    restore.update(
        phase="Completed",
        completedAt=wire_time(utcnow()),
        files=int(result.get("files") or 0),
        sizeBytes=int(result.get("size") or 0),
    )
    note = (
        f"node 0's volume holds {restore.get('location')} "
        f"({restore['files']} files, {restore['sizeBytes']} bytes)"
    )
    await scope.set_condition(ConditionType.RESTORED, "True", RestoreReason.RESTORED, note)
    await scope.event("Normal", EventReason.RESTORE_COMPLETED, f"{note}; starting it alone, then growing")
    # As after a downgrade to node 0: the nodes list names it alone, and the upgrade path grows it once
    # node 0 leads. Written with the restore's end, before any node exists: the StatefulSet is made only
    # once both are read back, so that no node ever starts in a list of three that two empty nodes
    # would be a majority of.
    scope.quorum = {"members": [0], "survivor": 0, "downgradedAt": wire_time(utcnow())}
    scope.restore_look = STATUS_LOOK_SECONDS
    return Outcome.STOP


async def _source(scope: Scope, from_backup: FromBackup) -> tuple[BackupDestination, str, str | None] | None:
    """(destination, location, backup name) of the backup to restore; None, with the condition saying
    why, while its TypesenseBackup is missing or not Completed."""
    if from_backup.location is not None:
        found = from_backup.location
        return found.destination, location_in(found.destination, found.path.strip("/").split("/")), None
    assert from_backup.backup is not None  # the API server holds it to exactly one
    cluster, name = scope.cluster, from_backup.backup.name
    found_obj = await scope.kube.get(
        TYPESENSE_BACKUP.api_version, TYPESENSE_BACKUP.kind, name, cluster.namespace
    )
    phase = ((found_obj or {}).get("status") or {}).get("phase")
    if found_obj is None or phase != "Completed":
        reason = RestoreReason.BACKUP_NOT_FOUND if found_obj is None else RestoreReason.BACKUP_NOT_COMPLETED
        what = "does not exist" if found_obj is None else f"is {phase or 'Pending'}, not Completed"
        message = f"TypesenseBackup {name} {what} in namespace {cluster.namespace}; waiting for it"
        await scope.set_condition(ConditionType.RESTORED, "False", reason, message)
        scope.restore_look = BACKUP_RECHECK_SECONDS
        return None
    backup = Backup.from_object(found_obj)
    return backup.spec.destination, backup_location(backup), name


async def _start(scope: Scope, from_backup: FromBackup, restore: dict[str, Any]) -> None:
    cluster, kube = scope.cluster, scope.kube
    source = await _source(scope, from_backup)
    if source is None:
        return
    destination, location, name = source
    if not scope.settings.backup_image:
        message = no_image_message("restore")
        await scope.set_condition(ConditionType.RESTORED, "False", RestoreReason.NO_BACKUP_IMAGE, message)
        scope.waiting_for_user = True
        return
    # Made already by an earlier reconcile that did not get to write the status: the same ones.
    with contextlib.suppress(errors.Conflict):
        await kube.create(restore_claim(cluster))
    with contextlib.suppress(errors.Conflict):
        await kube.create(restore_job(cluster, destination, location, image=scope.settings.backup_image))
    if restore.get("phase") != "Restoring":
        restore.clear()
        restore.update(location=location, phase="Restoring", startedAt=wire_time(utcnow()))
        restore.update({"backup": name} if name else {})
        await scope.event("Normal", EventReason.RESTORE_STARTED, f"restoring {location} into node 0's volume")
    message = f"filling node 0's volume from {location}"
    await scope.set_condition(ConditionType.RESTORED, "False", RestoreReason.RESTORING, message)


async def confirm_restore_served(scope: Scope) -> Outcome:
    """After a restore, Ready waits until every node lists the restored collections with as many
    documents as the leader: a follower that joined the restored leader can say it is healthy before
    it holds them. Checked once: ``status.restore.servedByEveryNodeAt`` records when it held."""
    restore = (scope.obj.get("status") or {}).get("restore") or {}
    plan = scope.plan
    if restore.get("phase") != "Completed" or restore.get("servedByEveryNodeAt") or plan is None:
        return Outcome.CONTINUE
    if not plan.ready:
        return Outcome.CONTINUE  # the quorum's own words say why it is not Ready
    leader = next((target.pod for target, probe, _ in scope.nodes if probe.state == "LEADER"), None)
    if leader is None:
        return Outcome.CONTINUE
    assert scope.api_key is not None
    headers = {API_KEY_HEADER: scope.api_key}

    async def held(target: NodeTarget) -> dict[str, int] | None:
        try:
            return collections_held(*await scope.addressing.get(target, "/collections", headers, 5.0))
        except Unreachable:
            return None

    answers = await asyncio.gather(*(held(target) for target, _, _ in scope.nodes))
    notes = not_serving_the_restore(
        {target.pod: answer for (target, _, _), answer in zip(scope.nodes, answers, strict=True)}, leader
    )
    if notes:
        scope.restore_not_served = [f"restored data not served by every node yet: {'; '.join(notes)}"]
        scope.restore_look = SERVED_LOOK_SECONDS
    elif len(scope.nodes) >= scope.cluster.spec.replicas:  # a node yet to come is looked at too
        scope.restore = {**restore, "servedByEveryNodeAt": wire_time(utcnow())}
    return Outcome.CONTINUE
