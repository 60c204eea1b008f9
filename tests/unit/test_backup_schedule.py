"""What a TypesenseScheduledBackup does now, against tables (make a backup for a time, skip it, wait,
or nothing while suspended), and the backup it makes."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from typesense_operator.backup.cron import parse_cron
from typesense_operator.backup.decide import BackupView
from typesense_operator.backup.schedule import (
    LABEL_VALUE_LIMIT,
    SCHEDULE_LABEL,
    Schedule,
    ScheduleStep,
    backup_name,
    backup_view,
    next_step,
    scheduled_backup,
)

API = "ts.opentelekomcloud.com/v1alpha1"
CREATED = datetime(2026, 11, 26, 10, 0, 30, tzinfo=UTC)


def at(text: str) -> datetime:
    """A time of the test's day: ``10:01`` or ``10:01:30``."""
    hour, minute, *second = (int(part) for part in text.split(":"))
    return CREATED.replace(hour=hour, minute=minute, second=second[0] if second else 0)


def running(name: str, created: str, phase: str | None = "Running", ended: str | None = None) -> BackupView:
    return BackupView(name, phase, at(created), at(ended) if ended else None)


def step(
    expression: str = "* * * * *",
    *,
    now: str,
    last: str | None = None,
    resumed: str | None = None,
    suspended: bool = False,
    immediate: bool = False,
    cluster_ready: bool = True,
    backups: tuple[BackupView, ...] = (),
) -> ScheduleStep:
    return next_step(
        parse_cron(expression),
        now=at(now),
        created=CREATED,
        last=at(last) if last else None,
        resumed=at(resumed) if resumed else None,
        suspended=suspended,
        immediate=immediate,
        cluster_ready=cluster_ready,
        backups=backups,
    )


WAITING = "the immediate backup waits for the cluster to be QuorumReady"


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        # A new schedule waits for its first time.
        ({"now": "10:00:40"}, ("wait", None, "10:01", None)),
        ({"now": "10:01:00"}, ("make", "10:01", "10:02", None)),
        ({"now": "10:01:00", "last": "10:01"}, ("wait", None, "10:02", None)),
        # immediate: one backup named by the creation time, once the cluster is QuorumReady; never again.
        ({"now": "10:00:31", "immediate": True}, ("make", "10:00:30", "10:01", None)),
        ({"now": "10:00:31", "immediate": True, "cluster_ready": False}, ("wait", None, "10:01", WAITING)),
        ({"now": "10:00:50", "immediate": True, "last": "10:00:30"}, ("wait", None, "10:01", None)),
        # A time due before the immediate one was made: that time's backup stands for both.
        ({"now": "10:01:10", "immediate": True}, ("make", "10:01", "10:02", None)),
        # ... and waits with it while the cluster is not QuorumReady (that backup would fail at once: seen
        # when a sandbox's cluster was still electing at its schedule's first time).
        ({"now": "10:01:10", "immediate": True, "cluster_ready": False}, ("wait", None, "10:02", WAITING)),
        ({"expression": "0 * * * *", "now": "11:00:40", "immediate": True}, ("make", "11:00", "12:00", None)),
        # Past STARTING_DEADLINE, that time is let go, and the immediate one is made.
        (
            {"expression": "0 * * * *", "now": "11:06:00", "immediate": True},
            ("make", "10:00:30", "12:00", None),
        ),
        # Restarted after missing many times: one backup, for the latest.
        ({"now": "10:03:20", "last": "09:50"}, ("make", "10:03", "10:04", None)),
        # A time is made at most STARTING_DEADLINE late; later, it is let go.
        ({"expression": "0 * * * *", "now": "11:04:59"}, ("make", "11:00", "12:00", None)),
        ({"expression": "0 * * * *", "now": "11:05:01"}, ("wait", None, "12:00", None)),
        # Suspended: nothing, and nothing is due.
        (
            {"now": "10:05:00", "last": "10:00", "suspended": True, "immediate": True},
            ("suspended", None, None, None),
        ),
        # Resumed: the times missed while suspended are not made up; the next one is.
        ({"now": "10:02:30", "last": "09:55", "resumed": "10:02:10"}, ("wait", None, "10:03", None)),
        ({"now": "10:03:01", "last": "09:55", "resumed": "10:02:10"}, ("make", "10:03", "10:04", None)),
        # Suspended before its first backup: resuming makes no immediate one.
        ({"now": "10:00:50", "resumed": "10:00:45", "immediate": True}, ("wait", None, "10:01", None)),
    ],
)
def test_what_a_schedule_does_now(arguments: dict[str, Any], expected: tuple[Any, ...]) -> None:
    action, time, next_time, waiting = expected
    assert step(**arguments) == ScheduleStep(
        action,
        at(next_time) if next_time else None,
        time=at(time) if time else None,
        waiting=waiting,
    )


@pytest.mark.parametrize(
    ("backups", "busy"),
    [
        ((running("a", "10:00:05"),), "a"),
        ((running("a", "10:00:05", phase=None),), "a"),  # made, not yet started: Pending
        ((running("a", "10:00:05", "Completed", ended="10:01:20"),), "a"),  # ended since: it was running then
        ((running("a", "10:00:05", "Failed", ended="10:02:00"),), "a"),
        ((running("a", "10:00:05", "Completed", ended="10:00:50"),), None),
        ((running("a", "10:00:05", "Failed", ended="10:00:06"),), None),
        ((running("b", "10:01:00"),), None),  # this time's own backup (made already, status not written)
        ((running("a", "09:59:05", "Completed", ended="09:59:30"), running("b", "10:00:05")), "b"),
    ],
)
def test_a_time_at_which_the_previous_backup_was_still_running_is_skipped(
    backups: tuple[BackupView, ...], busy: str | None
) -> None:
    decided = step(now="10:01:02", last="10:00", backups=backups)
    assert (decided.action, decided.time, decided.next_time) == (
        ("skip" if busy else "make"),
        at("10:01"),
        at("10:02"),
    )
    assert decided.busy == busy


def test_a_backups_name_is_its_schedules_and_time_and_fits_a_label_value() -> None:
    assert backup_name("nightly", at("10:01")) == "nightly-20261126100100"
    long = "a-schedule-with-a-name-far-longer-than-most-people-ever-give"
    named = backup_name(long, at("10:01"))
    assert len(named) <= LABEL_VALUE_LIMIT
    assert named.startswith("a-schedule-with-a-name-far-longer-than-")
    assert named.endswith("-20261126100100")
    assert named == backup_name(long, at("10:01")), "the same time, the same name: never two backups"
    assert named != backup_name(long + "s", at("10:01"))


SPEC = {
    "cluster": {"name": "search"},
    "schedule": "0 3 * * *",
    "destination": {"volume": {"claimName": "backups"}},
    "retention": {"keep": 2},
    "deletionPolicy": "Retain",
    "immediate": True,
}


def schedule_object(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "TypesenseScheduledBackup",
        "metadata": {
            "name": "nightly",
            "namespace": "team-a",
            "uid": "schedule-uid",
            "generation": 1,
            "creationTimestamp": "2026-11-26T10:00:30Z",
        },
        "spec": {**SPEC, **spec},
    }


def test_the_backup_a_schedule_makes_is_its_child_with_its_cluster_destination_and_policy() -> None:
    made = scheduled_backup(Schedule.from_object(schedule_object()), at("03:00"))
    assert made["metadata"]["name"] == "nightly-20261126030000"
    assert made["metadata"]["labels"] == {
        "app.kubernetes.io/name": "typesense-backup",
        "app.kubernetes.io/instance": "nightly",
        "app.kubernetes.io/component": "scheduled-backup",
        "app.kubernetes.io/managed-by": "typesense-operator",
        SCHEDULE_LABEL: "nightly",
    }
    (owner,) = made["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == (
        "TypesenseScheduledBackup",
        "nightly",
        "schedule-uid",
        True,
    )
    assert made["spec"] == {
        "cluster": {"name": "search"},
        "destination": {"volume": {"claimName": "backups", "subPath": ""}},
        "deletionPolicy": "Retain",
    }


def test_a_backup_is_seen_with_its_times() -> None:
    view = backup_view(
        {
            "metadata": {"name": "b", "creationTimestamp": "2026-11-26T10:00:31Z"},
            "status": {"phase": "Completed", "completedAt": "2026-11-26T10:01:00Z"},
        }
    )
    assert view == BackupView("b", "Completed", at("10:00:31"), at("10:01"))
    assert backup_view({"metadata": {"name": "c", "creationTimestamp": "2026-11-26T10:00:31Z"}}).phase is None
