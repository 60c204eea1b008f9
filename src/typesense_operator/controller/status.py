"""Pure decisions over what was observed: the Ready condition, the phase, the minimal status patch,
and from when a cluster's disruption budget stands.

Each takes only what was observed, so they are table-tested without a cluster.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from operator_core.conditions import Condition, ConditionStatus, find
from operator_core.manifests import merge_patch
from typesense_operator.api.reasons import ConditionType, ReadyReason
from typesense_operator.quorum.decide import Plan

__all__ = ["BOOTSTRAPPING", "guards_disruptions", "phase", "ready_condition", "status_patch"]

BOOTSTRAPPING = "Bootstrapping"
"""The phase until a node was first ready."""


# Conditions that must hold before readiness of the nodes means anything.
# Restored: only a cluster that starts from a backup has it, and none of its nodes runs before it is True.
_PREREQUISITES = (ConditionType.ADMIN_KEY_READY, ConditionType.RESTORED, ConditionType.CHILDREN_APPLIED)


def ready_condition(
    conditions: Sequence[Condition], plan: Plan | None, *, observed: bool = True
) -> tuple[ConditionStatus, str, str]:
    """Ready's (status, reason, message): the prerequisites first, then the quorum decision.

    ``observed`` says whether the cluster's state has been seen at all: some node has answered a
    probe, now or since the cluster was created. Until then Ready is Unknown, as Cluster API's
    conventions ask, not False: nothing is known to be wrong.
    """
    for prerequisite in _PREREQUISITES:
        found = find(conditions, prerequisite)
        if found is not None and found.status != "True":
            return "False", ReadyReason.QUORUM_NOT_READY, f"{prerequisite}: {found.message or found.reason}"
    if plan is None:
        return "Unknown", ReadyReason.QUORUM_NOT_READY, "the nodes have not been probed yet"
    if not observed:
        return "Unknown", plan.reason, f"no node has answered yet: {plan.message}"
    return ("True" if plan.ready else "False"), plan.reason, plan.message


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


def status_patch(
    current: Mapping[str, Any],
    conditions: Sequence[Condition],
    observed: Mapping[str, int],
    *,
    quorum: Mapping[str, Any] | None = None,
    roll: Mapping[str, Any] | None = None,
    restore: Mapping[str, Any] | None = None,
    generation: int | None,
) -> dict[str, Any]:
    """The merge patch from ``current`` status to the new one; empty when nothing changed.

    ``generation`` is the spec generation to record as observed, or None when the
    reconcile did not complete (observedGeneration moves only on success).
    """
    desired: dict[str, Any] = {
        "conditions": [c.to_wire() for c in conditions],
        "phase": phase(conditions, observed, current.get("phase")),
    }
    if observed:
        desired["replicas"] = observed.get("replicas", 0)
        desired["readyReplicas"] = observed.get("readyReplicas", 0)
    if quorum:
        desired["quorum"] = dict(quorum)
    if roll:
        desired["roll"] = dict(roll)
    if restore:
        desired["restore"] = dict(restore)
    if generation is not None:
        desired["observedGeneration"] = generation
    # Fields this function does not own stay as they are; the ones it owns follow exactly.
    owned = {key: value for key, value in desired.items() if value is not None}
    return merge_patch({key: current[key] for key in owned if key in current}, owned)
