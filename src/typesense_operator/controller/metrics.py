"""The Typesense operator's own metrics, beside the shared ones of :mod:`operator_core.metrics`.

Per cluster: its quorum state (one series per state, 1 for the current one),
whether it is QuorumReady, its members and how many of them answer healthy.
Per recovery step: how often each kind was taken, and with what outcome. A
deleted cluster's series are removed (:func:`forget_cluster`), so that a
dashboard shows only clusters that exist.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

from prometheus_client import Counter, Gauge

from operator_core.metrics import REGISTRY
from typesense_operator.quorum.model import ClusterState, NodeProbe, Plan

__all__ = ["CERTIFICATE_EXPIRY", "RECOVERIES", "forget_cluster", "observe_certificate", "observe_quorum"]

_CLUSTER = ["namespace", "cluster"]

QUORUM_STATE = Gauge(
    "typesense_cluster_quorum_state",
    "1 for the quorum state a TypesenseCluster is in (OK, SPLIT_BRAIN, NOT_READY, ELECTION_DEADLOCK), "
    "0 for the others.",
    [*_CLUSTER, "state"],
    registry=REGISTRY,
)
QUORUM_READY = Gauge(
    "typesense_cluster_quorum_ready",
    "1 while a TypesenseCluster has a leader that a majority of its members follow, else 0.",
    _CLUSTER,
    registry=REGISTRY,
)
MEMBERS = Gauge(
    "typesense_cluster_members",
    "Members in a TypesenseCluster's raft configuration (its nodes list).",
    _CLUSTER,
    registry=REGISTRY,
)
HEALTHY_MEMBERS = Gauge(
    "typesense_cluster_healthy_members",
    "Nodes of a TypesenseCluster that answered /health ok at the last probe.",
    _CLUSTER,
    registry=REGISTRY,
)
CERTIFICATE_EXPIRY = Gauge(
    "typesense_cluster_certificate_expiry_timestamp_seconds",
    "When the certificate a TypesenseCluster's nodes are given (spec.tls) expires, in Unix seconds; "
    "alert on it minus time() (the chart's PrometheusRule does).",
    _CLUSTER,
    registry=REGISTRY,
)
RECOVERIES = Counter(
    "typesense_quorum_recoveries_total",
    "Quorum recovery steps, by kind (Downgrade, Upgrade, RestartSurvivor, NeedsIntervention, Hold) and "
    "outcome (taken; failed: the step raised; needed: a person must act).",
    ["kind", "outcome"],
    registry=REGISTRY,
)


# Every series exists from the start, at 0: an alert on increase() sees the first recovery too, and a
# dashboard shows that none happened rather than nothing.
for _kind, _outcomes in (
    ("Downgrade", ("taken", "failed")),
    ("Upgrade", ("taken", "failed")),
    ("RestartSurvivor", ("taken", "failed")),
    ("NeedsIntervention", ("needed", "failed")),
    ("Hold", ("needed", "failed")),
):
    for _outcome in _outcomes:
        RECOVERIES.labels(_kind, _outcome)


def observe_quorum(namespace: str, cluster: str, plan: Plan, probes: Sequence[NodeProbe]) -> None:
    for state in ClusterState:
        QUORUM_STATE.labels(namespace, cluster, state.value).set(1 if plan.state is state else 0)
    QUORUM_READY.labels(namespace, cluster).set(1 if plan.ready else 0)
    MEMBERS.labels(namespace, cluster).set(len(plan.members))
    HEALTHY_MEMBERS.labels(namespace, cluster).set(sum(1 for probe in probes if probe.health_ok))


def observe_certificate(namespace: str, cluster: str, not_after: float | None) -> None:
    """The expiry of the certificate the nodes are given; None: no certificate (spec.tls removed)."""
    if not_after is None:
        _remove(CERTIFICATE_EXPIRY, namespace, cluster)
    else:
        CERTIFICATE_EXPIRY.labels(namespace, cluster).set(not_after)


def forget_cluster(namespace: str, cluster: str) -> None:
    """Remove a deleted cluster's series."""
    for state in ClusterState:
        _remove(QUORUM_STATE, namespace, cluster, state.value)
    for gauge in (QUORUM_READY, MEMBERS, HEALTHY_MEMBERS, CERTIFICATE_EXPIRY):
        _remove(gauge, namespace, cluster)


def _remove(gauge: Gauge, *labels: str) -> None:
    # A cluster that never got as far as a probe has no series.
    with contextlib.suppress(KeyError):
        gauge.remove(*labels)
