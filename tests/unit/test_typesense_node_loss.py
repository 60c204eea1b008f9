"""Whether a member lost with its Kubernetes node is replaced (spec.nodeLoss, issue 66): never while it
answers, never for two at once, never unless the others are a healthy quorum with a leader."""

from __future__ import annotations

from datetime import timedelta

import pytest

from operator_testkit.tables import T0
from typesense_operator.quorum.hosts import Host, HostState
from typesense_operator.quorum.model import NodeProbe
from typesense_operator.quorum.node_loss import NodeLossPolicy, decide_node_loss

DELAY = 300
LATER = T0 + timedelta(seconds=DELAY + 1)
READY = Host("node-a", HostState.READY, T0)
DARK = Host("node-b", HostState.UNREACHABLE, T0)
DARK_TOO = Host("node-c", HostState.UNREACHABLE, T0)


def leader(index: int = 0) -> NodeProbe:
    return NodeProbe(index, True, state="LEADER", health_ok=True)


def follower(index: int) -> NodeProbe:
    return NodeProbe(index, True, state="FOLLOWER", health_ok=True)


def silent(index: int) -> NodeProbe:
    return NodeProbe(index, False)


REPLACE, WAIT = NodeLossPolicy.REPLACE, NodeLossPolicy.WAIT
HEALTHY_TWO = [(leader(0), READY), (follower(2), READY)]


@pytest.mark.parametrize(
    ("policy", "members", "now", "replaced", "held"),
    [
        pytest.param(REPLACE, [*HEALTHY_TWO, (silent(1), DARK)], LATER, 1, None, id="lost past the delay"),
        pytest.param(
            REPLACE, [*HEALTHY_TWO, (silent(1), DARK)], T0, None, None, id="within the delay: waits"
        ),
        pytest.param(WAIT, [*HEALTHY_TWO, (silent(1), DARK)], LATER, None, None, id="policy Wait: never"),
        pytest.param(
            REPLACE,
            [*HEALTHY_TWO, (silent(1), Host("node-b", HostState.OUT_OF_SERVICE, T0))],
            T0,
            1,
            None,
            id="out-of-service: at once",
        ),
        pytest.param(
            REPLACE, [*HEALTHY_TWO, (silent(1), Host("node-b", HostState.GONE))], T0, 1, None, id="Node gone"
        ),
        pytest.param(
            REPLACE,
            [*HEALTHY_TWO, (follower(1), DARK)],
            LATER,
            None,
            "member 1 still answers: it may be writing",
            id="a kubelet cut off, its member answering: never",
        ),
        pytest.param(
            REPLACE,
            [(leader(0), READY), (silent(1), DARK), (silent(2), DARK_TOO)],
            LATER,
            None,
            "member 1 is due for replacement, but member(s) 2 are not healthy: never two at once",
            id="two nodes lost: none",
        ),
        pytest.param(
            REPLACE,
            [(follower(0), READY), (follower(2), READY), (silent(1), DARK)],
            LATER,
            None,
            "member 1 is due for replacement, but the other members have no leader",
            id="no leader among the rest",
        ),
        pytest.param(
            REPLACE,
            [
                (leader(0), READY),
                (NodeProbe(2, True, state="FOLLOWER", health_ok=False), READY),
                (silent(1), DARK),
            ],
            LATER,
            None,
            "member 1 is due for replacement, but member(s) 2 are not healthy: never two at once",
            id="a lagging follower among the rest",
        ),
        pytest.param(
            REPLACE,
            [(leader(0), READY), (silent(1), DARK)],
            LATER,
            None,
            "member 1 is due for replacement, but 1 other member(s) are not a majority of 3",
            id="a scaled-down rest is no majority",
        ),
        pytest.param(REPLACE, [*HEALTHY_TWO, (follower(1), READY)], LATER, None, None, id="nothing lost"),
    ],
)
def test_a_lost_member_is_replaced_only_when_nothing_can_be_lost(
    policy: NodeLossPolicy,
    members: list[tuple[NodeProbe, Host]],
    now: object,
    replaced: int | None,
    held: str | None,
) -> None:
    verdict = decide_node_loss(policy, DELAY, members, 3, None, now)  # type: ignore[arg-type]
    assert (verdict.replace.index if verdict.replace else None) == replaced
    assert verdict.held == held


def test_a_lost_member_within_its_delay_is_looked_at_again_when_it_falls_due() -> None:
    verdict = decide_node_loss(
        REPLACE, DELAY, [*HEALTHY_TWO, (silent(1), DARK)], 3, None, T0 + timedelta(seconds=100)
    )
    assert verdict.replace is None
    assert verdict.next_look_seconds == 200
    assert verdict.notes == ("member 1 is replaced at 2026-01-01T00:05:00Z unless its node comes back",)


def test_one_replacement_at_a_time_until_its_member_is_healthy() -> None:
    lost_again = [(leader(0), READY), (silent(1), READY), (silent(2), DARK_TOO)]
    waiting = decide_node_loss(REPLACE, DELAY, lost_again, 3, 1, LATER)
    assert waiting.replace is None
    assert waiting.held == "member 1 is being replaced: the next waits until it is healthy"
    back = decide_node_loss(REPLACE, DELAY, [*HEALTHY_TWO, (follower(1), READY)], 3, 1, LATER)
    assert back.replaced


def test_policy_wait_says_so_and_deletes_nothing() -> None:
    verdict = decide_node_loss(WAIT, DELAY, [*HEALTHY_TWO, (silent(1), DARK)], 3, None, LATER)
    assert verdict.replace is None
    assert [member.index for member in verdict.lost] == [1]
    assert verdict.notes == ("spec.nodeLoss.policy is Wait: nothing is replaced",)
