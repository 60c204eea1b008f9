"""The roll planner (typesense_operator.quorum.roll), row by row: order, hand-over, gating, pause."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from typesense_operator.quorum.model import NodeProbe
from typesense_operator.quorum.record import roll_status, roll_under_way, roll_waiting_since
from typesense_operator.quorum.roll import RollAction, RollNode, RollSettings, plan_roll

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
OLD, NEW = "rev-old", "rev-new"


EVERY_NODE = ("every node",)
"""A leader's raft configuration that names every node of the table at its address (filled in by plan)."""


def address(index: int) -> str:
    return f"10.0.0.{index + 1}:8107"


def node(
    index: int,
    revision: str | None = OLD,
    state: str | None = "FOLLOWER",
    committed: int = 1000,
    *,
    ready: bool = True,
    deleting: bool = False,
    peers: tuple[str, ...] | None = EVERY_NODE,
    healthy: bool = True,
) -> RollNode:
    probe = NodeProbe(
        index=index,
        reachable=state is not None,
        state=state,
        health_ok=healthy and state is not None,
        committed_index=committed,
        raft_peers=peers,
        address=address(index),
    )
    return RollNode(probe, revision, ready=ready, deleting=deleting)


def plan(nodes: list[RollNode], *, quorum_ready: bool = True, waiting: float | None = None):  # type: ignore[no-untyped-def]
    every = tuple(n.probe.address for n in nodes if n.probe.address is not None)
    nodes = [
        replace(n, probe=replace(n.probe, raft_peers=every)) if n.probe.raft_peers == EVERY_NODE else n
        for n in nodes
    ]
    since = None if waiting is None else NOW - timedelta(seconds=waiting)
    return plan_roll(
        nodes, NEW, quorum_ready=quorum_ready, waiting_since=since, now=NOW, settings=RollSettings()
    )


@pytest.mark.parametrize(
    ("nodes", "action", "target"),
    [
        pytest.param(
            [node(0, NEW, "LEADER"), node(1, NEW), node(2, NEW)], RollAction.DONE, None, id="all new"
        ),
        pytest.param(
            [node(0, state="LEADER"), node(1), node(2)], RollAction.RESTART, 1, id="a follower first"
        ),
        pytest.param(
            [node(0, NEW, "LEADER"), node(1), node(2, NEW)], RollAction.RESTART, 1, id="the last follower"
        ),
        pytest.param(
            [node(0, state="LEADER"), node(1, NEW), node(2, NEW, committed=1500)],
            RollAction.RESTART,
            0,
            id="only the leader left: it goes last",
        ),
        pytest.param(
            [node(0, state="FOLLOWER"), node(1, NEW), node(2, NEW, "LEADER")],
            RollAction.RESTART,
            0,
            id="the old leader follows now: restarted",
        ),
        pytest.param(
            [node(0, state="LEADER"), node(1, NEW, ready=False), node(2)],
            RollAction.WAIT,
            1,
            id="a restarted node not Ready yet",
        ),
        pytest.param(
            [node(0, state="LEADER"), node(1, NEW, committed=200), node(2)],
            RollAction.WAIT,
            1,
            id="a restarted node that answers /health but is behind the leader",
        ),
        pytest.param(
            [node(0, state="LEADER"), node(1, NEW, healthy=False), node(2)],
            RollAction.WAIT,
            1,
            id="a restarted node that follows, its pod Ready, but whose /health is not ok yet",
        ),
        pytest.param(
            [node(0, state="LEADER"), node(1, NEW), node(2, NEW, healthy=False)],
            RollAction.WAIT,
            2,
            id="the leader waits while a follower's /health is not ok (a thawed node, Ready still True)",
        ),
        pytest.param(
            [node(0, state="LEADER"), node(1, deleting=True), node(2)],
            RollAction.WAIT,
            1,
            id="a pod being replaced",
        ),
        pytest.param(
            [node(0, state="LEADER"), node(1), node(2, state=None, ready=False)],
            RollAction.RESTART,
            2,
            id="an outdated node that is down already goes first",
        ),
        pytest.param(
            [node(0, state="LEADER"), node(1, committed=10), node(2)],
            RollAction.RESTART,
            1,
            id="an outdated node that lags goes first",
        ),
    ],
)
def test_the_next_step_of_a_roll(nodes: list[RollNode], action: RollAction, target: int | None) -> None:
    step = plan(nodes)
    assert (step.action, step.node) == (action, target), step.message


def test_nothing_is_restarted_while_the_cluster_is_not_quorum_ready() -> None:
    step = plan([node(0, state="LEADER"), node(1), node(2)], quorum_ready=False)
    assert step.action is RollAction.WAIT
    assert "not QuorumReady" in step.message
    leaderless = plan([node(0), node(1), node(2)])
    assert leaderless.action is RollAction.WAIT


def test_a_single_node_is_restarted_as_it_is_with_the_cost_in_the_message() -> None:
    step = plan([node(0, state="LEADER")])
    assert (step.action, step.node) == (RollAction.RESTART, 0)
    assert "unavailable until it is back" in step.message


def test_the_leader_waits_for_a_follower_that_is_behind() -> None:
    nodes = [
        node(0, state="LEADER", committed=5000),
        node(1, NEW, committed=4800),
        node(2, NEW, committed=4990),
    ]
    step = plan(nodes)
    assert (step.action, step.node) == (RollAction.WAIT, 1)


def test_a_node_that_does_not_come_back_pauses_the_roll_with_the_reason() -> None:
    nodes = [node(0, state="LEADER"), node(1, NEW, ready=False), node(2)]
    assert plan(nodes, waiting=299).action is RollAction.WAIT
    paused = plan(nodes, waiting=300)
    assert paused.action is RollAction.PAUSE
    assert "node(s) 1 did not come back within 300 s" in paused.message
    back = plan([node(0, state="LEADER"), node(1, NEW), node(2)], waiting=400)
    assert (back.action, back.node) == (RollAction.RESTART, 2), "resumed once it is back"


def test_progress_names_the_nodes_done_and_to_do() -> None:
    step = plan([node(0, state="LEADER"), node(1, NEW), node(2)])
    assert step.done == (1,)
    assert step.to_do == (0, 2)


def test_the_roll_bookkeeping_round_trips_through_the_status_and_leaves_unset_fields_out() -> None:
    waiting = plan([node(0, state="LEADER"), node(1, NEW, ready=False), node(2)], waiting=10)
    wire = roll_status(NEW, waiting, NOW)
    assert wire == {
        "updateRevision": NEW,
        "done": [1],
        "toDo": [0, 2],
        "next": 1,  # the node waited for
        "waitingSince": "2026-01-01T12:00:00Z",
    }
    status = {"roll": wire}
    assert roll_waiting_since(status, NEW) == NOW
    assert roll_waiting_since(status, "another") is None
    assert roll_under_way(status, NEW)
    assert roll_status(NEW, None, None) == {"updateRevision": NEW}, "no None to rewrite on every reconcile"
    assert not roll_under_way({"roll": roll_status(NEW, None, None)}, NEW)


def test_a_node_back_at_a_new_address_holds_the_roll_until_the_leaders_configuration_names_it() -> None:
    """Its committed index looks caught up, but the leader replicates to the old address only: restarting
    another node now would leave the configuration with no majority that can elect a leader."""
    before_refresh = (address(0), "10.0.0.9:8107", address(2))
    nodes = [node(0, state="LEADER", peers=before_refresh), node(1, NEW, committed=990), node(2)]
    step = plan(nodes)
    assert (step.action, step.node) == (RollAction.WAIT, 1)
    assert f"does not name its address {address(1)} yet" in step.message
    refreshed = [node(0, state="LEADER"), node(1, NEW, committed=990), node(2)]
    assert (plan(refreshed).action, plan(refreshed).node) == (RollAction.RESTART, 2)


def test_nothing_is_restarted_while_the_leaders_configuration_names_a_gone_address_or_is_unknown() -> None:
    stale = [node(0, state="LEADER", peers=(*map(address, range(3)), "10.0.0.9:8107")), node(1), node(2)]
    step = plan(stale)
    assert step.action is RollAction.WAIT
    assert "still names 10.0.0.9:8107, which no node has now" in step.message
    unknown = plan([node(0, state="LEADER", peers=None), node(1), node(2)])
    assert unknown.action is RollAction.WAIT
    assert "cannot be read" in unknown.message
