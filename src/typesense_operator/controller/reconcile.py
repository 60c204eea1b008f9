"""One reconcile of one TypesenseCluster: an ordered list of small steps over a scope, then status once.

Steps read, diff and apply; every decision comes from the pure ``resources``
room or from :mod:`.status`. A step that cannot go on returns ``STOP`` and the
reconcile ends with the conditions it set (for example, a missing admin key
Secret stops before anything that would use a wrong key is applied). Status is
written once at the end, and only when it changed, so a reconcile where
nothing changed makes no write call at all.

Quorum health and recovery (probing the nodes, downgrading and upgrading) plug
in as a step before ``observe_nodes`` in a later change; until then the
StatefulSet runs ``spec.replicas`` pods and Ready follows their readiness.
"""

from __future__ import annotations

import base64
import secrets
import string
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from operator_core import errors
from operator_core.conditions import Condition, ConditionStatus, find, set_condition
from operator_core.events import EventRecorder, EventType
from operator_core.kube import Kube
from operator_core.secrets import register_secret
from typesense_operator.api import TYPESENSE_CLUSTER
from typesense_operator.api.reasons import ConditionType, EventReason
from typesense_operator.controller.status import ready_condition, status_patch
from typesense_operator.resources import (
    API_KEY_DATA_KEY,
    PODMONITOR_API_VERSION,
    PRUNABLE_KINDS,
    Cluster,
    build_generated_key_secret,
    build_pod_monitor,
    desired_children,
    invalid_scraper_configs,
    stale_children,
)

__all__ = ["Outcome", "Scope", "reconcile"]

_KEY_ALPHABET = string.ascii_letters + string.digits
_KEY_LENGTH = 48


class Outcome(Enum):
    CONTINUE = "continue"
    STOP = "stop"


@dataclass
class Scope:
    """What one reconcile knows and has decided so far."""

    obj: dict[str, Any]
    cluster: Cluster
    kube: Kube
    recorder: EventRecorder
    conditions: list[Condition]
    replicas: int
    observed: dict[str, Any] = field(default_factory=dict)

    async def set_condition(
        self,
        condition_type: ConditionType,
        status: ConditionStatus,
        reason: str,
        message: str = "",
        *,
        warn: EventReason | None = None,
    ) -> None:
        """Set a condition; post a Warning Event only when it newly turns bad (not on every reconcile)."""
        previous = find(self.conditions, condition_type)
        changed = previous is None or (previous.status, previous.reason) != (status, reason)
        self.conditions = set_condition(
            self.conditions,
            condition_type,
            status,
            reason,
            message,
            observed_generation=self.obj["metadata"].get("generation"),
        )
        if warn is not None and status != "True" and changed:
            await self.event("Warning", warn, message)

    async def event(self, event_type: EventType, reason: EventReason, note: str) -> None:
        await self.recorder.emit(self.obj, event_type, reason, note)


Step = Callable[[Scope], Awaitable[Outcome]]


def _generate_key() -> str:
    return "".join(secrets.choice(_KEY_ALPHABET) for _ in range(_KEY_LENGTH))


def _decoded_key(secret: dict[str, Any] | None) -> str | None:
    encoded = ((secret or {}).get("data") or {}).get(API_KEY_DATA_KEY)
    return base64.b64decode(encoded).decode() if encoded else None


async def check_configuration(scope: Scope) -> Outcome:
    """What CEL cannot check: each scraper config must be a JSON object; bad scrapers are skipped."""
    invalid = invalid_scraper_configs(scope.cluster)
    if invalid:
        message = "; ".join(f"scraper {name}: {problem}" for name, problem in sorted(invalid.items()))
        await scope.set_condition(
            ConditionType.CONFIGURATION_VALID,
            "False",
            "InvalidScraperConfig",
            f"{message}. Those scrapers are not deployed until their config is fixed.",
            warn=EventReason.INVALID_CONFIGURATION,
        )
    else:
        await scope.set_condition(ConditionType.CONFIGURATION_VALID, "True", "Valid")
    return Outcome.CONTINUE


async def ensure_admin_key(scope: Scope) -> Outcome:
    """The key the pods will read must exist before anything uses it; a generated key is never replaced."""
    cluster = scope.cluster
    name = cluster.admin_key_secret_name
    secret = await scope.kube.get("v1", "Secret", name, cluster.namespace)
    if secret is None and cluster.spec.admin_api_key is None:
        generated = _generate_key()
        register_secret(generated)
        manifest = build_generated_key_secret(cluster, generated)
        assert manifest is not None
        secret = await scope.kube.create(manifest)
        await scope.event(
            "Normal", EventReason.ADMIN_KEY_GENERATED, f"generated admin API key in Secret {name}"
        )
    if secret is None:
        await scope.set_condition(
            ConditionType.ADMIN_KEY_READY,
            "False",
            "SecretNotFound",
            f"Secret {name} (spec.adminApiKey) does not exist in namespace {cluster.namespace}; create it "
            f"with the data key {API_KEY_DATA_KEY}, or remove spec.adminApiKey to have a key generated",
            warn=EventReason.ADMIN_KEY_MISSING,
        )
        return Outcome.STOP
    key = _decoded_key(secret)
    if not key:
        await scope.set_condition(
            ConditionType.ADMIN_KEY_READY,
            "False",
            "KeyMissing",
            f"Secret {name} has no data key {API_KEY_DATA_KEY}; add the admin API key under that key",
            warn=EventReason.ADMIN_KEY_MISSING,
        )
        return Outcome.STOP
    register_secret(key)
    await scope.set_condition(
        ConditionType.ADMIN_KEY_READY, "True", "SecretFound", f"the key is in Secret {name}"
    )
    return Outcome.CONTINUE


async def _apply_and_report(scope: Scope, manifest: dict[str, Any]) -> None:
    what = f"{manifest['kind']} {manifest['metadata']['name']}"
    try:
        result = await scope.kube.apply(manifest)
    except errors.KubeError as error:
        await scope.set_condition(
            ConditionType.CHILDREN_APPLIED, "False", "ApplyFailed", str(error), warn=EventReason.APPLY_FAILED
        )
        raise
    if result.written:
        reason = EventReason.CREATED if result.created else EventReason.UPDATED
        await scope.event("Normal", reason, f"{reason.lower()} {what}")


async def apply_children(scope: Scope) -> Outcome:
    for manifest in desired_children(scope.cluster, scope.replicas):
        await _apply_and_report(scope, manifest)
    await scope.set_condition(ConditionType.CHILDREN_APPLIED, "True", "Applied")
    return Outcome.CONTINUE


async def _pod_monitor_served(kube: Kube) -> bool:
    try:
        await kube.resource_type(PODMONITOR_API_VERSION, "PodMonitor")
    except errors.NotFound:
        return False
    return True


async def apply_pod_monitor(scope: Scope) -> Outcome:
    """A PodMonitor only where Prometheus Operator's CRD exists; without it, a Warning, not a failure."""
    monitor = build_pod_monitor(scope.cluster)
    if monitor is None:
        await scope.set_condition(ConditionType.METRICS_READY, "True", "NotRequested")
    elif not await _pod_monitor_served(scope.kube):
        await scope.set_condition(
            ConditionType.METRICS_READY,
            "False",
            "PodMonitorCRDMissing",
            "spec.metrics is set but the PodMonitor CRD (monitoring.coreos.com/v1) is not installed; "
            "the exporter sidecar runs, but nothing tells Prometheus to scrape it",
            warn=EventReason.POD_MONITOR_UNAVAILABLE,
        )
    else:
        await _apply_and_report(scope, monitor)
        await scope.set_condition(ConditionType.METRICS_READY, "True", "PodMonitorApplied")
    return Outcome.CONTINUE


async def prune_children(scope: Scope) -> Outcome:
    """Delete children the spec no longer asks for (a removed scraper, ingress or metrics section)."""
    cluster = scope.cluster
    desired = desired_children(cluster, scope.replicas)
    monitor = build_pod_monitor(cluster)
    if monitor is not None:
        desired.append(monitor)
    live: list[dict[str, Any]] = []
    for api_version, kind in PRUNABLE_KINDS:
        if kind == "PodMonitor" and not await _pod_monitor_served(scope.kube):
            continue
        for item in await scope.kube.list(
            api_version, kind, cluster.namespace, labels=cluster.instance_selector()
        ):
            live.append({**item, "apiVersion": api_version, "kind": kind})
    for stale in stale_children(desired, live):
        name = stale["metadata"]["name"]
        if await scope.kube.delete(stale["apiVersion"], stale["kind"], name, cluster.namespace):
            await scope.event("Normal", EventReason.DELETED, f"deleted {stale['kind']} {name}")
    return Outcome.CONTINUE


async def observe_nodes(scope: Scope) -> Outcome:
    cluster = scope.cluster
    statefulset = await scope.kube.get("apps/v1", "StatefulSet", cluster.statefulset_name, cluster.namespace)
    status = (statefulset or {}).get("status") or {}
    scope.observed = {"replicas": status.get("replicas", 0), "readyReplicas": status.get("readyReplicas", 0)}
    return Outcome.CONTINUE


STEPS: tuple[Step, ...] = (
    check_configuration,
    ensure_admin_key,
    apply_children,
    apply_pod_monitor,
    prune_children,
    observe_nodes,
)


async def reconcile(obj: dict[str, Any], kube: Kube, recorder: EventRecorder) -> bool:
    """Bring one cluster's children to its spec and write its status; True when every step ran."""
    cluster = Cluster.from_object(obj)
    current = obj.get("status") or {}
    scope = Scope(
        obj=obj,
        cluster=cluster,
        kube=kube,
        recorder=recorder,
        conditions=[Condition.model_validate(c) for c in current.get("conditions") or []],
        replicas=cluster.spec.replicas,
    )
    completed = False
    try:
        for step in STEPS:
            if await step(scope) is Outcome.STOP:
                break
        else:
            completed = True
    finally:
        await _write_status(scope, completed)
    return completed


async def _write_status(scope: Scope, completed: bool) -> None:
    previous_ready = find(scope.conditions, ConditionType.READY)
    status, reason, message = ready_condition(scope.conditions, scope.cluster.spec.replicas, scope.observed)
    await scope.set_condition(ConditionType.READY, status, reason, message)
    ready = find(scope.conditions, ConditionType.READY)
    if ready is not None and (previous_ready is None or previous_ready.status != ready.status):
        event_reason = EventReason.QUORUM_READY if ready.status == "True" else EventReason.QUORUM_NOT_READY
        event_type: EventType = "Normal" if ready.status == "True" else "Warning"
        if previous_ready is not None or ready.status == "True":
            await scope.event(event_type, event_reason, ready.message or ready.reason)
    patch = status_patch(
        scope.obj.get("status") or {},
        scope.conditions,
        scope.observed,
        generation=scope.obj["metadata"].get("generation") if completed else None,
    )
    if patch:
        metadata = scope.obj["metadata"]
        await scope.kube.patch_status(
            TYPESENSE_CLUSTER.api_version,
            TYPESENSE_CLUSTER.kind,
            metadata["name"],
            metadata["namespace"],
            patch,
        )
