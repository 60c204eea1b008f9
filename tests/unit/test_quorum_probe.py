"""The probe adapter turns node answers into observations, bounds concurrency, keeps the key in headers."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from collections.abc import AsyncIterator, Mapping
from dataclasses import replace
from datetime import UTC, datetime

import pytest

from typesense_operator.api.reasons import ReadyReason
from typesense_operator.quorum.model import Action, ClusterState, Plan, QuorumRecord
from typesense_operator.quorum.probe import (
    DirectToPod,
    NodeTarget,
    ProbeFailed,
    Unreachable,
    parse_last_log,
    parse_raft_peers,
    probe_nodes,
)
from typesense_operator.quorum.record import record_from_status, status_from_plan


def target(index: int, ip: str | None = "127.50.0.1") -> NodeTarget:
    return NodeTarget(index=index, pod=f"c-sts-{index}", namespace="n", pod_ip=ip, port=8108)


class Scripted:
    """Answers per (index, path); records the most requests seen in flight at once."""

    def __init__(self, answers: dict[tuple[int, str], tuple[int, object] | None]) -> None:
        self.answers = answers
        self.in_flight = 0
        self.most_in_flight = 0
        self.headers: list[Mapping[str, str]] = []
        self.paths: list[str] = []

    async def get(
        self, node: NodeTarget, path: str, headers: Mapping[str, str], timeout: float
    ) -> tuple[int, bytes]:
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        self.headers.append(headers)
        self.paths.append(path)
        await asyncio.sleep(0.01)
        self.in_flight -= 1
        answer = self.answers.get((node.index, path))
        if answer is None:
            raise Unreachable("no answer")
        code, body = answer
        return code, body if isinstance(body, bytes) else json.dumps(body).encode()


async def test_answers_become_observations() -> None:
    addressing = Scripted(
        {
            (0, "/status"): (200, {"committed_index": 42, "queued_writes": 0, "state": "LEADER"}),
            (0, "/health"): (200, {"ok": True}),
            (0, "/metrics.json"): (
                200,
                {"system_disk_used_bytes": "4096", "system_disk_total_bytes": "268435456"},
            ),
            (1, "/status"): (200, {"committed_index": 40, "queued_writes": 0, "state": "FOLLOWER"}),
            (1, "/health"): (503, {"ok": False, "resource_error": "OUT_OF_DISK"}),
            (2, "/health"): (503, b"Not Ready or Lagging"),
        }
    )
    leader, follower, lagging, gone = await probe_nodes(
        addressing, [target(0), target(1), target(2), target(3)], "the-key"
    )
    assert (leader.state, leader.committed_index, leader.health_ok) == ("LEADER", 42, True)
    assert (leader.disk_used_bytes, leader.disk_total_bytes) == (4096, 268435456)
    assert follower.disk_used_bytes is None
    assert (follower.health_ok, follower.resource_error) == (False, "OUT_OF_DISK")
    assert lagging.reachable
    assert lagging.state is None
    assert lagging.health_ok is False
    assert lagging.status_silent, "/health answered, /status did not"
    assert not any(p.status_silent for p in (leader, follower, gone))
    assert not gone.reachable
    status_headers = [h for h in addressing.headers if h]
    assert all(h == {"X-TYPESENSE-API-KEY": "the-key"} for h in status_headers)


async def test_concurrency_is_bounded() -> None:
    addressing = Scripted({(i, "/health"): (200, {"ok": True}) for i in range(10)})
    await probe_nodes(addressing, [target(i) for i in range(10)], "k", concurrency=2)
    assert addressing.most_in_flight <= 6  # two nodes at once, each asking /status, /health, /metrics.json


@contextlib.asynccontextmanager
async def raw_server(answer: bytes | None) -> AsyncIterator[int]:
    """A TCP server on loopback that reads a request and writes ``answer`` (None: says nothing until it
    stops); every connection is closed when it stops."""
    stopping = asyncio.Event()
    handlers: list[asyncio.Task[object]] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        handlers.append(task)
        try:
            await reader.readuntil(b"\r\n\r\n")
            if answer is None:
                await stopping.wait()
            else:
                writer.write(answer)
                await writer.drain()
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        stopping.set()
        server.close()
        await server.wait_closed()
        await asyncio.gather(*handlers, return_exceptions=True)


def at(port: int) -> NodeTarget:
    return NodeTarget(index=0, pod="c-sts-0", namespace="n", pod_ip="127.0.0.1", port=port)


async def test_direct_addressing_times_out_and_needs_an_ip() -> None:
    direct = DirectToPod()
    try:
        async with raw_server(None) as silent:
            (no_ip, timed_out) = await probe_nodes(direct, [target(0, ip=None), at(silent)], "k", timeout=0.2)
    finally:
        await direct.aclose()
    assert not no_ip.reachable
    assert not timed_out.reachable


def test_record_round_trips_through_status() -> None:
    when = datetime(2026, 1, 1, tzinfo=UTC)
    record = QuorumRecord(
        members=(1,), unhealthy_since=when, survivor=1, downgraded_at=when, survivor_restarted=True
    )
    plan = Plan(
        state=ClusterState.ELECTION_DEADLOCK,
        action=Action.DOWNGRADE,
        members=(1,),
        ready=False,
        reason=ReadyReason.QUORUM_DEGRADED,
        message="m",
        requeue_after=10,
        record=record,
    )
    status = status_from_plan(plan, None, when)
    assert status["lastAction"] == "Downgrade"
    assert status["lastActionAt"] == "2026-01-01T00:00:00Z"
    assert status["lastActionMessage"] == "m"
    assert status["unhealthySince"] == "2026-01-01T00:00:00Z"
    assert record_from_status({"quorum": status}) == record
    assert record_from_status(None) == QuorumRecord()


# Captured from typesense-server 0.24.1 (``GET /raft_stat?console=1`` on its peering port), index and term
# changed: braft mixes CRLF and LF line ends.
RAFT_STAT = (
    b"[default_group]\r\npeer_id: 127.0.77.5:8107:8108\r\nstate: FOLLOWER\r\nreadonly: 0\r\nterm: 2\r\n"
    b"conf_index: 2\r\npeers: 127.0.77.5:8107:8108\r\nchanging_conf: NO    stage: STAGE_NONE\r\n"
    b"storage: [1, 15]\ndisk_index: 15\nknown_applied_index: 0\nlast_log_id: (index=15,term=2)\n"
    b"state_machine: Idle\nlast_committed_index: 0\r\nlast_snapshot_index: 0\r\n\r\n"
)
# The same page as brpc renders it for a browser (any client but curl, without console=1).
RAFT_STAT_HTML = (
    b"<!DOCTYPE html><html><head>\n<style>ol,ul { list-style:none; }</style></head><body><pre>"
    b"ot_timer: timeout(-1000ms) STOPPED<br>storage: [1, 15]<br>disk_index: 15<br>"
    b"known_applied_index: 0<br>last_log_id: (index=15,term=2)<br>state_machine: Idle<br></pre></body></html>"
)


def test_the_last_log_entry_is_read_from_braft_raft_stat() -> None:
    assert parse_last_log(RAFT_STAT) == (2, 15)
    assert parse_last_log(RAFT_STAT_HTML) == (2, 15)
    assert parse_last_log(b"<html>not braft</html>") is None


async def test_the_raft_log_is_asked_for_as_text_on_the_peering_port() -> None:
    """brpc sends HTML to any client but curl unless console=1 is asked: without it, no log position is
    ever read, and after a full restart (every committed index 0) the survivor is chosen by ordinal."""
    peering = replace(target(0), peering_port=8107)
    addressing = Scripted(
        {
            (0, "/status"): (200, {"committed_index": 0, "queued_writes": 0, "state": "FOLLOWER"}),
            (0, "/health"): (503, {"ok": False}),
            (0, "/raft_stat?console=1"): (200, RAFT_STAT),
        }
    )
    (probe,) = await probe_nodes(addressing, [peering], "the-key")
    assert probe.last_log == (2, 15)
    assert "/raft_stat?console=1" in addressing.paths
    assert probe.raft_peers == ("127.0.77.5:8107",)
    assert probe.address == "127.50.0.1:8107"


@pytest.mark.parametrize(
    ("page", "peers"),
    [
        (RAFT_STAT, ("127.0.77.5:8107",)),
        (b"peers: 10.0.0.1:8107:8108 10.0.0.2:8107:8108\r\n", ("10.0.0.1:8107", "10.0.0.2:8107")),
        (b"state: FOLLOWER<br>peers: 10.0.0.1:8107:8108<br>", ("10.0.0.1:8107",)),
        (b"peers: [::1]:8107:8108\n", ("[::1]:8107",)),
        (b"peers: c-sts-0.c-sts-svc:8107:8108\n", None),  # a name says nothing about which pod it is
        (b"peers:\r\nchanging_conf: NO", None),
        (b"<html>not braft</html>", None),
    ],
)
def test_the_raft_configuration_is_read_from_braft_raft_stat(
    page: bytes, peers: tuple[str, ...] | None
) -> None:
    assert parse_raft_peers(page) == peers


async def test_a_bug_in_a_probe_is_not_an_unreachable_node(caplog: pytest.LogCaptureFixture) -> None:
    """Taking a healthy node for silent could fence it: a probe that fails for another reason stops the
    reconcile (which backs off), with the traceback in the log."""

    class Broken:
        async def get(
            self, node: NodeTarget, path: str, headers: Mapping[str, str], timeout: float
        ) -> tuple[int, bytes]:
            raise KeyError("a bug")

    with pytest.raises(ProbeFailed, match="failed unexpectedly"):
        await probe_nodes(Broken(), [target(0)], "the-key")
    unexpected = [record for record in caplog.records if "failed unexpectedly" in record.getMessage()]
    assert unexpected
    assert all(record.exc_info for record in unexpected)


async def test_only_a_missing_answer_makes_a_node_unreachable() -> None:
    """Refused (nothing listens) is no answer; an answer nobody can read (a gzip body that is not gzip)
    is a failure of the probe, not a silent node."""
    with socket.socket() as probe_socket:
        probe_socket.bind(("127.0.0.1", 0))
        closed_port = probe_socket.getsockname()[1]
    garbled_answer = b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 5\r\n\r\nhello"
    direct = DirectToPod()
    try:
        (refused,) = await probe_nodes(direct, [at(closed_port)], "the-key")
        assert not refused.reachable
        async with raw_server(garbled_answer) as garbled:
            with pytest.raises(ProbeFailed):
                await probe_nodes(direct, [at(garbled)], "the-key")
    finally:
        await direct.aclose()


HEALTHY = Plan(
    state=ClusterState.OK,
    action=Action.NONE,
    members=(0, 1, 2),
    ready=True,
    reason=ReadyReason.QUORUM_READY,
    message="leader elected",
    requeue_after=11,
    record=QuorumRecord(),
)


def test_a_lasting_hold_is_recorded_once_and_a_running_grace_says_when_it_ends() -> None:
    first, later = datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 1, 1, 0, 0, 5, tzinfo=UTC)
    hold = replace(HEALTHY, state=ClusterState.NOT_READY, action=Action.HOLD, ready=False, message="held")
    recorded = status_from_plan(hold, None, first)
    assert status_from_plan(hold, recorded, later) == recorded, "one episode, one record: no write per look"
    waiting = replace(
        hold,
        action=Action.NONE,
        wait_ends_at=later,
        then="downgrade",
        record=QuorumRecord(unhealthy_since=first),
    )
    status = status_from_plan(waiting, recorded, later)
    assert (status["graceEndsAt"], status["thenAction"]) == ("2026-01-01T00:00:05Z", "downgrade")
    assert status["lastActionAt"] == recorded["lastActionAt"]


def test_the_furthest_commit_is_written_when_something_goes_wrong_not_on_every_look() -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    healthy = replace(HEALTHY, record=QuorumRecord(committed=(3, 100)))
    first = status_from_plan(healthy, None, now)
    assert first["committed"] == {"term": 3, "index": 100}
    moved = replace(healthy, record=QuorumRecord(committed=(3, 250)))
    assert status_from_plan(moved, first, now)["committed"] == {"term": 3, "index": 100}, "no write per look"
    elected = replace(healthy, record=QuorumRecord(committed=(4, 251)))
    assert status_from_plan(elected, first, now)["committed"] == {"term": 4, "index": 251}, "a new term"
    trouble = replace(moved, state=ClusterState.NOT_READY, ready=False)
    assert status_from_plan(trouble, first, now)["committed"] == {"term": 3, "index": 250}
    assert record_from_status({"quorum": status_from_plan(trouble, first, now)}).committed == (3, 250)
