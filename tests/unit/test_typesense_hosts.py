"""The Kubernetes nodes the members run on, as the status says them (issue 66): pure, from the Node
objects as the control plane keeps them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from operator_core.clock import wire_time
from operator_testkit.tables import T0, conditions
from typesense_operator.controller.cluster.status import node_views, ready_condition
from typesense_operator.quorum.hosts import Host, HostState, heartbeat_silent, host_notes, host_of
from typesense_operator.quorum.model import Action, ClusterState, NodeProbe, Plan, QuorumRecord

SINCE = wire_time(T0)


def node(ready: str | None = "True", *taints: str, cordoned: bool = False) -> dict[str, Any]:
    conditions_ = [] if ready is None else [{"type": "Ready", "status": ready, "lastTransitionTime": SINCE}]
    spec: dict[str, Any] = {
        "taints": [{"key": key, "effect": "NoExecute", "timeAdded": SINCE} for key in taints]
    }
    if cordoned:
        spec["unschedulable"] = True
    return {"metadata": {"name": "node-a"}, "spec": spec, "status": {"conditions": conditions_}}


@pytest.mark.parametrize(
    ("obj", "readable", "state", "lost"),
    [
        pytest.param(node("True"), True, HostState.READY, False, id="ready"),
        pytest.param(node("False"), True, HostState.NOT_READY, True, id="its kubelet says not ready"),
        pytest.param(
            node("Unknown", "node.kubernetes.io/unreachable"),
            True,
            HostState.UNREACHABLE,
            True,
            id="power cut",
        ),
        pytest.param(node(None), True, HostState.UNREACHABLE, True, id="never reported"),
        pytest.param(
            node("Unknown", "node.kubernetes.io/out-of-service"),
            True,
            HostState.OUT_OF_SERVICE,
            True,
            id="declared shut down for good",
        ),
        pytest.param(None, True, HostState.GONE, True, id="its Node deleted"),
        pytest.param(None, False, HostState.UNKNOWN, False, id="not permitted to read Nodes: not guessed"),
    ],
)
def test_a_members_host_is_what_the_node_object_says(
    obj: dict[str, Any] | None, readable: bool, state: HostState, lost: bool
) -> None:
    host = host_of("node-a", obj, readable=readable)
    assert host.state is state
    assert host.lost is lost
    assert host_of(None, obj).state is HostState.UNKNOWN, "a pod not bound yet has no host"


def test_a_cordoned_node_is_still_ready() -> None:
    host = host_of("node-a", node("True", cordoned=True))
    assert (host.state, host.cordoned, host.lost) == (HostState.READY, True, False)


def test_the_notes_name_each_lost_node_with_a_time_not_an_age() -> None:
    lost = Host("node-b", HostState.UNREACHABLE, T0)
    notes = host_notes(
        [
            (2, "search-2", True, Host("node-c", HostState.NOT_READY, T0 + timedelta(seconds=5))),
            (0, "search-0", True, Host("node-a", HostState.READY, T0)),
            (1, "search-1", False, lost),
        ]
    )
    assert notes == [
        f"member 1 (pod search-1) does not answer: its node node-b is unreachable (its kubelet stopped "
        f"reporting) since {SINCE}",
        f"member 2 (pod search-2) answers the operator, but its node node-c is NotReady since "
        f"{wire_time(T0 + timedelta(seconds=5))}",
    ]
    assert host_notes([(0, "p", False, Host("node-a", HostState.UNKNOWN))]) == []


def plan(ready: bool) -> Plan:
    return Plan(
        state=ClusterState.OK,
        action=Action.NONE,
        members=(0, 1, 2),
        ready=ready,
        reason="QuorumReady",  # type: ignore[arg-type]
        message="leader elected; 2/3 members healthy",
        requeue_after=30,
        record=QuorumRecord(),
    )


@pytest.mark.parametrize(
    ("notes", "status", "reason"),
    [
        pytest.param(
            {"host_notes": ["member 1 (pod search-1) does not answer: its node node-b is unreachable"]},
            "True",
            "QuorumReady",
            id="a lost node is named after the quorum's word",
        ),
        pytest.param(
            {"not_served": ["restored data not served by every node yet: s-1 does not serve yet"]},
            "False",
            "QuorumNotReady",
            id="after a restore, a node that does not serve it keeps Ready False",
        ),
    ],
)
def test_ready_keeps_the_quorums_word_and_says_what_else_it_waits_for(
    notes: dict[str, list[str]], status: str, reason: str
) -> None:
    ready = conditions(AdminKeyReady="True", ChildrenApplied="True")
    (note,) = next(iter(notes.values()))
    assert ready_condition(ready, plan(True), **notes) == (
        status,
        reason,
        f"leader elected; 2/3 members healthy; {note}",
    )


def test_each_nodes_view_names_its_kubernetes_node_and_its_state() -> None:
    views = node_views(
        [
            ("s-0", NodeProbe(0, True, state="LEADER", committed_index=5), None),
            ("s-1", NodeProbe(1, False), None),
        ],
        None,
        [Host("node-a", HostState.READY), Host("node-b", HostState.UNREACHABLE, T0)],
    )
    assert [(v["k8sNode"], v["k8sNodeState"]) for v in views] == [
        ("node-a", "Ready"),
        ("node-b", "Unreachable"),
    ]
    unbound = node_views([("s-0", NodeProbe(0, False), None)], None, [Host(None, HostState.UNKNOWN)])
    assert "k8sNode" not in unbound[0]
    assert "k8sNodeState" not in unbound[0]


@pytest.mark.parametrize(
    ("lease", "silent"),
    [
        pytest.param({"spec": {"renewTime": "2026-01-01T00:00:00.000000Z"}}, False, id="renewed now"),
        pytest.param({"spec": {"renewTime": "2025-12-31T23:59:50.500000Z"}}, False, id="one renewal missed"),
        pytest.param({"spec": {"renewTime": "2025-12-31T23:59:40.000000Z"}}, True, id="two renewals missed"),
        pytest.param({"spec": {}}, False, id="never renewed: not known"),
        pytest.param(None, False, id="no Lease (or not readable): not known"),
    ],
)
def test_a_node_is_silent_once_its_kubelet_missed_two_renewals_of_its_lease(
    lease: dict[str, Any] | None, silent: bool
) -> None:
    assert heartbeat_silent(lease, datetime(2026, 1, 1, tzinfo=UTC)) is silent
