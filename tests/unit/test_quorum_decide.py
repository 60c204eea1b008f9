"""The quorum decision, row by row of the specification's tables, plus the safety rules that go beyond it."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from typesense_operator.quorum.decide import (
    cluster_state,
    committed_so_far,
    decide,
    errored_members,
    hung_members,
    majority,
    majority_held_back,
    provable_deadlock,
    requeue_seconds,
)
from typesense_operator.quorum.model import Action, ClusterState, NodeProbe, QuorumRecord, QuorumSettings

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
GRACE = QuorumSettings(grace_seconds=60)


def node(
    index: int,
    state: str | None = "FOLLOWER",
    ok: bool | None = True,
    committed: int | None = 10,
    **kw: object,
) -> NodeProbe:
    reachable = bool(kw.pop("reachable", state is not None))
    return NodeProbe(
        index=index, reachable=reachable, state=state, committed_index=committed, health_ok=ok, **kw
    )  # type: ignore[arg-type]


def down(index: int) -> NodeProbe:
    return NodeProbe(index=index, reachable=False)


def healthy_cluster(size: int = 3) -> list[NodeProbe]:
    return [node(0, "LEADER"), *(node(i) for i in range(1, size))]


# ---- the specification's cluster states (/status)


@pytest.mark.parametrize(
    ("states", "expected"),
    [
        (["LEADER", "FOLLOWER", "FOLLOWER"], ClusterState.OK),
        (["LEADER", "LEADER", "FOLLOWER"], ClusterState.SPLIT_BRAIN),
        (["NOT_READY", "NOT_READY", "FOLLOWER"], ClusterState.NOT_READY),
        ([None, None, "FOLLOWER"], ClusterState.NOT_READY),
        (["FOLLOWER", "FOLLOWER", "FOLLOWER"], ClusterState.ELECTION_DEADLOCK),
        (["FOLLOWER", "CANDIDATE", "NOT_READY"], ClusterState.ELECTION_DEADLOCK),
        (["LEADER"], ClusterState.OK),
        (["FOLLOWER"], ClusterState.ELECTION_DEADLOCK),
    ],
)
def test_cluster_state(states: list[str | None], expected: ClusterState) -> None:
    assert cluster_state([node(i, s) for i, s in enumerate(states)]) is expected


def test_majority() -> None:
    assert [majority(n) for n in (1, 3, 5, 7)] == [1, 2, 3, 4]


# ---- /health outcomes with a leader


def test_every_node_healthy_is_ready() -> None:
    plan = decide(healthy_cluster(), 3, QuorumRecord(), NOW, GRACE)
    assert (plan.action, plan.ready, plan.reason) == (Action.NONE, True, "QuorumReady")
    assert plan.members == (0, 1, 2)
    assert plan.record == QuorumRecord()


def test_majority_healthy_with_one_node_down_is_still_ready() -> None:
    plan = decide([node(0, "LEADER"), node(1), down(2)], 3, QuorumRecord(), NOW, GRACE)
    assert (plan.action, plan.ready, plan.reason) == (Action.NONE, True, "QuorumReady")


def test_lagging_nodes_behind_a_leader_are_waited_for_not_operated_on() -> None:
    plan = decide([node(0, "LEADER"), node(1, ok=False), node(2, ok=False)], 3, QuorumRecord(), NOW, GRACE)
    assert (plan.action, plan.ready, plan.reason) == (Action.NONE, False, "QuorumNotReady")
    assert "waiting" in plan.message


@pytest.mark.parametrize("error", ["OUT_OF_MEMORY", "OUT_OF_DISK"])
def test_resource_error_needs_intervention_and_no_surgery(error: str) -> None:
    probes = [node(0, "LEADER"), node(1, ok=False, resource_error=error), node(2)]
    plan = decide(probes, 3, QuorumRecord(), NOW, GRACE)
    assert plan.action is Action.NEEDS_INTERVENTION
    assert plan.reason == "QuorumNeedsIntervention"
    assert plan.members == (0, 1, 2)
    assert plan.warnings
    assert error in plan.warnings[0]


def test_resource_error_wins_over_a_leaderless_state_past_grace() -> None:
    probes = [node(0, ok=False, resource_error="OUT_OF_DISK"), node(1, ok=False), node(2, ok=False)]
    record = QuorumRecord(unhealthy_since=NOW - timedelta(minutes=10))
    assert decide(probes, 3, record, NOW, GRACE).action is Action.NEEDS_INTERVENTION


# ---- leaderless states: grace first, then downgrade to the best survivor


@pytest.mark.parametrize(
    "probes",
    [
        [node(0, ok=False), node(1, ok=False), node(2, ok=False)],  # ELECTION_DEADLOCK
        [node(0, ok=False), down(1), down(2)],  # NOT_READY: two of three gone
        [node(0, "LEADER"), node(1, "LEADER"), node(2)],  # SPLIT_BRAIN
    ],
)
def test_no_single_leader_starts_the_grace_countdown_without_surgery(probes: list[NodeProbe]) -> None:
    plan = decide(probes, 3, QuorumRecord(), NOW, GRACE)
    assert plan.action is Action.NONE
    assert plan.reason == "QuorumNotReady"
    assert plan.record.unhealthy_since == NOW


def test_a_leader_dying_is_left_to_raft_within_the_grace_period() -> None:
    record = QuorumRecord(unhealthy_since=NOW - timedelta(seconds=20))
    plan = decide([down(0), node(1, ok=False), node(2, ok=False)], 3, record, NOW, GRACE)
    assert plan.action is Action.NONE
    assert plan.record.unhealthy_since == record.unhealthy_since


def test_grace_default_is_well_above_the_election_timeout() -> None:
    assert QuorumSettings().grace_seconds >= 3 * 6


def test_after_grace_the_node_with_the_highest_committed_index_survives() -> None:
    record = QuorumRecord(unhealthy_since=NOW - timedelta(seconds=61))
    probes = [node(0, ok=False, committed=7), node(1, ok=False, committed=12), node(2, ok=False, committed=9)]
    plan = decide(probes, 3, record, NOW, GRACE)
    assert plan.action is Action.DOWNGRADE
    assert plan.reason == "QuorumDegraded"
    assert plan.survivor == 1
    assert plan.members == (1,)
    assert plan.record.members == (1,)
    assert plan.record.survivor == 1
    assert "highest committed index 12" in plan.message


def test_survivor_ties_go_to_the_lowest_ordinal_and_unreachable_nodes_never_survive() -> None:
    record = QuorumRecord(unhealthy_since=NOW - timedelta(seconds=61))
    probes = [down(0), node(1, ok=False, committed=5), node(2, ok=False, committed=5)]
    assert decide(probes, 3, record, NOW, GRACE).survivor == 1


def test_after_a_restart_the_survivor_is_the_node_with_the_most_up_to_date_log() -> None:
    """Every node reports committed index 0 until it hears from a leader; the log tells them apart.

    Seen in CI: node 0 had never joined (it was waiting for names) when all three were restarted, so
    its log was empty; keeping it by its ordinal would have thrown away every acknowledged write.
    """
    record = QuorumRecord(unhealthy_since=NOW - timedelta(seconds=61))
    probes = [
        node(0, ok=False, committed=0, last_log=(1, 0)),
        node(1, ok=False, committed=0, last_log=(2, 15)),
        node(2, ok=False, committed=0, last_log=(2, 15)),
    ]
    plan = decide(probes, 3, record, NOW, GRACE)
    assert (plan.action, plan.survivor) == (Action.DOWNGRADE, 1)
    assert "most up-to-date log: term 2, index 15" in plan.message


def test_a_later_term_beats_a_longer_log() -> None:
    record = QuorumRecord(unhealthy_since=NOW - timedelta(seconds=61))
    probes = [node(0, ok=False, last_log=(2, 40)), node(1, ok=False, last_log=(3, 31)), down(2)]
    assert decide(probes, 3, record, NOW, GRACE).survivor == 1


def test_a_downgrade_fences_the_members_that_answer_nothing() -> None:
    """Hung or cut off, two silent members are still a majority of the old configuration."""
    record = QuorumRecord(unhealthy_since=NOW - timedelta(seconds=61))
    plan = decide([down(0), node(1, ok=False, committed=5), down(2)], 3, record, NOW, GRACE)
    assert (plan.action, plan.survivor, plan.fenced) == (Action.DOWNGRADE, 1, (0, 2))
    assert "fencing silent node(s) 0, 2" in plan.message


def test_a_downgrade_of_members_that_all_answer_fences_nobody() -> None:
    """After a full restart every node runs, without a leader: nobody is silent, nobody is deleted."""
    record = QuorumRecord(unhealthy_since=NOW - timedelta(seconds=61))
    probes = [node(0, ok=False, committed=5), node(1, ok=False, committed=5), node(2, ok=False, committed=3)]
    plan = decide(probes, 3, record, NOW, GRACE)
    assert (plan.action, plan.fenced) == (Action.DOWNGRADE, ())
    assert "fencing" not in plan.message


def test_silent_members_that_their_kubelets_see_ready_hold_the_downgrade() -> None:
    """The operator, not the nodes, is cut off: a healthy cluster must not be taken down to one node."""
    record = QuorumRecord(unhealthy_since=NOW - timedelta(seconds=61))
    cut_off = NodeProbe(index=0, reachable=False, kubelet_ready=True)
    probes = [cut_off, node(1, committed=5, kubelet_ready=True), down(2)]
    plan = decide(probes, 3, record, NOW, GRACE)
    assert (plan.action, plan.members, plan.fenced, plan.survivor) == (Action.HOLD, (0, 1, 2), (), None)
    assert plan.reason == "QuorumNotReady"
    assert "node(s) 0 pass their kubelet's readiness probe" in plan.message
    assert plan.record.unhealthy_since == record.unhealthy_since
    assert plan.requeue_after == requeue_seconds(3, unhealthy=True)


def test_the_downgrade_goes_ahead_once_the_kubelets_agree() -> None:
    record = QuorumRecord(unhealthy_since=NOW - timedelta(seconds=61))
    probes = [down(0), node(1, committed=5, kubelet_ready=True), down(2)]
    plan = decide(probes, 3, record, NOW, GRACE)
    assert (plan.action, plan.survivor, plan.fenced) == (Action.DOWNGRADE, 1, (0, 2))


def test_a_kubelet_ready_member_waits_out_the_grace_like_any_other() -> None:
    record = QuorumRecord(unhealthy_since=NOW - timedelta(seconds=10))
    probes = [NodeProbe(index=0, reachable=False, kubelet_ready=True), node(1), node(2)]
    assert decide(probes, 3, record, NOW, GRACE).action is Action.NONE


def test_an_unreachable_survivor_that_its_kubelet_sees_ready_is_not_restarted() -> None:
    record = QuorumRecord(
        members=(1,),
        survivor=1,
        downgraded_at=NOW - timedelta(seconds=61),
        unhealthy_since=NOW - timedelta(seconds=61),
    )
    plan = decide([NodeProbe(index=1, reachable=False, kubelet_ready=True)], 3, record, NOW, GRACE)
    assert (plan.action, plan.reason, plan.survivor) == (Action.HOLD, "QuorumDegraded", 1)
    assert plan.record.survivor_restarted is False


def test_nobody_answering_while_the_kubelets_see_every_pod_ready_says_the_operator_is_cut_off() -> None:
    probes = [NodeProbe(index=i, reachable=False, kubelet_ready=True) for i in range(3)]
    plan = decide(probes, 3, QuorumRecord(), NOW, GRACE)
    assert (plan.action, plan.reason) == (Action.NONE, "QuorumNotReady")
    assert "no node answers; node(s) 0, 1, 2 pass their kubelet's readiness probe" in plan.message


def test_nobody_answering_means_waiting_not_guessing_and_no_clock() -> None:
    record = QuorumRecord(unhealthy_since=NOW - timedelta(seconds=120))
    plan = decide([down(0), down(1), down(2)], 3, record, NOW, GRACE)
    assert plan.action is Action.NONE
    assert "no node answers" in plan.message
    assert plan.record.unhealthy_since is None, "pods that are still starting must not start the countdown"


def test_split_brain_that_lasts_is_downgraded_to_the_most_advanced_leader() -> None:
    record = QuorumRecord(unhealthy_since=NOW - timedelta(seconds=61))
    probes = [node(0, "LEADER", committed=20), node(1, "LEADER", committed=25), node(2, committed=25)]
    plan = decide(probes, 3, record, NOW, GRACE)
    assert (plan.state, plan.action, plan.survivor) == (ClusterState.SPLIT_BRAIN, Action.DOWNGRADE, 1)


def test_loading_members_hold_the_countdown_up_to_a_limit() -> None:
    loading = [node(0, "NOT_READY", ok=False), node(1, "NOT_READY", ok=False), node(2, ok=False)]
    settings = QuorumSettings(grace_seconds=60, loading_limit_seconds=300)
    held = decide(loading, 3, QuorumRecord(loading_since=NOW - timedelta(seconds=120)), NOW, settings)
    assert held.action is Action.NONE
    assert "loading" in held.message
    assert held.record.unhealthy_since is None
    expired = decide(
        loading,
        3,
        QuorumRecord(loading_since=NOW - timedelta(seconds=301), unhealthy_since=NOW - timedelta(seconds=61)),
        NOW,
        settings,
    )
    assert expired.action is Action.DOWNGRADE


def test_the_grace_period_starts_when_loading_ends() -> None:
    """A new cluster spends a while loading; its first election must get the whole grace period."""
    settings = QuorumSettings(grace_seconds=20)
    loading = [node(i, "NOT_READY", ok=False) for i in range(3)]
    first = decide(loading, 3, QuorumRecord(), NOW, settings)
    later = decide(loading, 3, first.record, NOW + timedelta(seconds=30), settings)
    assert later.record.loading_since == NOW
    electing = [node(i, "FOLLOWER", ok=False) for i in range(3)]
    after_loading = decide(electing, 3, later.record, NOW + timedelta(seconds=31), settings)
    assert after_loading.action is Action.NONE
    assert after_loading.record.unhealthy_since == NOW + timedelta(seconds=31)
    assert after_loading.record.loading_since is None


# ---- a deadlock that waiting cannot heal: stale raft configurations

NEW = ("10.0.0.4:8107", "10.0.0.5:8107", "10.0.0.6:8107")
OLD = ("10.0.0.1:8107", "10.0.0.2:8107", "10.0.0.3:8107")


def member(
    index: int, peers: tuple[str, ...] | None, state: str | None = "FOLLOWER", **kw: object
) -> NodeProbe:
    kw.setdefault("address", NEW[index])
    return node(index, state, ok=False, committed=0, raft_peers=peers, **kw)


@pytest.mark.parametrize(
    ("probes", "proven"),
    [
        pytest.param(
            [member(i, OLD) for i in range(3)], True, id="full restart: every peer is an old address"
        ),
        pytest.param(
            [member(i, (NEW[0], OLD[1], OLD[2])) for i in range(3)], True, id="one current peer of three"
        ),
        pytest.param(
            [member(i, (NEW[0], NEW[1], OLD[2])) for i in range(3)], False, id="a stale minority: can elect"
        ),
        pytest.param([member(i, NEW) for i in range(3)], False, id="current configuration: an election"),
        pytest.param(
            [member(0, OLD), member(1, OLD), member(2, NEW)], False, id="one member could still win"
        ),
        pytest.param([member(0, OLD), member(1, OLD), member(2, None)], False, id="a configuration unknown"),
        pytest.param(
            [member(0, OLD), member(1, OLD), member(2, OLD, reachable=False)], False, id="a member silent"
        ),
        pytest.param([member(0, OLD), member(1, OLD), member(2, OLD, state="LEADER")], False, id="a leader"),
        pytest.param(
            [member(0, OLD), member(1, OLD), member(2, OLD, address=None)], False, id="a member without an IP"
        ),
        pytest.param([member(0, OLD)], False, id="one member: Typesense resets its own peers"),
    ],
)
def test_a_deadlock_is_proven_only_when_no_member_can_make_a_majority(
    probes: list[NodeProbe], proven: bool
) -> None:
    assert (provable_deadlock(probes) is not None) is proven


def test_a_proven_deadlock_is_downgraded_at_once_with_the_reason() -> None:
    probes = [
        member(0, OLD, last_log=(3, 40)),
        member(1, OLD, last_log=(3, 42)),
        member(2, OLD, last_log=(3, 41)),
    ]
    plan = decide(probes, 3, QuorumRecord(), NOW, GRACE)
    assert plan.action is Action.DOWNGRADE
    assert plan.survivor == 1
    assert plan.fenced == ()
    assert "no member can ever be elected" in plan.message
    assert "node 0: 0 of 3" in plan.message


def test_loading_members_still_wait_even_with_stale_configurations() -> None:
    probes = [member(0, OLD, state="NOT_READY"), member(1, OLD), member(2, OLD)]
    plan = decide(probes, 3, QuorumRecord(), NOW, GRACE)
    assert plan.action is Action.NONE
    assert "loading" in plan.message


def test_a_current_configuration_without_a_leader_waits_out_the_grace_period() -> None:
    plan = decide([member(i, NEW, state="CANDIDATE") for i in range(3)], 3, QuorumRecord(), NOW, GRACE)
    assert plan.action is Action.NONE
    assert "grace" in plan.message


# ---- growing back after a downgrade


def downgraded(survivor: int = 1) -> QuorumRecord:
    return QuorumRecord(members=(survivor,), survivor=survivor, downgraded_at=NOW - timedelta(seconds=30))


def test_healthy_single_survivor_grows_back_at_once() -> None:
    plan = decide([node(0, ok=False), node(1, "LEADER"), node(2, ok=False)], 3, downgraded(), NOW, GRACE)
    assert (plan.action, plan.reason, plan.ready) == (Action.UPGRADE, "QuorumUpgraded", False)
    assert plan.members == (0, 1, 2)
    assert plan.record == QuorumRecord()


def test_only_nodes_that_answer_join() -> None:
    plan = decide([down(0), node(1, "LEADER"), node(2, ok=False)], 3, downgraded(), NOW, GRACE)
    assert plan.members == (1, 2)
    waiting = decide([down(0), node(1, "LEADER"), down(2)], 3, downgraded(), NOW, GRACE)
    assert waiting.action is Action.NONE
    assert waiting.reason == "QuorumUpgraded"
    assert waiting.members == (1,)


def test_incremental_recovery_adds_one_node_per_step() -> None:
    settings = QuorumSettings(grace_seconds=60, incremental=True)
    first = decide([node(1, "LEADER"), node(0, ok=False), node(2, ok=False)], 3, downgraded(), NOW, settings)
    assert first.members == (0, 1)
    assert first.record.members == (0, 1)
    second = decide([node(0), node(1, "LEADER"), node(2, ok=False)], 3, first.record, NOW, settings)
    assert second.members == (0, 1, 2)
    assert second.record.members == ()
    assert second.record.survivor is None


def test_growing_waits_until_every_current_member_is_healthy() -> None:
    settings = QuorumSettings(grace_seconds=60, incremental=True)
    record = QuorumRecord(members=(0, 1), survivor=1)
    plan = decide([node(0, ok=False), node(1, "LEADER"), down(2)], 3, record, NOW, settings)
    assert plan.action is Action.NONE
    assert plan.reason == "QuorumUpgraded"
    assert plan.members == (0, 1)


def test_scaling_up_the_spec_is_a_grow_of_the_members() -> None:
    record = QuorumRecord(members=(0, 1, 2))
    plan = decide([*healthy_cluster(3), node(3, ok=False), node(4, ok=False)], 5, record, NOW, GRACE)
    assert plan.action is Action.UPGRADE
    assert plan.members == (0, 1, 2, 3, 4)


def test_scaling_down_drops_members_beyond_the_desired_size() -> None:
    plan = decide(healthy_cluster(5), 3, QuorumRecord(), NOW, GRACE)
    assert plan.members == (0, 1, 2)
    assert plan.ready


# ---- the last resort, at most once


def test_single_member_without_leader_restarts_its_pod_once_after_a_second_grace() -> None:
    record = QuorumRecord(
        members=(1,),
        survivor=1,
        downgraded_at=NOW - timedelta(seconds=61),
        unhealthy_since=NOW - timedelta(seconds=61),
    )
    plan = decide([node(1, ok=False)], 3, record, NOW, GRACE)
    assert plan.action is Action.RESTART_SURVIVOR
    assert plan.record.survivor_restarted
    again = decide([node(1, ok=False)], 3, plan.record, NOW + timedelta(seconds=120), GRACE)
    assert again.action is Action.NONE, "a destructive step is never repeated"


def test_a_restarted_operator_resumes_from_the_record() -> None:
    """The record is all that survives a restart; the same observations give the same step."""
    record = QuorumRecord(unhealthy_since=NOW - timedelta(seconds=61))
    probes = [node(0, ok=False, committed=3), node(1, ok=False, committed=8), down(2)]
    first = decide(probes, 3, record, NOW, GRACE)
    # The operator died after writing the nodes list and the record, before anything else.
    resumed = decide([node(1, ok=False, committed=8)], 3, first.record, NOW + timedelta(seconds=5), GRACE)
    assert resumed.action is Action.NONE
    assert resumed.members == (1,)
    assert resumed.reason == "QuorumDegraded"


# ---- requeue


def test_requeue_grows_with_cluster_size_and_shrinks_under_trouble() -> None:
    assert (
        requeue_seconds(1, unhealthy=False)
        < requeue_seconds(3, unhealthy=False)
        < requeue_seconds(7, unhealthy=False)
    )
    assert requeue_seconds(3, unhealthy=True) < requeue_seconds(3, unhealthy=False)
    assert decide(healthy_cluster(), 3, QuorumRecord(), NOW, GRACE).requeue_after == requeue_seconds(
        3, unhealthy=False
    )


def test_the_next_look_comes_when_the_grace_period_ends() -> None:
    """No waiting out a whole requeue interval past the grace period: recovery starts on time."""
    settings = QuorumSettings(grace_seconds=20)
    leaderless = [node(0, ok=False), node(1, ok=False), down(2)]
    almost = decide(leaderless, 3, QuorumRecord(unhealthy_since=NOW - timedelta(seconds=19.4)), NOW, settings)
    assert almost.action is Action.NONE
    assert almost.requeue_after == pytest.approx(0.6)
    started = decide(leaderless, 3, QuorumRecord(), NOW, settings)
    assert started.requeue_after == requeue_seconds(3, unhealthy=True), "never later than usual"
    patience = settings.survivor_elects_within_seconds
    downgraded = QuorumRecord(members=(0,), survivor=0, downgraded_at=NOW - timedelta(seconds=patience - 0.2))
    single = decide([node(0, ok=False)], 3, downgraded, NOW, settings)
    assert single.requeue_after == 0.5, "never a busy loop"


def test_a_single_survivor_gets_two_nodes_file_reads_and_an_election_before_its_restart() -> None:
    """Seen: 19 s from the downgrade to the survivor's election (one read came while it still followed
    its dead leader); the last-resort restart waits longer than the grace for that."""
    settings = QuorumSettings(grace_seconds=20)
    downgraded = QuorumRecord(members=(0,), survivor=0, downgraded_at=NOW - timedelta(seconds=25))
    waiting = decide([node(0, ok=False)], 3, downgraded, NOW, settings)
    assert waiting.action is Action.NONE
    assert waiting.wait_ends_at == NOW + timedelta(seconds=5)
    later = replace(downgraded, downgraded_at=NOW - timedelta(seconds=31))
    assert decide([node(0, ok=False)], 3, later, NOW, settings).action is Action.RESTART_SURVIVOR
    patient = QuorumSettings(grace_seconds=60)
    assert decide([node(0, ok=False)], 3, later, NOW, patient).action is Action.NONE, (
        "never less than the grace"
    )


def test_a_recovery_in_progress_is_probed_every_second() -> None:
    """Each step of a recovery waits on Typesense; the operator's interval must not add to it."""
    growing = decide([node(0, ok=False), node(1, "LEADER"), node(2, ok=False)], 3, downgraded(1), NOW, GRACE)
    assert growing.action is Action.UPGRADE
    assert growing.requeue_after == 1.0
    waiting = decide([node(0, ok=False), node(1, "LEADER"), node(2, ok=False)], 3, growing.record, NOW, GRACE)
    assert waiting.action is Action.NONE
    assert waiting.requeue_after == 1.0
    healthy = decide(healthy_cluster(), 3, waiting.record, NOW, GRACE)
    assert healthy.requeue_after == requeue_seconds(3, unhealthy=False)


# ---- growing back early: the survivor's reset is seen before its election


def addr(index: int) -> str:
    return f"127.0.1.{index + 10}:8107"


def survivor_probe(
    index: int = 1, *, peers: tuple[str, ...] | None = None, state: str = "FOLLOWER"
) -> NodeProbe:
    """The survivor as /raft_stat shows it: by default reset to itself alone, not elected yet."""
    return node(
        index,
        state,
        ok=False,
        address=addr(index),
        raft_peers=(addr(index),) if peers is None else peers,
        last_log=(4, 90),
    )


def old_member(index: int, **kw: object) -> NodeProbe:
    """A member the downgrade did not keep, back on a new pod: its log (and configuration) is the old one."""
    return node(index, ok=False, committed=0, address=addr(index), last_log=(4, 88), **kw)


def test_a_survivor_that_reset_its_peers_gets_the_longer_list_before_it_leads() -> None:
    """Its next read of the nodes file comes 10 s after the reset; it leads 5 to 6 s after it."""
    probes = [old_member(0), survivor_probe(1), old_member(2)]
    plan = decide(probes, 3, downgraded(1), NOW, GRACE)
    assert (plan.action, plan.reason, plan.members) == (Action.UPGRADE, "QuorumUpgraded", (0, 1, 2))
    assert not plan.ready
    assert addr(1) in plan.message, "the evidence is in the Event"
    assert (plan.record.survivor, plan.record.downgraded_at) == (1, downgraded(1).downgraded_at), (
        "still the survivor's wait: it has not led yet"
    )
    assert plan.requeue_after == 1.0


def test_no_early_growth_before_the_survivor_resets_its_peers() -> None:
    still_old = survivor_probe(1, peers=(addr(0), addr(1), addr(2)))
    plan = decide([old_member(0), still_old, old_member(2)], 3, downgraded(1), NOW, GRACE)
    assert (plan.action, plan.members) == (Action.NONE, (1,))
    assert "has no leader since the downgrade" in plan.message


def test_nodes_with_an_empty_log_never_join_early() -> None:
    """A node with no log takes its configuration from the nodes file when it starts: a list naming
    three, read by two empty nodes, would let them elect each other (a restore starts so)."""
    empty = [node(0, ok=False, committed=0, last_log=(0, 0)), survivor_probe(1), down(2)]
    plan = decide(empty, 3, downgraded(1), NOW, GRACE)
    assert (plan.action, plan.members) == (Action.NONE, (1,))
    one = decide([empty[0], survivor_probe(1), old_member(2)], 3, downgraded(1), NOW, GRACE)
    assert (one.action, one.members) == (Action.UPGRADE, (1, 2))


def test_early_growth_is_incremental_when_the_spec_says_so() -> None:
    settings = QuorumSettings(grace_seconds=60, incremental=True)
    plan = decide([old_member(0), survivor_probe(1), old_member(2)], 3, downgraded(1), NOW, settings)
    assert plan.members == (0, 1)


def test_after_early_growth_the_survivor_still_has_its_own_wait_not_a_second_downgrade() -> None:
    grown = decide([old_member(0), survivor_probe(1), old_member(2)], 3, downgraded(1), NOW, GRACE).record
    later = NOW + timedelta(seconds=3)
    plan = decide([old_member(0), survivor_probe(1), old_member(2)], 3, grown, later, GRACE)
    assert (plan.action, plan.members, plan.fenced) == (Action.NONE, (0, 1, 2), ())
    assert "kept alone by the downgrade" in plan.message
    silent = decide([old_member(0), down(1), old_member(2)], 3, grown, later, GRACE)
    assert (silent.action, silent.fenced) == (Action.NONE, ()), "no surgery while the survivor is unseen"


def test_the_survivor_leading_ends_its_wait() -> None:
    grown = decide([old_member(0), survivor_probe(1), old_member(2)], 3, downgraded(1), NOW, GRACE).record
    leading = [old_member(0), survivor_probe(1, state="LEADER"), old_member(2)]
    plan = decide(leading, 3, grown, NOW + timedelta(seconds=6), GRACE)
    assert (plan.action, plan.ready, plan.members) == (Action.NONE, False, (0, 1, 2))
    assert plan.record == replace(QuorumRecord(), committed=plan.record.committed)


def test_a_survivor_that_never_leads_after_early_growth_is_restarted_alone() -> None:
    """Its new pod has a new address and must read a list that names it alone to reset again."""
    grown = decide([old_member(0), survivor_probe(1), old_member(2)], 3, downgraded(1), NOW, GRACE).record
    settings = QuorumSettings(grace_seconds=20)
    late = NOW + timedelta(seconds=settings.survivor_elects_within_seconds)
    plan = decide([old_member(0), survivor_probe(1), old_member(2)], 3, grown, late, settings)
    assert (plan.action, plan.members, plan.survivor) == (Action.RESTART_SURVIVOR, (1,), 1)
    assert plan.record.survivor_restarted


def held(index: int, reason: str | None = "CrashLoopBackOff") -> NodeProbe:
    """A member that answers nothing, whose kubelet says why its container does not run (None: it runs)."""
    return NodeProbe(index=index, reachable=False, held_back=reason)


@pytest.mark.parametrize(
    ("probes", "proven"),
    [
        pytest.param([held(0), held(1), node(2, last_log=(2, 7))], True, id="two of three held back"),
        pytest.param(
            [held(0, "CreateContainerConfigError"), held(1), node(2)], True, id="one lacks a setting"
        ),
        pytest.param([held(0), held(1, None), node(2)], False, id="one silent member runs: it may be frozen"),
        pytest.param(
            [held(0), node(1, "CANDIDATE"), node(2)], False, id="the two that answer are a majority"
        ),
        pytest.param([held(0), held(1), node(2, "LEADER")], False, id="a leader"),
        pytest.param([node(0), node(1), node(2)], False, id="nobody silent"),
        pytest.param([held(0), held(1), held(2), node(3), node(4)], True, id="three of five held back"),
        pytest.param([held(0), held(1), node(2), node(3), node(4)], False, id="two of five: three can elect"),
        pytest.param([held(0)], False, id="one member: nothing to wait for but itself"),
    ],
)
def test_a_majority_held_back_by_its_kubelets_is_proven_leaderless(
    probes: list[NodeProbe], proven: bool
) -> None:
    assert (majority_held_back(probes) is not None) is proven


def test_a_majority_held_back_is_restarted_once_then_downgraded_and_frozen_ones_keep_their_grace() -> None:
    probes = [held(0), held(1), node(2, last_log=(2, 7))]
    # First their pods: they hold what node 2 may lack (a write acknowledged by the leader and one of
    # them), and a new pod runs at once on the same volume.
    restart = decide(probes, 3, QuorumRecord(), NOW, GRACE)
    assert (restart.action, restart.restarted) == (Action.RESTART_HELD_BACK, (0, 1))
    assert restart.members == (0, 1, 2)
    assert restart.record.held_back_restarted
    assert "restarting node(s) 0, 1 once" in restart.message
    # Held back again: nothing a restart mends; the downgrade as before, at once.
    plan = decide(probes, 3, restart.record, NOW + timedelta(seconds=5), GRACE)
    assert plan.action is Action.DOWNGRADE
    assert plan.survivor == 2
    assert plan.fenced == (0, 1)
    assert "node 0: CrashLoopBackOff; node 1: CrashLoopBackOff" in plan.message
    # A leader ends the stretch: the next one restarts them again.
    led = decide([node(0, "LEADER"), node(1), node(2)], 3, restart.record, NOW, GRACE)
    assert not led.record.held_back_restarted
    frozen = [held(0), down(1), node(2, last_log=(2, 7))]
    assert decide(frozen, 3, QuorumRecord(), NOW, GRACE).action is Action.NONE, (
        "a frozen member keeps its grace"
    )


def test_only_a_crash_loop_is_restarted_a_missing_image_is_downgraded_at_once() -> None:
    missing = [held(0, "ImagePullBackOff"), held(1, "ErrImagePull"), node(2, last_log=(2, 7))]
    assert decide(missing, 3, QuorumRecord(), NOW, GRACE).action is Action.DOWNGRADE
    mixed = [held(0), held(1, "ImagePullBackOff"), node(2, last_log=(2, 7))]
    plan = decide(mixed, 3, QuorumRecord(), NOW, GRACE)
    assert (plan.action, plan.restarted) == (Action.RESTART_HELD_BACK, (0,))


def erring(index: int, ran: float | None) -> NodeProbe:
    """A member that answers with raft state ERROR, its container started ``ran`` seconds ago."""
    since = None if ran is None else NOW - timedelta(seconds=ran)
    return node(index, "ERROR", ok=False, running_since=since)


@pytest.mark.parametrize(
    ("probes", "restarted"),
    [
        pytest.param([node(0, "LEADER"), node(1), erring(2, 61)], (2,), id="errored for a minute"),
        pytest.param([node(0, "LEADER"), node(1), erring(2, 10)], (), id="just restarted: not again yet"),
        pytest.param([node(0, "LEADER"), node(1), erring(2, None)], (), id="no start time: nothing proven"),
        pytest.param(
            [node(0, "LEADER"), erring(1, 300), erring(2, 61)], (1, 2), id="two errored: no voters anyway"
        ),
        pytest.param([node(0, "LEADER"), node(1), node(2, ok=False)], (), id="lagging is not errored"),
        pytest.param(
            [node(0, "LEADER"), node(1), replace(erring(2, 10), disk_used_bytes=10, disk_total_bytes=100)],
            (2,),
            id="its disk has room again: at once",
        ),
        pytest.param(
            [node(0, "LEADER"), node(1), replace(erring(2, 10), disk_used_bytes=99, disk_total_bytes=100)],
            (),
            id="its disk still full: once a minute",
        ),
    ],
)
def test_members_whose_raft_stopped_are_restarted(
    probes: list[NodeProbe], restarted: tuple[int, ...]
) -> None:
    assert errored_members(probes, NOW) == restarted
    plan = decide(probes, 3, QuorumRecord(), NOW, GRACE)
    assert plan.restarted == restarted
    assert plan.action is (Action.RESTART_ERRORED if restarted else Action.NONE)
    if restarted:
        assert "raft state ERROR" in plan.message


def test_a_growing_nodes_list_goes_before_an_errored_restart() -> None:
    record = QuorumRecord(members=(0,), survivor=0)
    probes = [node(0, "LEADER"), node(1), erring(2, 61)]
    plan = decide(probes, 3, record, NOW, GRACE)
    assert plan.action is Action.UPGRADE
    assert plan.restarted == ()


def test_the_furthest_commit_of_any_leader_is_remembered() -> None:
    leader = node(2, "LEADER", committed=117, last_log=(10, 118))
    assert committed_so_far([node(0), leader], None) == (10, 117)
    assert committed_so_far([node(0), leader], (11, 3)) == (11, 3), "a later term is further"
    assert committed_so_far([node(0, committed=200, last_log=(10, 200))], (10, 117)) == (10, 117), (
        "a follower's commit index is no leader's"
    )
    plan = decide([node(0), node(1), leader], 3, QuorumRecord(), NOW, GRACE)
    assert plan.record.committed == (10, 117)


def test_no_downgrade_to_a_node_that_lacks_acknowledged_writes() -> None:
    """The soak's lost writes: growing back from a downgrade to node 2, node 2 led alone and acknowledged
    writes up to index 117 of term 10; the others never caught up (their logs end at term 5, index 72)
    when node 2 fell silent. Downgrading to node 1 would have thrown those writes away."""
    # Node 2 led since the downgrade: its wait as a survivor is over (no downgraded_at).
    record = QuorumRecord(survivor=2, unhealthy_since=NOW - timedelta(seconds=61), committed=(10, 117))
    behind = [
        node(0, committed=72, last_log=(5, 72)),
        node(1, committed=72, last_log=(5, 72)),
        NodeProbe(index=2, reachable=False),
    ]
    plan = decide(behind, 3, record, NOW, GRACE)
    assert plan.action is Action.NONE
    assert plan.fenced == ()
    assert "every acknowledged write" in plan.message
    assert "term 10, index 117" in plan.message
    caught_up = [node(0, committed=117, last_log=(10, 117)), *behind[1:]]
    kept = decide(caught_up, 3, record, NOW, GRACE)
    assert kept.action is Action.DOWNGRADE
    assert kept.survivor == 0, "a node whose log reaches the furthest commit may be kept"
    later_term = [node(0, committed=5, last_log=(11, 5)), *behind[1:]]
    assert decide(later_term, 3, record, NOW, GRACE).survivor == 0, (
        "a later term holds every commit before it"
    )


# ---- a downgrade that raft overtook: the old configuration elected another node, the survivor follows


def test_a_survivor_following_a_leader_of_the_old_configuration_grows_the_list_back_whole() -> None:
    """Seen in the chaos soak on real nodes: before node 1 read the one-node list, node 2 won an
    election of the old configuration; 30 s later node 1 was restarted for not leading alone."""
    leader = node(2, "LEADER", address=addr(2), raft_peers=(addr(0), addr(1), addr(2)))
    probes = [node(0, address=addr(0)), node(1, address=addr(1)), leader]
    plan = decide(probes, 3, downgraded(1), NOW + timedelta(seconds=30), GRACE)
    assert (plan.action, plan.reason, plan.members) == (Action.UPGRADE, "QuorumUpgraded", (0, 1, 2))
    assert plan.record == QuorumRecord(committed=plan.record.committed)
    assert "node 2 leads" in plan.message


def test_the_survivor_is_not_restarted_while_it_follows_the_overtaking_leader() -> None:
    record = replace(downgraded(1), downgraded_at=NOW - timedelta(seconds=120))
    probes = [down(0), node(1), node(2, "LEADER")]
    plan = decide(probes, 3, record, NOW, GRACE)
    assert plan.action is Action.UPGRADE


@pytest.mark.parametrize(
    "probes",
    [
        pytest.param([down(0), node(1), down(2)], id="no-leader-anywhere"),
        pytest.param([down(0), node(1, "CANDIDATE"), node(2, "LEADER")], id="survivor-not-following"),
        pytest.param([down(0), down(1), node(2, "LEADER")], id="survivor-silent"),
        pytest.param(
            [down(0), node(1, address=addr(1)), node(2, "LEADER", raft_peers=(addr(0), addr(2)))],
            id="leader-does-not-count-the-survivor",
        ),
    ],
)
def test_a_downgrade_is_overtaken_only_on_evidence(probes: list[NodeProbe]) -> None:
    plan = decide(probes, 3, downgraded(1), NOW, GRACE)
    assert plan.action is not Action.UPGRADE or plan.members != (0, 1, 2)
    assert plan.record.survivor == 1


def test_a_minority_of_voters_does_not_overtake_a_five_node_downgrade() -> None:
    probes = [down(0), node(1), node(2, "LEADER"), down(3), down(4)]
    plan = decide(probes, 5, downgraded(1), NOW, GRACE)
    assert plan.record.survivor == 1
    assert plan.members == (1,)


def silent(
    index: int,
    ran: float | None,
    unready: float | None,
    held: str | None = None,
    *,
    unanswered: float = 300,
) -> NodeProbe:
    """A member that answers nothing, for ``unanswered`` seconds by the operator's clock, its container
    started ``ran`` seconds ago (None: not running), its pod not Ready for ``unready`` seconds (None:
    Ready)."""
    return NodeProbe(
        index=index,
        reachable=False,
        held_back=held,
        running_since=None if ran is None else NOW - timedelta(seconds=ran),
        unready_since=None if unready is None else NOW - timedelta(seconds=unready),
        unreachable_since=NOW - timedelta(seconds=unanswered),
    )


def stuck(
    index: int,
    ran: float,
    silent_for: float | None,
    *,
    health_ok: bool | None = True,
    silent_now: bool = True,
) -> NodeProbe:
    """A member whose /health answers (ok or not) while its /status gave no answer this time
    (``silent_now``) and, by the operator's clock, for ``silent_for`` seconds (None: it answered
    last time)."""
    return NodeProbe(
        index=index,
        reachable=True,
        health_ok=health_ok,
        kubelet_ready=health_ok is True,
        running_since=NOW - timedelta(seconds=ran),
        status_silent=silent_now,
        status_silent_since=None if silent_for is None else NOW - timedelta(seconds=silent_for),
    )


@pytest.mark.parametrize(
    ("probe", "hung"),
    [
        pytest.param(silent(2, 300, 31), True, id="running, silent and not Ready for 31 s"),
        pytest.param(silent(2, 300, 10), False, id="not Ready for 10 s: a freeze may end"),
        pytest.param(
            silent(2, 300, 300, unanswered=10),
            False,
            id="not Ready for long (loading), answering nothing for 10 s: its node may have just gone dark",
        ),
        pytest.param(silent(2, 300, None), False, id="Ready to its kubelet: cut off from the operator only"),
        pytest.param(silent(2, 20, 20), False, id="just started"),
        pytest.param(silent(2, None, 300), False, id="not running"),
        pytest.param(silent(2, 300, 300, "CrashLoopBackOff"), False, id="held back"),
        pytest.param(
            replace(silent(2, 300, 300), node_lost=True),
            False,
            id="its Kubernetes node lost: its kubelet's 'running' is stale (spec.nodeLoss decides)",
        ),
        pytest.param(
            replace(silent(2, 300, 31), node_silent=True),
            False,
            id="its node's kubelet stopped its heartbeat within the node controller's grace",
        ),
        # The thawed leader of the frozen-leader test: Ready, its /health ok, its /status silent.
        pytest.param(stuck(2, 300, 31), True, id="healthy to its kubelet, /status silent for 31 s"),
        pytest.param(stuck(2, 300, 10), False, id="/status silent for 10 s: a freeze may end"),
        pytest.param(stuck(2, 300, None), False, id="first silence: no clock yet"),
        pytest.param(stuck(2, 300, 300, health_ok=False), False, id="/health not ok: loading"),
        pytest.param(stuck(2, 20, 20), False, id="/status silent, just started"),
        pytest.param(stuck(2, 300, 300, silent_now=False), False, id="/status answers again"),
    ],
)
def test_a_member_that_runs_but_answers_nobody_or_not_status_for_30_seconds_is_restarted_beside_a_leader(
    probe: NodeProbe, hung: bool
) -> None:
    probes = [node(0, "LEADER"), node(1), probe]
    assert hung_members(probes, NOW) == ((2,) if hung else ())
    plan = decide(probes, 3, QuorumRecord(), NOW, GRACE)
    assert plan.action is (Action.RESTART_ERRORED if hung else Action.NONE)
    if hung:
        assert plan.restarted == (2,)
        assert (
            "answering nothing and not Ready, or answering /health but not /status, for 30 s" in plan.message
        )
    without_leader = decide([node(0), node(1, None, reachable=False), probe], 3, QuorumRecord(), NOW, GRACE)
    assert without_leader.action is not Action.RESTART_ERRORED, "only beside a leader that goes on"
