"""Pure decisions over what was observed: the Ready condition, the phase, the minimal status patch,
and from when a cluster's disruption budget stands.

Each takes only what was observed, so they are table-tested without a cluster.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from operator_core.clock import parse_wire_time, wire_time
from operator_core.conditions import Condition, ConditionStatus, find
from typesense_operator.api.reasons import ConditionType, ReadyReason
from typesense_operator.quorum.hosts import Host
from typesense_operator.quorum.model import NodeProbe, Plan

__all__ = [
    "BOOTSTRAPPING",
    "NODES_REFRESH_SECONDS",
    "NODE_COUNTERS",
    "guards_disruptions",
    "node_views",
    "nodes_to_publish",
    "phase",
    "ready_condition",
    "status_fields",
]

BOOTSTRAPPING = "Bootstrapping"
"""The phase until a node was first ready."""


# Conditions that must hold before readiness of the nodes means anything.
# Restored: only a cluster that starts from a backup has it, and none of its nodes runs before it is True.
_PREREQUISITES = (ConditionType.ADMIN_KEY_READY, ConditionType.RESTORED, ConditionType.CHILDREN_APPLIED)


def ready_condition(
    conditions: Sequence[Condition],
    plan: Plan | None,
    *,
    observed: bool = True,
    host_notes: Sequence[str] = (),
    not_served: Sequence[str] = (),
) -> tuple[ConditionStatus, str, str]:
    """Ready's (status, reason, message): the prerequisites first, then the quorum decision.

    ``observed`` says whether the cluster's state has been seen at all: some node has answered a
    probe, now or since the cluster was created. Until then Ready is Unknown, as Cluster API's
    conventions ask, not False: nothing is known to be wrong. ``host_notes`` name the members whose
    Kubernetes node is lost (:func:`~typesense_operator.quorum.hosts.host_notes`): said after the
    quorum's own words, which stay what the probes saw. ``not_served``: after a restore, the nodes that
    do not serve the restored data yet; Ready stays False until none is left.
    """
    for prerequisite in _PREREQUISITES:
        found = find(conditions, prerequisite)
        if found is not None and found.status != "True":
            return "False", ReadyReason.QUORUM_NOT_READY, f"{prerequisite}: {found.message or found.reason}"
    if plan is None:
        return "Unknown", ReadyReason.QUORUM_NOT_READY, "the nodes have not been probed yet"
    message = "; ".join((plan.message, *host_notes))
    if not observed:
        return "Unknown", plan.reason, f"no node has answered yet: {message}"
    if plan.ready and not_served:
        return "False", ReadyReason.QUORUM_NOT_READY, "; ".join((plan.message, *not_served))
    return ("True" if plan.ready else "False"), plan.reason, message


def guards_disruptions(previous_phase: str | None, ready_nodes: int, budget_exists: bool) -> bool:
    """Whether the PodDisruptionBudget is wanted: from a cluster's first ready node on, for good.

    A budget guards a quorum that serves. Before any node was ready there is none, and nothing
    acknowledged to lose: a drain may move a booting pod, where a budget would only hold the drain up.
    Leaving it out then also spares a new cluster a write (bench/scale.py). Once made it stays, through
    any outage, while the cluster exists (a budget matters most when nodes are missing).
    """
    return budget_exists or ready_nodes > 0 or previous_phase not in (None, BOOTSTRAPPING)


def phase(conditions: Sequence[Condition], observed: Mapping[str, int], previous: str | None) -> str | None:
    """One word for printer columns: Bootstrapping until a node was first ready, then the Ready reason."""
    ready = find(conditions, ConditionType.READY)
    if ready is None:
        return previous
    never_ready = previous in (None, BOOTSTRAPPING)
    if ready.status != "True" and never_ready and not observed.get("readyReplicas"):
        return BOOTSTRAPPING
    return ready.reason


def status_fields(
    current: Mapping[str, Any],
    conditions: Sequence[Condition],
    observed: Mapping[str, int],
    *,
    quorum: Mapping[str, Any] | None = None,
    roll: Mapping[str, Any] | None = None,
    restore: Mapping[str, Any] | None = None,
    nodes: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The status fields a reconcile owns, besides the conditions and ``observedGeneration``: the phase
    (from ``conditions``), the replicas ``observed``, and the quorum's record, the roll, the restore and
    the nodes' views where given (one left out, or empty, stays as ``current`` has it)."""
    desired: dict[str, Any] = {"phase": phase(conditions, observed, current.get("phase"))}
    if observed:
        desired["replicas"] = observed.get("replicas", 0)
        desired["readyReplicas"] = observed.get("readyReplicas", 0)
    if quorum:
        desired["quorum"] = dict(quorum)
    if roll:
        desired["roll"] = dict(roll)
    if restore:
        desired["restore"] = dict(restore)
    if nodes:
        desired.update(nodes)
    # A field given as None stays as it is (as the phase before the first Ready).
    return {key: value for key, value in desired.items() if value is not None}


NODE_COUNTERS = ("committedIndex", "lag", "diskUsedBytes", "diskTotalBytes")
"""Fields of a node's view that move with every write: refreshed at most every
:data:`NODES_REFRESH_SECONDS`, so that a busy cluster costs one status write a minute, not one per look.
The disk's figures ride along and never cause a write themselves: they move with whatever else
shares the filesystem, where an idle cluster's raft counters stand still."""
_RAFT_COUNTERS = ("committedIndex", "lag")
NODES_REFRESH_SECONDS = 60.0


def node_views(
    probes: Sequence[tuple[str, NodeProbe, str | None]],
    update_revision: str | None,
    hosts: Sequence[Host] = (),
) -> list[dict[str, Any]]:
    """``status.nodes``: each node (pod name, probe, its pod's revision) as the operator saw it, with
    the Kubernetes node it runs on and that node's state (``hosts``, in the order of ``probes``),
    ordered by ordinal, unset fields left out. Lag is counted against the leader's committed index."""
    leader = next((p.committed_index for _, p, _ in probes if p.state == "LEADER"), None)
    host_of_pod = dict(zip((pod for pod, _, _ in probes), hosts, strict=False))
    views = []
    for pod, probe, revision in sorted(probes, key=lambda seen: seen[1].index):
        host = host_of_pod.get(pod)
        lag = None
        if leader is not None and probe.committed_index is not None:
            lag = max(leader - probe.committed_index, 0)
        view = {
            "index": probe.index,
            "pod": pod,
            "answering": probe.reachable,
            "state": probe.state,
            "healthy": probe.health_ok,
            "committedIndex": probe.committed_index,
            "lag": lag,
            "currentRevision": revision == update_revision if revision and update_revision else None,
            "heldBack": probe.held_back,
            "diskUsedBytes": probe.disk_used_bytes,
            "diskTotalBytes": probe.disk_total_bytes,
            "certificateSerial": probe.certificate_serial,
            "k8sNode": host.name if host is not None else None,
            "k8sNodeState": host.state.value if host is not None and host.name else None,
        }
        views.append({key: value for key, value in view.items() if value is not None})
    return views


def nodes_to_publish(
    current: Mapping[str, Any], fresh: list[dict[str, Any]], now: datetime
) -> dict[str, Any] | None:
    """``{"nodes", "nodesObservedAt"}`` to write, or None to keep what the status holds.

    Written when a node changed (answering, raft state, health, revision, held back, a node more or
    less), and otherwise when only its counters moved and the view is :data:`NODES_REFRESH_SECONDS`
    old: an idle cluster's view is never rewritten, and a busy one's once a minute.
    """
    previous = current.get("nodes")
    publish = {"nodes": fresh, "nodesObservedAt": wire_time(now)}
    if _fields(previous, exclude=NODE_COUNTERS) != _fields(fresh, exclude=NODE_COUNTERS):
        return publish
    if _fields(previous, only=_RAFT_COUNTERS) == _fields(fresh, only=_RAFT_COUNTERS):
        return None
    observed_at = parse_wire_time(current.get("nodesObservedAt"))
    stale = observed_at is None or (now - observed_at).total_seconds() >= NODES_REFRESH_SECONDS
    return publish if stale else None


def _fields(
    views: Sequence[Mapping[str, Any]] | None,
    *,
    exclude: Sequence[str] = (),
    only: Sequence[str] | None = None,
) -> list[dict[str, Any]]:
    return [
        {key: value for key, value in view.items() if key not in exclude and (only is None or key in only)}
        for view in views or ()
    ]
