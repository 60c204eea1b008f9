"""The chaos soak's pure parts: a schedule decided by its seed, destructive actions judged against the
nodes' states seen before them, lost writes found per node, and write gaps scored per fault kind."""

from __future__ import annotations

import pytest

from operator_testkit.drivers.typesense_chaos import (
    CONTROL_FAULTS,
    KUBE_NODE_FAULTS,
    NODE_FAULTS,
    Sample,
    Step,
    fault_kind,
    gap_target,
    judge_actions,
    lost_writes,
    plan,
    score_by_fault,
)


def test_a_seed_gives_one_schedule_and_another_seed_another() -> None:
    assert plan(7, 50) == plan(7, 50)
    assert plan(7, 50) != plan(8, 50)


def test_each_step_is_a_node_fault_alone_or_with_one_control_fault() -> None:
    schedule = plan(11, 200)
    assert [step.number for step in schedule] == list(range(1, 201))
    for step in schedule:
        assert step.faults[0] in NODE_FAULTS
        assert len(step.faults) in (1, 2)
        assert all(fault in CONTROL_FAULTS for fault in step.faults[1:])
        assert 3.0 <= step.hold_seconds <= 12.0
    pairs = sum(1 for step in schedule if len(step.faults) == 2)
    assert 40 <= pairs <= 120, "about two steps in five are pairs"
    assert {step.faults[0] for step in schedule} == set(NODE_FAULTS), "every node fault comes up"


def test_with_real_nodes_the_mix_has_faults_of_whole_nodes_held_longer_and_paired_alike() -> None:
    schedule = plan(11, 300, kube_nodes=True)
    drawn = {step.faults[0] for step in schedule}
    assert drawn == set(NODE_FAULTS) | set(KUBE_NODE_FAULTS), "every fault comes up"
    for step in schedule:
        held = (10.0, 70.0) if step.faults[0] in KUBE_NODE_FAULTS else (3.0, 12.0)
        assert held[0] <= step.hold_seconds <= held[1]
        assert all(fault in CONTROL_FAULTS for fault in step.faults[1:])
    assert any(len(s.faults) == 2 and s.faults[0] in KUBE_NODE_FAULTS for s in schedule), "paired too"


def test_without_real_nodes_a_seed_keeps_the_schedule_it_always_had() -> None:
    """The CI soak's seed 4 replays as before: no fault of a whole node is drawn, nor any draw added."""
    assert plan(4, 5) == [
        Step(1, ("freeze-leader", "roll"), 6.6),
        Step(2, ("kill-majority", "kill-operator"), 6.6),
        Step(3, ("freeze-follower",), 9.9),
        Step(4, ("freeze-leader",), 6.2),
        Step(5, ("kill-majority",), 5.4),
    ]
    assert not any(f in KUBE_NODE_FAULTS for step in plan(4, 300) for f in step.faults)


def test_a_single_node_cluster_gets_no_majority_faults() -> None:
    assert not any(step.faults[0].endswith("-majority") for step in plan(3, 200, replicas=1))


HEALTHY = {"a": "LEADER", "b": "FOLLOWER", "c": "FOLLOWER"}
ONE_LEFT = {"a": None, "b": None, "c": "FOLLOWER"}
TWO_FOLLOWERS = {"a": "LEADER", "b": "FOLLOWER", "c": None}


@pytest.mark.parametrize(
    ("states", "justified"),
    [
        ([HEALTHY, HEALTHY, HEALTHY], False),  # a healthy majority all along: never justified
        ([TWO_FOLLOWERS, TWO_FOLLOWERS], False),  # leader and one follower are a majority of 3
        ([HEALTHY, ONE_LEFT, ONE_LEFT], True),
        ([ONE_LEFT, HEALTHY], True),  # raft may have elected in between: one bad sample is enough
        ([], True),  # nothing seen in the window: not held against it
        ([{"a": "LEADER", "b": "LEADER", "c": "FOLLOWER"}], True),  # two leaders: split brain
    ],
)
def test_a_destructive_action_is_judged_by_the_states_seen_before_it(
    states: list[dict[str, str | None]], justified: bool
) -> None:
    samples = [Sample(100.0 + n, s) for n, s in enumerate(states)]
    action_at = 100.0 + len(states) - 0.5
    (judged,) = judge_actions([(action_at, "QuorumDowngraded", "NOT_READY for 20 s")], samples, replicas=3)
    assert judged.justified is justified
    assert judged.reason == "QuorumDowngraded"


def test_a_follower_outside_the_leader_configuration_is_no_member() -> None:
    """A downgrade's survivor leads alone: the others say FOLLOWER until it grows the configuration, and
    restarting it then is no action against a healthy majority."""
    alone = Sample(100.0, HEALTHY, outside=frozenset({"b", "c"}))
    (judged,) = judge_actions([(100.5, "QuorumSurvivorRestarted", "")], [alone], replicas=3)
    assert judged.justified
    assert "b=FOLLOWER (outside the leader configuration)" in judged.evidence
    one_out = Sample(100.0, HEALTHY, outside=frozenset({"c"}))
    (judged,) = judge_actions([(100.5, "QuorumMemberFenced", "")], [one_out], replicas=3)
    assert not judged.justified, "the leader and one follower it names are a majority of 3"


def test_samples_outside_the_window_do_not_count() -> None:
    samples = [Sample(10.0, ONE_LEFT), Sample(99.0, HEALTHY), Sample(100.0, HEALTHY)]
    (judged,) = judge_actions([(100.5, "QuorumMemberFenced", "")], samples, replicas=3, window=3.0)
    assert not judged.justified
    assert "a=LEADER" in judged.evidence


def test_lost_writes_are_those_a_node_does_not_hold() -> None:
    held = {"a": {"1", "2", "3"}, "b": {"1", "3"}, "c": set()}
    assert lost_writes(["1", "2", "3"], held) == {"b": ["2"], "c": ["1", "2", "3"]}
    assert lost_writes(["1"], {"a": {"1"}}) == {}


@pytest.mark.parametrize(
    ("faults", "roles", "kind", "target"),
    [
        (("orphan-statefulset",), (None,), "orphan-statefulset", 2.0),
        (("kill-follower",), (None,), "kill-follower", 2.0),
        (("freeze-follower",), (None,), "freeze-follower", 2.0),
        (("delete-pod",), ("follower",), "delete-pod (follower)", 2.0),
        (("disk-full",), ("follower",), "disk-full (follower)", 2.0),
        (("disk-full",), ("leader",), "disk-full (leader)", 20.0),
        (("delete-pod",), ("leader",), "delete-pod (leader)", 20.0),
        (("kill-leader",), (None,), "kill-leader", 20.0),
        (("kill-majority",), (None,), "kill-majority", 20.0),
        (("delete-all-pods",), (None,), "delete-all-pods", 20.0),
        (("disk-full", "kill-operator"), ("leader", None), "disk-full (leader)+kill-operator", None),
        (("power-cut-leader",), ("leader",), "power-cut-leader", 20.0),
        (("power-cut-follower",), ("follower",), "power-cut-follower", 2.0),
        (("isolate-leader",), ("leader",), "isolate-leader", 2.0),  # raft goes on: only the kubelet is cut
        (("isolate-follower",), ("follower",), "isolate-follower", 2.0),
        (("drain-leader",), ("leader",), "drain-leader", 2.0),  # handed over before its pod stops
        (("drain-follower",), ("follower",), "drain-follower", 2.0),
        (("power-cut-leader", "roll"), ("leader", None), "power-cut-leader+roll", None),
    ],
)
def test_each_fault_kind_has_its_write_gap_target(
    faults: tuple[str, ...], roles: tuple[str | None, ...], kind: str, target: float | None
) -> None:
    assert fault_kind(faults, roles) == kind
    assert gap_target(kind) == target


def test_the_score_names_the_steps_that_missed_their_kinds_target() -> None:
    steps = [
        {"step": 1, "kind": "kill-follower", "longest_write_gap_seconds": 0.3, "seconds_to_whole": 2.0},
        {"step": 2, "kind": "kill-follower", "longest_write_gap_seconds": 2.5, "seconds_to_whole": 12.0},
        {"step": 3, "kind": "kill-leader", "longest_write_gap_seconds": 8.0, "seconds_to_whole": None},
        {"step": 4, "kind": "kill-leader+roll", "longest_write_gap_seconds": 40.0, "seconds_to_whole": 50},
    ]
    scored = score_by_fault(steps)
    assert scored["kill-follower"] == {
        "steps": 2,
        "longest_write_gap_seconds": 2.5,
        "longest_seconds_to_whole": 12.0,
        "target_write_gap_seconds": 2.0,
        "missed_by_steps": [2],
    }
    assert scored["kill-leader"]["longest_seconds_to_whole"] is None  # one step never became whole
    assert scored["kill-leader"]["missed_by_steps"] == []
    assert scored["kill-leader+roll"]["target_write_gap_seconds"] is None
    assert scored["kill-leader+roll"]["missed_by_steps"] == []


def test_a_frozen_majority_is_held_to_its_target_from_the_thaw() -> None:
    """No raft writes while two of three are frozen: what the operator and raft add after the thaw is
    scored, and the gap from the freeze is reported beside it."""
    steps = [
        {
            "step": 1,
            "kind": "freeze-majority",
            "longest_write_gap_seconds": 23.1,
            "write_gap_after_heal_seconds": 11.2,
            "seconds_to_whole": 24.2,
        },
        {
            "step": 2,
            "kind": "freeze-majority",
            "longest_write_gap_seconds": 25.0,
            "write_gap_after_heal_seconds": 21.0,
            "seconds_to_whole": 26.0,
        },
        {
            "step": 3,
            "kind": "freeze-leader",
            "longest_write_gap_seconds": 21.0,
            "write_gap_after_heal_seconds": 9.0,
            "seconds_to_whole": 22.0,
        },
    ]
    scored = score_by_fault(steps)
    assert scored["freeze-majority"]["longest_write_gap_seconds"] == 25.0
    assert scored["freeze-majority"]["longest_write_gap_after_heal_seconds"] == 21.0
    assert scored["freeze-majority"]["missed_by_steps"] == [2]
    # A frozen leader leaves a majority that elects at once: its gap counts from the freeze.
    assert scored["freeze-leader"]["missed_by_steps"] == [3]
    assert "longest_write_gap_after_heal_seconds" not in scored["freeze-leader"]


def test_a_run_of_one_fault_kind_draws_that_fault_alone_and_pairs_none() -> None:
    schedule = plan(7, steps=40, only=("delete-all-pods",))
    assert {step.faults for step in schedule} == {("delete-all-pods",)}
    assert plan(7, steps=40) != schedule  # the full mix otherwise
