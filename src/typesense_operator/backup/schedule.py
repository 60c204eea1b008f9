"""What a TypesenseScheduledBackup does now, from what it observed, and the TypesenseBackup it makes.
Pure, and table-tested (tests/unit/test_backup_schedule.py); the controller
(:mod:`typesense_operator.controller.schedule.reconcile`) reads the objects, acts and says what it did.

The rules (docs/typesense-backup.md, "How a schedule works"):

- The times the schedule fires after ``since`` count: ``since`` is the last scheduled time a backup
  was made for (``status.lastScheduleTime``), the schedule's creation before its first, and the moment
  the operator saw it resumed, if it was ever suspended: times missed while suspended are not made up.
- Of those, only the latest that is at most :data:`STARTING_DEADLINE` old is made, and only one:
  after an operator restart, one backup for the latest time it missed, none for older ones (a
  CronJob with a small startingDeadlineSeconds does the same).
- A time at which an earlier backup of the schedule was still Pending or Running is skipped: backups
  of one schedule never overlap.
- ``immediate``: before its first scheduled time, the schedule makes one backup named by its creation
  time, once its cluster is QuorumReady (a backup of a cluster that is not would fail at once). A time
  that comes while that backup still waits for the cluster waits with it, and its backup stands for
  both once the cluster is ready (within STARTING_DEADLINE; later, the immediate one is made).
- While suspended, nothing is made and no time is due.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from operator_core.children import Manifest, Owner
from operator_core.clock import parse_wire_time
from typesense_operator.api.backups import (
    TYPESENSE_BACKUP,
    TYPESENSE_SCHEDULED_BACKUP,
    TypesenseScheduledBackupSpec,
)
from typesense_operator.backup.cron import CronSchedule
from typesense_operator.backup.decide import BackupView
from typesense_operator.resources.model import MANAGED_BY

__all__ = [
    "LABEL_VALUE_LIMIT",
    "SCHEDULE_LABEL",
    "STARTING_DEADLINE",
    "Schedule",
    "ScheduleStep",
    "backup_name",
    "backup_view",
    "next_step",
    "scheduled_backup",
]

SCHEDULE_LABEL = "ts.opentelekomcloud.com/schedule"
"""On every TypesenseBackup a schedule makes: the schedule's name (its backups are listed by it)."""
STARTING_DEADLINE = timedelta(minutes=5)
"""How late a scheduled time may still be made (after an operator restart, say); later, it is let go."""
LABEL_VALUE_LIMIT = 63
"""A label value's length limit: a schedule's name is one on its backups, and a backup's on its Jobs."""
COMPONENT = "scheduled-backup"
_FINAL_PHASES = ("Completed", "Failed")
_NAME_TIME = "%Y%m%d%H%M%S"


class Schedule(Owner[TypesenseScheduledBackupSpec]):
    """One TypesenseScheduledBackup: its identity, for its backups' names, labels and owner reference."""

    resource = TYPESENSE_SCHEDULED_BACKUP
    # The backups it makes are backups: named so, as the Jobs of a backup are.
    app = "typesense-backup"
    managed_by = MANAGED_BY


def backup_name(schedule: str, moment: datetime) -> str:
    """``<schedule>-<YYYYMMDDHHMMSS>`` of the scheduled time: the same time always gives the same name,
    so that an operator restarted between making a backup and saying so never makes a second. Kept
    within a label value (a backup's name is one on its Jobs): a long schedule name is shortened, with
    a hash of the whole."""
    suffix = moment.strftime(_NAME_TIME)
    if len(schedule) + 1 + len(suffix) <= LABEL_VALUE_LIMIT:
        return f"{schedule}-{suffix}"
    digest = hashlib.sha256(schedule.encode()).hexdigest()[:8]
    room = LABEL_VALUE_LIMIT - len(suffix) - len(digest) - 2
    return f"{schedule[:room].rstrip('-.')}-{digest}-{suffix}"


def scheduled_backup(schedule: Schedule, moment: datetime) -> Manifest:
    """The TypesenseBackup for the scheduled time ``moment``: the schedule's cluster, destination and
    deletionPolicy; labelled as the schedule's child (its changes wake the schedule) and by
    :data:`SCHEDULE_LABEL`; owned by the schedule, so that deleting the schedule deletes its backups."""
    spec = schedule.spec
    metadata = schedule.metadata(backup_name(schedule.name, moment), COMPONENT)
    metadata["labels"][SCHEDULE_LABEL] = schedule.name
    return {
        "apiVersion": TYPESENSE_BACKUP.api_version,
        "kind": TYPESENSE_BACKUP.kind,
        "metadata": metadata,
        "spec": {
            "cluster": spec.cluster.to_wire(),
            "destination": spec.destination.to_wire(),
            "deletionPolicy": spec.deletion_policy,
        },
    }


def backup_view(obj: Mapping[str, Any]) -> BackupView:
    """A TypesenseBackup as the pruning and the overlap check see it."""
    status = obj.get("status") or {}
    created = parse_wire_time(obj["metadata"].get("creationTimestamp"))
    assert created is not None, "the API server sets every object's creationTimestamp"
    return BackupView(
        name=obj["metadata"]["name"],
        phase=status.get("phase"),
        created_at=created,
        completed_at=parse_wire_time(status.get("completedAt")),
    )


@dataclass(frozen=True)
class ScheduleStep:
    """What the schedule does now.

    ``make``: a backup for ``time``; ``skip``: none for ``time``, since ``busy`` was still running
    then; ``wait``: nothing is due (``waiting`` says why, when it is not only the clock);
    ``suspended``: nothing, and nothing is due. ``next_time``: the next time the schedule fires
    after now (None while suspended).
    """

    action: Literal["make", "skip", "wait", "suspended"]
    next_time: datetime | None
    time: datetime | None = None
    busy: str | None = None
    waiting: str | None = None


def _running_at(backup: BackupView, moment: datetime) -> bool:
    """Whether ``backup`` had started before ``moment`` and not ended by then."""
    if backup.created_at >= moment:
        return False
    if backup.phase not in _FINAL_PHASES:
        return True
    return backup.completed_at is not None and backup.completed_at > moment


def next_step(
    cron: CronSchedule,
    *,
    now: datetime,
    created: datetime,
    last: datetime | None,
    resumed: datetime | None,
    suspended: bool,
    immediate: bool,
    cluster_ready: bool,
    backups: Sequence[BackupView],
) -> ScheduleStep:
    """What the schedule does now (see the module's rules).

    ``last``: the time of the last backup made (status.lastScheduleTime); ``resumed``: when the
    schedule was seen resumed (None: never suspended); ``backups``: the schedule's backups, but
    those being deleted.
    """
    if suspended:
        return ScheduleStep("suspended", None)
    since = max(moment for moment in (created, last, resumed) if moment is not None)
    latest, upcoming = None, cron.next_after(max(since, now - STARTING_DEADLINE))
    while upcoming <= now:
        latest, upcoming = upcoming, cron.next_after(upcoming)
    first_is_immediate = immediate and last is None and resumed is None
    if first_is_immediate and not cluster_ready:
        # Its first backup would fail at once; a time that comes meanwhile waits with it, and stands for
        # both once the cluster is ready (if it is no more than STARTING_DEADLINE old then).
        return ScheduleStep(
            "wait", upcoming, waiting="the immediate backup waits for the cluster to be QuorumReady"
        )
    if latest is None and first_is_immediate:
        latest = created
    if latest is None:
        return ScheduleStep("wait", upcoming)
    running = sorted((b for b in backups if _running_at(b, latest)), key=lambda b: (b.created_at, b.name))
    if running:
        return ScheduleStep("skip", upcoming, time=latest, busy=running[-1].name)
    return ScheduleStep("make", upcoming, time=latest)
