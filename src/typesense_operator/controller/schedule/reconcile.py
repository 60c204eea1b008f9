"""One TypesenseScheduledBackup: a TypesenseBackup at each time its cron schedule fires, the old ones
pruned by its retention, nothing new while it is suspended.

What to do now is decided by :func:`~typesense_operator.backup.schedule.next_step` (pure); this
module reads what it needs from the watch caches (the schedule's backups, its cluster), makes the
backup or deletes the pruned ones, and says so in the status, conditions and Events. A reconcile
that finds nothing to do writes nothing. The backups it makes carry its labels, so that each of
their changes wakes it (a backup ending may let the next one start); a change to its cluster does too.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from operator_core import errors
from operator_core.clock import parse_wire_time, utcnow, wire_time
from operator_core.kube import Kube
from operator_core.reconciling import WAIT_FOR_CHANGE, Context
from operator_core.steps import ConditionBook, Outcome, Scope, Steps
from typesense_operator.api import TYPESENSE_BACKUP, TYPESENSE_CLUSTER
from typesense_operator.api.backups import TYPESENSE_SCHEDULED_BACKUP
from typesense_operator.api.reasons import ConditionType, EventReason, ScheduleReason
from typesense_operator.backup.cron import CronError, CronSchedule, parse_cron
from typesense_operator.backup.decide import BackupView, parse_age, to_prune
from typesense_operator.backup.schedule import (
    LABEL_VALUE_LIMIT,
    SCHEDULE_LABEL,
    Schedule,
    ScheduleStep,
    backup_view,
    next_step,
    scheduled_backup,
)

__all__ = ["named_cluster", "reconcile_schedule"]

READY = "Ready"


def named_cluster(obj: dict[str, Any]) -> list[tuple[str, str]]:
    """The cluster a schedule names: created at last, or its phase changed, it wakes the schedule."""
    name = ((obj.get("spec") or {}).get("cluster") or {}).get("name")
    return [(TYPESENSE_CLUSTER.kind, name)] if name else []


async def _owned_backups(kube: Kube, schedule: Schedule) -> list[dict[str, Any]]:
    """The schedule's backups that are not being deleted: labelled with its name and owned by it (not
    those a schedule of the same name, deleted with its backups orphaned, left behind)."""
    labelled = await kube.list(
        TYPESENSE_BACKUP.api_version,
        TYPESENSE_BACKUP.kind,
        schedule.namespace,
        labels={SCHEDULE_LABEL: schedule.name},
    )
    return [
        backup
        for backup in labelled
        if not backup["metadata"].get("deletionTimestamp")
        and any(owner.get("uid") == schedule.uid for owner in backup["metadata"].get("ownerReferences") or [])
    ]


async def _prune(
    kube: Kube, book: ConditionBook, schedule: Schedule, views: list[BackupView], now: datetime
) -> set[str]:
    """Delete the backups the retention lets go (:func:`to_prune`), each with a Normal Event."""
    retention = schedule.spec.retention
    if retention is None:
        return set()
    max_age = parse_age(retention.max_age) if retention.max_age else None
    pruned = set()
    for name in to_prune(views, retention.keep, max_age, now):
        if await kube.delete(TYPESENSE_BACKUP.api_version, TYPESENSE_BACKUP.kind, name, schedule.namespace):
            await book.event(
                "Normal", EventReason.BACKUP_PRUNED, f"deleted TypesenseBackup {name}: beyond the retention"
            )
        pruned.add(name)
    return pruned


async def _resumed(book: ConditionBook, suspended: bool) -> datetime | None:
    """Set the Suspended condition (once the schedule was ever suspended); returns when the schedule
    was seen resumed, or None when it never was suspended (or is now)."""
    before = book.get(ConditionType.SUSPENDED)
    if suspended:
        note = "no new backup while spec.suspend is true; retention still applies"
        await book.set(ConditionType.SUSPENDED, "True", ScheduleReason.SUSPENDED, note)
        return None
    if before is None:
        return None
    note = "resumed: the times missed while suspended are not made up"
    await book.set(ConditionType.SUSPENDED, "False", ScheduleReason.RESUMED, note)
    after = book.get(ConditionType.SUSPENDED)
    assert after is not None
    return after.last_transition_time


async def _act(
    kube: Kube, book: ConditionBook, schedule: Schedule, step: ScheduleStep, status: dict[str, Any]
) -> None:
    """Make the backup the step asks for, or say that a time is skipped; the status follows."""
    if step.action == "make":
        assert step.time is not None
        backup = scheduled_backup(schedule, step.time)
        name = backup["metadata"]["name"]
        try:
            await kube.create(backup)
        except errors.Conflict:
            pass  # made by an earlier reconcile that did not get to say so: the same backup
        else:
            note = f"made TypesenseBackup {name} for {wire_time(step.time)}"
            await book.event("Normal", EventReason.BACKUP_SCHEDULED, note)
        status.update(lastScheduleTime=wire_time(step.time), lastBackup=name)
    elif step.action == "skip":
        assert step.time is not None
        assert step.next_time is not None
        # Said once: when the time is passed by.
        if status.get("nextScheduleTime") != wire_time(step.next_time):
            when = wire_time(step.time)
            note = f"no backup for {when}: the previous one, {step.busy}, was still running then"
            await book.event("Normal", EventReason.BACKUP_SKIPPED, note)
    status["nextScheduleTime"] = wire_time(step.next_time) if step.next_time else None


@dataclass(kw_only=True)
class ScheduleScope(Scope):
    """One reconcile of one TypesenseScheduledBackup, at one moment: its status is all its own
    (:attr:`status` starts as it is)."""

    schedule: Schedule
    now: datetime
    """Now, in UTC to the second: every decision of the reconcile is made for this one moment."""
    cron: CronSchedule | None = None
    views: list[BackupView] = field(default_factory=list)
    resumed: datetime | None = None
    step: ScheduleStep | None = None
    settled: bool = False
    """A step went as far as it could (not cut short by an error): the status says which generation."""

    @classmethod
    def of(cls, obj: dict[str, Any], context: Context, now: datetime | None = None) -> ScheduleScope:
        return cls(
            **Scope.parts(obj, context),
            schedule=Schedule.from_object(obj),
            now=now or utcnow(),
            status=dict(obj.get("status") or {}),
        )

    def wait(self, seconds: float) -> Outcome:
        """The reconcile is over for now: look again in ``seconds``."""
        self.next_look, self.settled = seconds, True
        return Outcome.STOP


async def check_schedule(scope: ScheduleScope) -> Outcome:
    """A name that fits its backups' label, and a cron expression that parses; else only a change helps."""
    schedule, book = scope.schedule, scope.book
    if len(schedule.name) > LABEL_VALUE_LIMIT:
        note = f"a schedule's name is a label value of its backups: at most {LABEL_VALUE_LIMIT} characters"
        await book.set(READY, "False", ScheduleReason.NAME_TOO_LONG, note, warn=EventReason.INVALID_SCHEDULE)
        scope.status["nextScheduleTime"] = None
        return scope.wait(WAIT_FOR_CHANGE)
    try:
        scope.cron = parse_cron(schedule.spec.schedule)
    except CronError as error:
        note = f"spec.schedule {schedule.spec.schedule!r}: {error}"
        await book.set(
            READY, "False", ScheduleReason.INVALID_SCHEDULE, note,
            warn=EventReason.INVALID_SCHEDULE, warn_on_new_message=True,
        )  # fmt: skip
        scope.status["nextScheduleTime"] = None
        return scope.wait(WAIT_FOR_CHANGE)
    return Outcome.CONTINUE


async def prune(scope: ScheduleScope) -> Outcome:
    """The backups the retention lets go are deleted (suspended or not)."""
    scope.resumed = await _resumed(scope.book, scope.schedule.spec.suspend)
    views = [backup_view(backup) for backup in await _owned_backups(scope.kube, scope.schedule)]
    pruned = await _prune(scope.kube, scope.book, scope.schedule, views, scope.now)
    scope.views = [view for view in views if view.name not in pruned]
    return Outcome.CONTINUE


async def plan(scope: ScheduleScope) -> Outcome:
    """What is due now (:func:`~typesense_operator.backup.schedule.next_step`), given the cluster's state."""
    schedule, cron = scope.schedule, scope.cron
    assert cron is not None
    cluster = await scope.kube.get(
        TYPESENSE_CLUSTER.api_version, TYPESENSE_CLUSTER.kind, schedule.spec.cluster.name, schedule.namespace
    )
    if cluster is None:
        note = (
            f"TypesenseCluster {schedule.spec.cluster.name} does not exist in namespace {schedule.namespace}"
        )
        await scope.book.set(
            READY, "False", ScheduleReason.CLUSTER_NOT_FOUND, note, warn=EventReason.CLUSTER_NOT_FOUND
        )
        scope.status["nextScheduleTime"] = None
        return scope.wait(scope.next_look)
    created = parse_wire_time(scope.obj["metadata"].get("creationTimestamp"))
    assert created is not None
    scope.step = next_step(
        cron,
        now=scope.now,
        created=created,
        last=parse_wire_time(scope.status.get("lastScheduleTime")),
        resumed=scope.resumed,
        suspended=schedule.spec.suspend,
        immediate=schedule.spec.immediate,
        cluster_ready=(cluster.get("status") or {}).get("phase") == "QuorumReady",
        backups=scope.views,
    )
    return Outcome.CONTINUE


async def make(scope: ScheduleScope) -> Outcome:
    """The backup that is due made (or the time skipped), and Ready saying when the next one is."""
    step, book, now = scope.step, scope.book, scope.now
    assert step is not None
    await _act(scope.kube, book, scope.schedule, step, scope.status)
    if step.next_time is None:
        note = "no new backup while spec.suspend is true"
        await book.set(READY, "True", ScheduleReason.SUSPENDED, note)
        return scope.wait(scope.next_look)
    note = f"next backup at {wire_time(step.next_time)}"
    await book.set(
        READY, "True", ScheduleReason.SCHEDULED, f"{step.waiting}; {note}" if step.waiting else note
    )
    return scope.wait(min((step.next_time - now).total_seconds(), scope.next_look))


async def report(scope: ScheduleScope, completed: bool) -> None:
    """Once a step settled, the status says which generation it saw."""
    if scope.settled:
        scope.status["observedGeneration"] = scope.obj["metadata"].get("generation")


STEPS = Steps(TYPESENSE_SCHEDULED_BACKUP, ScheduleScope.of, (check_schedule, prune, plan, make), report)


async def reconcile_schedule(
    obj: dict[str, Any], context: Context, *, clock: Callable[[], datetime] = utcnow
) -> float:
    """Make the backup that is due, prune the old ones, say what was done; returns the seconds until the
    next look (the next time the schedule fires, at most the resync interval). ``clock``: now, in UTC
    to the second."""
    return await STEPS.run(ScheduleScope.of(obj, context, clock()))
