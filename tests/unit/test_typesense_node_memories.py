"""The operator's memories of each cluster (its furthest commit; its nodes' silences): per cluster, per
uid, and gone with it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from typesense_operator.controller.cluster.nodes import CommitMemory, SilenceMemory
from typesense_operator.quorum.model import NodeProbe


def test_a_commit_is_recalled_for_the_same_cluster_only() -> None:
    memory = CommitMemory()
    memory.keep("ns", "search", "uid-1", (4, 90))
    assert memory.recall("ns", "search", "uid-1") == (4, 90)
    assert memory.recall("ns", "other", "uid-1") is None
    assert memory.recall("elsewhere", "search", "uid-1") is None


def test_a_cluster_made_again_under_the_same_name_starts_afresh() -> None:
    """Its nodes are new: the old commit would keep every downgrade waiting for a log no node has."""
    memory = CommitMemory()
    memory.keep("ns", "search", "uid-1", (4, 90))
    assert memory.recall("ns", "search", "uid-2") is None
    memory.keep("ns", "search", "uid-2", (1, 3))
    assert memory.recall("ns", "search", "uid-2") == (1, 3)


def test_a_deleted_cluster_is_forgotten() -> None:
    memory = CommitMemory()
    memory.keep("ns", "search", "uid-1", (4, 90))
    memory.forget("ns", "search")
    memory.forget("ns", "never-seen")
    assert memory.recall("ns", "search", "uid-1") is None


T0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
STARTED = T0 - timedelta(minutes=10)


def answering(
    index: int, *, status: bool, health_ok: bool | None = True, started: datetime = STARTED
) -> NodeProbe:
    return NodeProbe(
        index=index, reachable=True, health_ok=health_ok, status_silent=not status, running_since=started
    )


def silences(memory: SilenceMemory, probes: list[NodeProbe], at: datetime, uid: str = "uid-1") -> list:
    return [p.status_silent_since for p in memory.stamp("ns", "search", uid, probes, at)]


def test_a_silence_is_timed_from_the_first_look_that_saw_it_until_status_answers() -> None:
    memory = SilenceMemory()
    assert silences(memory, [answering(0, status=True), answering(1, status=False)], T0) == [None, T0]
    later = T0 + timedelta(seconds=40)
    assert silences(memory, [answering(0, status=True), answering(1, status=False)], later) == [None, T0]
    assert silences(memory, [answering(1, status=True)], later) == [None]
    assert silences(memory, [answering(1, status=False)], later + timedelta(seconds=1)) == [
        later + timedelta(seconds=1)
    ], "it answered in between: a new silence"


def test_only_a_healthy_node_silent_in_the_same_container_run_keeps_its_clock() -> None:
    memory = SilenceMemory()
    silences(memory, [answering(1, status=False)], T0)
    restarted = answering(1, status=False, started=T0 + timedelta(seconds=5))
    assert silences(memory, [restarted], T0 + timedelta(seconds=40)) == [T0 + timedelta(seconds=40)]
    assert silences(memory, [answering(1, status=False, health_ok=False)], T0) == [None], "loading"
    silences(memory, [answering(2, status=False)], T0)
    assert silences(memory, [answering(2, status=False)], T0 + timedelta(seconds=9), uid="uid-2") == [
        T0 + timedelta(seconds=9)
    ], "a cluster made again under the same name"
    memory.forget("ns", "search")
    assert silences(memory, [answering(2, status=False)], T0 + timedelta(seconds=50), uid="uid-2") == [
        T0 + timedelta(seconds=50)
    ]


def test_a_node_answering_nothing_is_timed_from_the_first_look_that_saw_it_until_it_answers() -> None:
    memory = SilenceMemory()
    gone = NodeProbe(index=2, reachable=False, running_since=STARTED)
    first = memory.stamp("ns", "search", "uid-1", [answering(0, status=True), gone], T0)
    assert [p.unreachable_since for p in first] == [None, T0]
    assert first[1].status_silent_since is None, "two clocks: /status alone, and everything"
    later = memory.stamp("ns", "search", "uid-1", [gone], T0 + timedelta(seconds=40))
    assert later[0].unreachable_since == T0
    memory.stamp("ns", "search", "uid-1", [answering(2, status=True)], T0 + timedelta(seconds=41))
    again = memory.stamp("ns", "search", "uid-1", [gone], T0 + timedelta(seconds=42))
    assert again[0].unreachable_since == T0 + timedelta(seconds=42), "it answered in between"
