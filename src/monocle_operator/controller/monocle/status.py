"""Pure status decisions: each component's condition, Ready, and the minimal status patch.

They take only what was observed, so they are table-tested without a cluster.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from monocle_operator.api.reasons import ConditionType
from operator_core.conditions import Condition, ConditionStatus, find, summarize_ready

__all__ = [
    "REQUIRED",
    "deployment_condition",
    "engine_health_condition",
    "ready_condition",
    "statefulset_condition",
    "status_fields",
]

# Ready needs all of these; the first that is not True explains why not.
REQUIRED = (
    ConditionType.CONFIG_VALID,
    ConditionType.CHILDREN_APPLIED,
    ConditionType.ELASTIC_READY,
    ConditionType.ENGINE_HEALTHY,
    ConditionType.API_READY,
    ConditionType.CRAWLER_READY,
)

Verdict = tuple[ConditionStatus, str, str]


def deployment_condition(deployment: Mapping[str, Any] | None, what: str) -> Verdict:
    """Ready when the Deployment's current spec has an available pod (an old pod alone does not count)."""
    if deployment is None:
        return "False", "NotFound", f"the {what} Deployment does not exist yet"
    name = deployment["metadata"]["name"]
    status = deployment.get("status") or {}
    replicas = (deployment.get("spec") or {}).get("replicas", 1)
    if status.get("observedGeneration", 0) < deployment["metadata"].get("generation", 0) or (
        status.get("updatedReplicas", 0) < replicas
    ):
        return "False", "RollingOut", f"Deployment {name} is rolling out its current pod template"
    if status.get("availableReplicas", 0) < 1:
        return "False", "NotAvailable", f"Deployment {name} has no available pod yet"
    return "True", "Available", f"Deployment {name} has an available pod"


def statefulset_condition(statefulset: Mapping[str, Any] | None, engine: str) -> Verdict:
    if statefulset is None:
        return "False", "NotFound", f"the {engine} StatefulSet does not exist yet"
    name = statefulset["metadata"]["name"]
    if (statefulset.get("status") or {}).get("readyReplicas", 0) < 1:
        return "False", "NotReady", f"{engine} pod of StatefulSet {name} is not ready yet"
    return "True", "Ready", f"{engine} pod of StatefulSet {name} is ready"


def engine_health_condition(
    pod: str, address: str | None, health: Mapping[str, Any] | None, unreachable: str | None
) -> Verdict:
    """EngineHealthy from the engine's ``_cluster/health`` (asked with ``level=indices``).

    Green and yellow are healthy: a single node never holds the replica copies an index may ask for,
    so yellow is its normal state and every search and write works. Red is not: a primary shard is
    missing, and the searches and writes of its index fail; the message names the red indices. No
    address yet, or no answer, is Unknown: not observed."""
    if address is None:
        return "Unknown", "NoAddress", f"the engine's pod {pod} has no address yet"
    if unreachable is not None:
        return "Unknown", "Unreachable", f"the engine's health could not be read: {unreachable}"
    assert health is not None
    status = health.get("status")
    unassigned = health.get("unassigned_shards", 0)
    if status == "green":
        return "True", "Green", f"cluster health green ({health.get('active_shards', 0)} active shards)"
    if status == "yellow":
        return (
            "True",
            "Yellow",
            (
                f"cluster health yellow: {unassigned} replica shards unassigned, as on any single node; "
                "searches and writes work"
            ),
        )
    if status == "red":
        indices = health.get("indices") or {}
        red = sorted(name for name, index in indices.items() if (index or {}).get("status") == "red")
        which = f" (red: {', '.join(red)})" if red else ""
        return (
            "False",
            "Red",
            (
                f"cluster health red: a primary shard is unassigned{which}, and the searches and writes of "
                f"its index fail; {unassigned} shards unassigned in all"
            ),
        )
    return "Unknown", "UnexpectedAnswer", f"the engine's health has no known status: {status!r}"


def ready_condition(conditions: Sequence[Condition]) -> Verdict:
    """Ready from :data:`REQUIRED`; a red engine says so first: its pod is then not ready either (its
    probe waits for yellow), and "Red: the red indices" tells more than "the pod is not ready"."""
    health = find(conditions, ConditionType.ENGINE_HEALTHY)
    if health is not None and health.status == "False":
        return "False", health.reason, health.message
    return summarize_ready(
        conditions, REQUIRED, ready_reason="AllComponentsReady", ready_message="Monocle is up"
    )


def status_fields(*, config_hash: str | None, update_idents_job: str | None) -> dict[str, Any]:
    """The status fields a reconcile owns, besides the conditions and ``observedGeneration``: the config
    hash update-idents ran for and its Job, each where known (None: it stays as it is)."""
    desired = {"configHash": config_hash, "updateIdentsJob": update_idents_job}
    return {key: value for key, value in desired.items() if value is not None}
