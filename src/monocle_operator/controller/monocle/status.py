"""Pure status decisions: each component's condition, Ready, and the minimal status patch.

They take only what was observed, so they are table-tested without a cluster.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from monocle_operator.api.reasons import ConditionType
from operator_core.conditions import Condition, ConditionStatus, summarize_ready

__all__ = ["REQUIRED", "deployment_condition", "ready_condition", "statefulset_condition", "status_fields"]

# Ready needs all of these; the first that is not True explains why not.
REQUIRED = (
    ConditionType.CONFIG_VALID,
    ConditionType.CHILDREN_APPLIED,
    ConditionType.ELASTIC_READY,
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


def statefulset_condition(statefulset: Mapping[str, Any] | None) -> Verdict:
    if statefulset is None:
        return "False", "NotFound", "the Elasticsearch StatefulSet does not exist yet"
    name = statefulset["metadata"]["name"]
    if (statefulset.get("status") or {}).get("readyReplicas", 0) < 1:
        return "False", "NotReady", f"Elasticsearch pod of StatefulSet {name} is not ready yet"
    return "True", "Ready", f"Elasticsearch pod of StatefulSet {name} is ready"


def ready_condition(conditions: Sequence[Condition]) -> Verdict:
    return summarize_ready(
        conditions, REQUIRED, ready_reason="AllComponentsReady", ready_message="Monocle is up"
    )


def status_fields(*, config_hash: str | None, update_idents_job: str | None) -> dict[str, Any]:
    """The status fields a reconcile owns, besides the conditions and ``observedGeneration``: the config
    hash update-idents ran for and its Job, each where known (None: it stays as it is)."""
    desired = {"configHash": config_hash, "updateIdentsJob": update_idents_job}
    return {key: value for key, value in desired.items() if value is not None}
