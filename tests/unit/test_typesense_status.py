"""Ready and the status patch are pure: prerequisites first, then node readiness; only changes are written."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from operator_core.conditions import set_condition
from operator_core.steps import final_status_patch
from operator_testkit.tables import T0, conditions
from typesense_operator.api.reasons import ReadyReason
from typesense_operator.controller.cluster.status import (
    guards_disruptions,
    node_views,
    nodes_to_publish,
    phase,
    ready_condition,
    status_fields,
)
from typesense_operator.quorum.model import Action, ClusterState, NodeProbe, Plan, QuorumRecord


def a_plan(ready: bool, reason: str = "QuorumReady") -> Plan:
    return Plan(
        state=ClusterState.OK,
        action=Action.NONE,
        members=(0, 1, 2),
        ready=ready,
        reason=ReadyReason(reason),
        message="from the quorum decision",
        requeue_after=30,
        record=QuorumRecord(),
    )


@pytest.mark.parametrize(
    ("states", "plan", "expected"),
    [
        ({"AdminKeyReady": "True", "ChildrenApplied": "True"}, a_plan(True), ("True", "QuorumReady")),
        (
            {"AdminKeyReady": "True", "ChildrenApplied": "True"},
            a_plan(False, "QuorumDegraded"),
            ("False", "QuorumDegraded"),
        ),
        ({"AdminKeyReady": "False"}, None, ("False", "QuorumNotReady")),
        ({"AdminKeyReady": "True", "ChildrenApplied": "False"}, a_plan(True), ("False", "QuorumNotReady")),
        ({"AdminKeyReady": "True", "ChildrenApplied": "True"}, None, ("Unknown", "QuorumNotReady")),
    ],
)
def test_ready_condition(states: dict[str, str], plan: Plan | None, expected: tuple[str, str]) -> None:
    status, reason, message = ready_condition(conditions(**states), plan)
    assert (status, reason) == expected
    assert message


def test_ready_is_unknown_until_a_node_has_answered() -> None:
    ready = conditions(AdminKeyReady="True", ChildrenApplied="True")
    status, reason, message = ready_condition(ready, a_plan(False, "QuorumNotReady"), observed=False)
    assert (status, reason) == ("Unknown", "QuorumNotReady")
    assert message == "no node has answered yet: from the quorum decision"
    assert ready_condition(ready, a_plan(False, "QuorumNotReady"), observed=True)[0] == "False"


def test_ready_message_names_the_failed_prerequisite() -> None:
    _, _, message = ready_condition(conditions(AdminKeyReady="False"), a_plan(True))
    assert message == "AdminKeyReady: AdminKeyReady message"


def test_phase_is_bootstrapping_until_a_node_was_ready() -> None:
    not_ready = set_condition([], "Ready", "False", "QuorumNotReady", now=T0)
    assert phase(not_ready, {"readyReplicas": 0}, None) == "Bootstrapping"
    assert phase(not_ready, {"readyReplicas": 1}, "Bootstrapping") == "QuorumNotReady"
    assert phase(not_ready, {"readyReplicas": 0}, "QuorumReady") == "QuorumNotReady"


@pytest.mark.parametrize(
    ("previous_phase", "ready_nodes", "budget_exists", "wanted"),
    [
        (None, 0, False, False),  # new: nothing serves yet, nothing to guard
        ("Bootstrapping", 0, False, False),
        ("Bootstrapping", 1, False, True),  # the first ready node
        ("QuorumReady", 3, False, True),
        ("QuorumNotReady", 0, False, True),  # an outage after it served: guard what is left
        ("Bootstrapping", 0, True, True),  # once made, it stays (an upgrade keeps every budget)
    ],
)
def test_the_disruption_budget_stands_from_the_first_ready_node_on(
    previous_phase: str | None, ready_nodes: int, budget_exists: bool, wanted: bool
) -> None:
    assert guards_disruptions(previous_phase, ready_nodes, budget_exists) is wanted


def status_patch(current: Any, conditions: Any, observed: Any, *, generation: Any, **fields: Any) -> Any:
    """The patch a reconcile's end writes (operator_core.steps.Steps) of these fields and conditions."""
    owned = status_fields(current, conditions, observed, **fields)
    return final_status_patch(current, owned, [c.to_wire() for c in conditions], generation)


def test_status_patch_holds_only_changes() -> None:
    current_conditions = set_condition([], "Ready", "True", "QuorumReady", now=T0)
    current = {
        "conditions": [c.to_wire() for c in current_conditions],
        "phase": "QuorumReady",
        "replicas": 3,
        "readyReplicas": 3,
        "observedGeneration": 4,
    }
    observed = {"replicas": 3, "readyReplicas": 3}
    assert status_patch(current, current_conditions, observed, generation=4) == {}
    assert status_patch(current, current_conditions, observed, generation=5) == {"observedGeneration": 5}
    assert status_patch(current, current_conditions, observed, generation=None) == {}
    quorum = {"state": "OK"}
    assert status_patch(current, current_conditions, observed, quorum=quorum, generation=4) == {
        "quorum": quorum
    }
    assert (
        status_patch({**current, "quorum": quorum}, current_conditions, observed, quorum=quorum, generation=4)
        == {}
    )


def test_status_patch_deletes_quorum_fields_that_are_no_longer_set() -> None:
    """A merge patch keeps keys it does not mention: a recovered cluster must null the downgrade's fields."""
    conditions = set_condition([], "Ready", "True", "QuorumReady", now=T0)
    current = {
        "conditions": [c.to_wire() for c in conditions],
        "phase": "QuorumReady",
        "quorum": {"state": "OK", "members": [0], "survivor": 0, "lastAction": "Downgrade"},
    }
    recovered = {"state": "OK", "lastAction": "Upgrade"}
    patch = status_patch(current, conditions, {}, quorum=recovered, generation=None)
    assert patch == {"quorum": {"members": None, "survivor": None, "lastAction": "Upgrade"}}


def seen(index: int, state: str | None = "FOLLOWER", committed: int | None = 100, **kw: object) -> NodeProbe:
    return NodeProbe(index=index, reachable=state is not None, state=state, committed_index=committed, **kw)  # type: ignore[arg-type]


def test_node_views_count_lag_against_the_leader_and_name_the_revision() -> None:
    views = node_views(
        [
            ("c-sts-1", seen(1, committed=90, health_ok=False), "old"),
            ("c-sts-0", seen(0, "LEADER", health_ok=True, disk_used_bytes=10, disk_total_bytes=20), "new"),
            ("c-sts-2", seen(2, None, committed=None, held_back="CrashLoopBackOff"), None),
        ],
        "new",
    )
    assert views == [
        {
            "index": 0,
            "pod": "c-sts-0",
            "answering": True,
            "state": "LEADER",
            "healthy": True,
            "committedIndex": 100,
            "lag": 0,
            "currentRevision": True,
            "diskUsedBytes": 10,
            "diskTotalBytes": 20,
        },
        {
            "index": 1,
            "pod": "c-sts-1",
            "answering": True,
            "state": "FOLLOWER",
            "healthy": False,
            "committedIndex": 90,
            "lag": 10,
            "currentRevision": False,
        },
        {"index": 2, "pod": "c-sts-2", "answering": False, "heldBack": "CrashLoopBackOff"},
    ]


VIEW = [{"index": 0, "pod": "p", "answering": True, "state": "LEADER", "committedIndex": 5, "lag": 0}]


def moved(**changes: object) -> list[dict[str, object]]:
    return [{**VIEW[0], **changes}]


@pytest.mark.parametrize(
    ("fresh", "age", "written"),
    [
        pytest.param(VIEW, 600, False, id="nothing changed: never rewritten"),
        pytest.param(moved(diskUsedBytes=7), 600, False, id="only the disk moved: no write of its own"),
        pytest.param(moved(committedIndex=9), 30, False, id="raft counters moved, view fresh: kept"),
        pytest.param(moved(committedIndex=9), 60, True, id="raft counters moved, view a minute old"),
        pytest.param(moved(state="FOLLOWER"), 1, True, id="a state changed: at once"),
        pytest.param(moved(answering=False), 1, True, id="stopped answering: at once"),
        pytest.param(VIEW + VIEW, 1, True, id="a node more: at once"),
    ],
)
def test_the_nodes_view_is_written_when_a_node_changes_and_its_counters_once_a_minute(
    fresh: list[dict[str, object]], age: int, written: bool
) -> None:
    current = {"nodes": VIEW, "nodesObservedAt": "2026-01-01T00:00:00Z"}
    now = T0 + timedelta(seconds=age)  # T0 is 2026-01-01T00:00:00Z
    published = nodes_to_publish(current, fresh, now)
    assert (published is not None) is written
    if published:
        assert published["nodes"] == fresh
    assert nodes_to_publish({}, VIEW, now) is not None, "a first view is written"
