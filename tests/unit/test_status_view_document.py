"""kubectl typesense status, pure part: the document built from the cluster, its pods and Events, and
its text. (Against a real cluster: tests/e2e/test_typesense_status_view.py.)"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from operator_testkit.tables import T0
from typesense_operator.plugin.view import DOCUMENT_KIND, render, status_document


def cluster(**status: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "search", "namespace": "prod", "uid": "u"},
        "spec": {"replicas": 3, "image": "typesense/typesense:0.24.1"},
        "status": {
            "phase": "QuorumNotReady",
            "conditions": [
                {
                    "type": "Ready",
                    "status": "False",
                    "reason": "QuorumNotReady",
                    "message": "NOT_READY since 00:00:00Z: 20 s grace for raft to elect a leader",
                    "lastTransitionTime": "2026-01-01T00:00:00Z",
                }
            ],
            **status,
        },
    }


def pod(index: int, restarts: int = 0, **extra: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": f"search-sts-{index}", **extra},
        "spec": {"nodeName": "worker-a"},
        "status": {
            "phase": "Running",
            "podIP": f"10.0.0.{index}",
            "containerStatuses": [{"name": "typesense", "restartCount": restarts}],
        },
    }


NODES = [
    {"index": 0, "pod": "search-sts-0", "answering": True, "state": "LEADER", "committedIndex": 50, "lag": 0},
    {"index": 1, "pod": "search-sts-1", "answering": False},
    {
        "index": 2,
        "pod": "search-sts-2",
        "answering": True,
        "state": "FOLLOWER",
        "committedIndex": 45,
        "lag": 5,
    },
]
QUORUM = {
    "state": "NOT_READY",
    "unhealthySince": "2026-01-01T00:00:00Z",
    "graceEndsAt": "2026-01-01T00:00:20Z",
    "thenAction": "downgrade to the reachable node with the most up-to-date raft log",
    "lastAction": "Upgrade",
    "lastActionAt": "2025-12-31T23:00:00Z",
    "lastActionMessage": "growing the nodes list to 3",
}
EVENTS = [
    {
        "metadata": {},
        "type": "Normal",
        "reason": "QuorumReady",
        "message": "old",
        "lastTimestamp": "2026-01-01T00:00:01Z",
    },
    {
        "metadata": {},
        "type": "Warning",
        "reason": "QuorumNotReady",
        "message": "new",
        "lastTimestamp": "2026-01-01T00:00:02Z",
        "count": 3,
    },
]


def test_the_document_joins_the_operators_view_with_the_pods_and_orders_events_newest_first() -> None:
    now = T0 + timedelta(seconds=8)
    document = status_document(
        cluster(nodes=NODES, nodesObservedAt="2026-01-01T00:00:05Z", quorum=QUORUM),
        [pod(0), pod(1, restarts=2, deletionTimestamp="2026-01-01T00:00:03Z"), pod(2)],
        EVENTS,
        [],
        now,
    )
    assert (document["kind"], document["version"]) == (DOCUMENT_KIND, 1)
    assert document["quorum"]["graceEndsInSeconds"] == 12.0
    assert document["nodesObservedSecondsAgo"] == 3.0
    second = document["nodes"][1]
    assert second == {
        "index": 1,
        "pod": "search-sts-1",
        "answering": False,
        "k8sNode": "worker-a",
        "ip": "10.0.0.1",
        "phase": "Terminating",
        "restarts": 2,
    }
    assert [e["reason"] for e in document["events"]] == ["QuorumNotReady", "QuorumReady"]
    json.dumps(document)  # JSON-ready


def test_text_says_who_does_not_answer_when_the_grace_ends_and_what_is_not_shown() -> None:
    document = status_document(
        cluster(nodes=NODES, nodesObservedAt="2026-01-01T00:00:05Z", quorum=QUORUM),
        None,
        EVENTS,
        ["each node's pod, Kubernetes node, IP, phase and restarts need 'list pods' in prod: forbidden"],
        T0 + timedelta(seconds=8),
    )
    text = render(document)
    assert "\x1b[" not in text, "no colour unless asked (a terminal)"
    assert "not answering" in text
    assert "grace ends 2026-01-01T00:00:20Z (in 12 s); then: downgrade" in text
    assert "Last step   Upgrade at 2025-12-31T23:00:00Z: growing the nodes list to 3" in text
    assert "not shown: each node's pod" in text
    assert text.index("QuorumNotReady (x3): new") < text.index("QuorumReady: old")
    assert "\x1b[31m" in render(document, colour=True)


def test_a_roll_names_the_next_node_and_a_node_without_a_view_is_listed_from_its_pod() -> None:
    roll = {"updateRevision": "search-sts-2", "done": [2], "toDo": [0, 1], "next": 1}
    document = status_document(cluster(roll=roll), [pod(0)], [], [], T0)
    assert document["roll"]["inProgress"] is True
    assert document["nodes"] == [
        {
            "index": 0,
            "pod": "search-sts-0",
            "k8sNode": "worker-a",
            "ip": "10.0.0.0",
            "phase": "Running",
            "restarts": 0,
        }
    ]
    text = render(document)
    assert "Roll        to search-sts-2: done [2], to do [0, 1]; next: node 1" in text
    assert "unknown" in text


def test_a_cluster_over_tls_shows_the_certificate_its_nodes_serve_and_why_a_new_one_is_refused() -> None:
    served = cluster(
        tls={"secret": "search-tls", "serial": "0a1b", "notAfter": "2027-01-01T00:00:00Z", "dnsNames": ["x"]}
    )
    served["spec"]["tls"] = {"certificateSecret": {"name": "search-tls"}}
    served["status"]["conditions"].append(
        {
            "type": "CertificateReady",
            "status": "False",
            "reason": "KeyMismatch",
            "message": "Secret search-tls: tls.key is not the key; the nodes keep serving the certificate",
        }
    )
    document = status_document(served, None, [], [], T0)
    assert document["tls"]["serial"] == "0a1b"
    assert document["tls"]["reason"] == "KeyMismatch"
    assert (
        "TLS         certificate 0a1b until 2027-01-01T00:00:00Z; KeyMismatch: Secret search-tls"
        in render(document)
    )
    assert status_document(cluster(), None, [], [], T0)["tls"] is None, "no spec.tls: nothing said of it"


def test_a_view_written_before_its_node_was_lost_is_marked_stale_and_the_node_named() -> None:
    """The operator's node was lost with a member's: nothing rewrote the status. The view reads the
    Nodes itself, says which is unreachable since when, and marks the raft view it cannot vouch for."""
    from typesense_operator.quorum.hosts import Host, HostState

    written = T0 - timedelta(minutes=5)
    nodes = [{**view, "k8sNode": "worker-a", "k8sNodeState": "Ready"} for view in NODES]
    document = status_document(
        cluster(nodes=nodes, nodesObservedAt=written.strftime("%Y-%m-%dT%H:%M:%SZ")),
        [pod(0), pod(1), pod(2)],
        [],
        [],
        T0,
        {"worker-a": Host("worker-a", HostState.UNREACHABLE, T0 - timedelta(minutes=2))},
    )
    leader = document["nodes"][0]
    assert leader["k8sNodeState"] == "Unreachable"
    assert leader["viewStale"] is True
    assert document["nodes"][1]["viewStale"] is False, "a member already seen silent is not vouched for"
    text = render(document)
    assert "worker-a (Unreachable)" in text
    assert "LEADER? (stale)" in text
    assert "its Kubernetes node worker-a is Unreachable since" in text
    assert "the operator has not seen it since" in text
    fresh = status_document(
        cluster(nodes=nodes), [pod(0)], [], [], T0, {"worker-a": Host("worker-a", HostState.READY)}
    )
    assert "viewStale" not in fresh["nodes"][0]
