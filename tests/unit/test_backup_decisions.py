"""What a backup decides, against tables: the next time a schedule fires, which node is snapshotted,
and which of a schedule's backups go."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from typesense_operator.backup.cron import CronError, parse_cron
from typesense_operator.backup.decide import (
    BackupView,
    NodeChoice,
    NotBackedUp,
    choose_node,
    collections_held,
    not_serving_the_restore,
    parse_age,
    to_prune,
)
from typesense_operator.quorum.model import NodeProbe

NOW = datetime(2026, 11, 25, 23, 30, tzinfo=UTC)  # a Wednesday


@pytest.mark.parametrize(
    ("expression", "after", "fires"),
    [
        ("* * * * *", NOW, NOW + timedelta(minutes=1)),
        ("0 3 * * *", NOW, datetime(2026, 11, 26, 3, 0, tzinfo=UTC)),
        ("*/15 * * * *", NOW.replace(minute=31), NOW.replace(minute=45)),
        ("@hourly", NOW, datetime(2026, 11, 26, 0, 0, tzinfo=UTC)),
        ("@daily", NOW, datetime(2026, 11, 26, 0, 0, tzinfo=UTC)),
        ("@weekly", NOW, datetime(2026, 11, 29, 0, 0, tzinfo=UTC)),  # Sunday
        ("@monthly", NOW, datetime(2026, 12, 1, 0, 0, tzinfo=UTC)),
        ("@yearly", NOW, datetime(2027, 1, 1, 0, 0, tzinfo=UTC)),
        ("30 2 * * MON-FRI", NOW, datetime(2026, 11, 26, 2, 30, tzinfo=UTC)),
        ("30 2 * * SAT,SUN", NOW, datetime(2026, 11, 28, 2, 30, tzinfo=UTC)),
        ("0 0 * * 7", NOW, datetime(2026, 11, 29, 0, 0, tzinfo=UTC)),  # 7 is Sunday too
        ("0 0 1 JAN *", NOW, datetime(2027, 1, 1, 0, 0, tzinfo=UTC)),
        ("0 0 29 2 *", NOW, datetime(2028, 2, 29, 0, 0, tzinfo=UTC)),
        # Day of month and weekday both restricted: either matches (the 1st, or a Friday).
        ("0 12 1 * FRI", NOW, datetime(2026, 11, 27, 12, 0, tzinfo=UTC)),
        ("5-10/5 * * * *", NOW, datetime(2026, 11, 26, 0, 5, tzinfo=UTC)),
        ("59 23 31 12 *", NOW, datetime(2026, 12, 31, 23, 59, tzinfo=UTC)),
    ],
)
def test_the_next_time_a_schedule_fires(expression: str, after: datetime, fires: datetime) -> None:
    assert parse_cron(expression).next_after(after) == fires


@pytest.mark.parametrize(
    ("expression", "reason"),
    [
        ("61 * * * *", "minute: 61 is outside 0-59"),
        ("* 24 * * *", "hour: 24 is outside 0-23"),
        ("* * 0 * *", "day of month: 0 is outside 1-31"),
        ("* * * 13 *", "month: 13 is outside 1-12"),
        ("* * * * 8", "weekday: 8 is outside 0-7"),
        ("* * * FOO *", "month: 'FOO' is not a number or a name"),
        ("*/0 * * * *", "minute: the step '0' is not a positive number"),
        ("10-5 * * * *", "minute: the range '10-5' runs backwards"),
        ("1,,2 * * * *", "minute: an empty item"),
        ("* * * *", "has 4 fields, not 5"),
        ("@reboot", "has 1 fields, not 5"),
    ],
)
def test_an_invalid_schedule_says_which_field(expression: str, reason: str) -> None:
    with pytest.raises(CronError, match=reason.replace("*", r"\*")):
        parse_cron(expression)


def test_a_schedule_that_never_fires_says_so() -> None:
    with pytest.raises(CronError, match="never fires"):
        parse_cron("0 0 30 2 *").next_after(NOW)


def probe(index: int, state: str, committed: int | None = 10, healthy: bool = True) -> NodeProbe:
    return NodeProbe(index=index, reachable=True, state=state, committed_index=committed, health_ok=healthy)


@pytest.mark.parametrize(
    ("phase", "probes", "decided"),
    [
        (
            "QuorumReady",
            [probe(0, "LEADER"), probe(1, "FOLLOWER"), probe(2, "FOLLOWER")],
            NodeChoice(1, "a caught-up follower"),
        ),
        (
            "QuorumReady",
            [probe(0, "FOLLOWER", committed=9), probe(1, "LEADER"), probe(2, "FOLLOWER")],
            NodeChoice(2, "a caught-up follower"),
        ),
        (
            "QuorumReady",
            [probe(0, "FOLLOWER", healthy=False), probe(1, "LEADER"), probe(2, "FOLLOWER", committed=None)],
            NodeChoice(1, "the leader: no follower had caught up with it"),
        ),
        ("QuorumReady", [probe(0, "LEADER")], NodeChoice(0, "the only node")),
        (
            "QuorumDegraded",
            [probe(0, "LEADER"), probe(1, "FOLLOWER")],
            NotBackedUp(
                "ClusterNotReady",
                "the cluster is QuorumDegraded, not QuorumReady: only a cluster whose quorum is ready is "
                "backed up",
            ),
        ),
        (
            None,
            [],
            NotBackedUp(
                "ClusterNotReady",
                "the cluster is not observed yet, not QuorumReady: only a cluster whose quorum is ready is "
                "backed up",
            ),
        ),
        (
            "QuorumReady",
            [probe(0, "LEADER"), probe(1, "LEADER"), probe(2, "FOLLOWER")],
            NotBackedUp("NoLeader", "2 healthy leaders answered, not one: no snapshot is taken"),
        ),
    ],
)
def test_the_node_snapshotted(
    phase: str | None, probes: list[NodeProbe], decided: NodeChoice | NotBackedUp
) -> None:
    assert choose_node(phase, probes) == decided


def backup(name: str, phase: str | None, days_ago: float, done: bool = True) -> BackupView:
    created = NOW - timedelta(days=days_ago)
    return BackupView(name, phase, created, created + timedelta(minutes=1) if done else None)


HISTORY = [
    backup("b1", "Completed", 10),
    backup("b2", "Failed", 9, done=False),
    backup("b3", "Completed", 8),
    backup("b4", "Completed", 2),
    backup("b5", "Failed", 1.5, done=False),
    backup("b6", "Completed", 1),
    backup("b7", "Running", 0, done=False),
]


@pytest.mark.parametrize(
    ("backups", "keep", "max_age", "pruned"),
    [
        (HISTORY, None, None, ["b2", "b5"]),
        (HISTORY, 2, None, ["b1", "b2", "b3", "b5"]),
        (HISTORY, None, timedelta(days=5), ["b1", "b2", "b3", "b5"]),
        (HISTORY, 3, timedelta(days=9), ["b1", "b2", "b5"]),
        (HISTORY, 1, None, ["b1", "b2", "b3", "b4", "b5"]),
        # All completed backups too old: the newest is kept all the same.
        (
            [backup("old", "Completed", 40), backup("older", "Completed", 50)],
            None,
            timedelta(days=30),
            ["older"],
        ),
        # Nothing completed yet: failed backups are kept, to be looked at.
        ([backup("f", "Failed", 3, done=False), backup("r", "Pending", 0, done=False)], 1, None, []),
    ],
)
def test_which_backups_a_schedule_lets_go(
    backups: list[BackupView], keep: int | None, max_age: timedelta | None, pruned: list[str]
) -> None:
    assert to_prune(backups, keep, max_age, NOW) == pruned


@pytest.mark.parametrize(
    ("text", "age"),
    [("30d", timedelta(days=30)), ("720h", timedelta(hours=720)), ("90m", timedelta(minutes=90))],
)
def test_ages_read_as_the_api_server_checked_them(text: str, age: timedelta) -> None:
    assert parse_age(text) == age


def _listing(**documents: int) -> bytes:
    return json.dumps([{"name": name, "num_documents": count} for name, count in documents.items()]).encode()


def test_what_a_node_serves_is_read_from_its_collections() -> None:
    assert collections_held(200, _listing(books=3, authors=2)) == {"books": 3, "authors": 2}
    assert collections_held(200, b"[]") == {}
    # A node catching up answers "Not Ready or Lagging" (typesense-server 0.24.1).
    assert collections_held(503, b'{"message": "Not Ready or Lagging"}') is None
    assert collections_held(200, b"not json") is None


@pytest.mark.parametrize(
    ("held", "said"),
    [
        pytest.param({"s-0": {"books": 3}, "s-1": {"books": 3}, "s-2": {"books": 3}}, [], id="all serve it"),
        pytest.param(
            {"s-0": {"books": 3, "authors": 2}, "s-1": {}, "s-2": {"books": 3, "authors": 2}},
            ["s-1 lacks 2 of the 2 restored collections (authors, books)"],
            id="a node that says it is healthy with nothing",
        ),
        pytest.param(
            {"s-0": {"books": 3}, "s-1": None, "s-2": {"books": 1}},
            ["s-1 does not serve yet (catching up)", "s-2 holds 1 of the 3 documents of books"],
            id="catching up",
        ),
        pytest.param(
            {"s-0": {"books": 3}, "s-1": {"books": 4}, "s-2": {"books": 3, "new": 1}},
            [],
            id="a write since, on a follower first",
        ),
        pytest.param(
            {"s-0": None, "s-1": {"books": 3}}, ["the leader s-0 does not list its collections yet"]
        ),
    ],
)
def test_ready_after_a_restore_waits_for_every_node_to_serve_the_leaders_collections(
    held: dict[str, dict[str, int] | None], said: list[str]
) -> None:
    assert not_serving_the_restore(held, "s-0") == said
