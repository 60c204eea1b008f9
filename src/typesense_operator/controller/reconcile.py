"""One reconcile of one TypesenseCluster: an ordered list of small steps over a scope, then status once.

Steps read, diff and apply; every decision comes from the pure ``resources``
room or from :mod:`.status`. A step that cannot go on returns ``STOP`` and the
reconcile ends with the conditions it set (for example, a missing admin key
Secret stops before anything that would use a wrong key is applied). Status is
written once at the end, and only when it changed, so a reconcile where
nothing changed makes no write call at all.

Quorum health comes before the children: the nodes are probed, the pure
decision in :mod:`typesense_operator.quorum.decide` says who the raft members
are, and the nodes list is written with exactly those. Recovery is therefore
a rewrite of the nodes list; the StatefulSet keeps ``spec.replicas`` pods.
The one destructive step (restarting a survivor's pod) is recorded in status
before it is taken, so a restarted operator never takes it twice.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import string
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from operator_core import errors
from operator_core.applying import apply_report_prune, owned_children
from operator_core.clock import parse_wire_time, utcnow
from operator_core.conditions import ConditionStatus, reports_true
from operator_core.controller import FINALIZED
from operator_core.events import EventType
from operator_core.kube import Kube
from operator_core.pods import container_state, pod_ordinal
from operator_core.reconciling import WAIT_FOR_CHANGE, Context
from operator_core.secrets import register_secret
from operator_core.steps import ConditionBook, Outcome, run_steps, write_status
from operator_core.storage import (
    Expansion,
    claim_expansion,
    claim_template_size,
    decide_expansion,
    expansion_allowed,
    requested_size,
    smaller,
)
from typesense_operator.api import TYPESENSE_CLUSTER
from typesense_operator.api.reasons import ConditionType, EventReason
from typesense_operator.controller.metrics import RECOVERIES, observe_quorum
from typesense_operator.controller.restore import restore_from_backup
from typesense_operator.controller.settings import TypesenseSettings
from typesense_operator.controller.status import (
    BOOTSTRAPPING,
    guards_disruptions,
    node_views,
    nodes_to_publish,
    ready_condition,
    status_patch,
)
from typesense_operator.controller.takeover import foreign_selector, plan_takeover
from typesense_operator.quorum.decide import (
    HELD_BACK_REASONS,
    Action,
    NodeProbe,
    Plan,
    QuorumSettings,
    decide,
    leaders_stuck_in_shutdown,
)
from typesense_operator.quorum.probe import NodeAddressing, NodeTarget, probe_nodes
from typesense_operator.quorum.record import (
    record_from_status,
    roll_status,
    roll_under_way,
    roll_waiting_since,
    status_from_plan,
)
from typesense_operator.quorum.roll import RollAction, RollNode, RollSettings, plan_roll
from typesense_operator.resources import (
    API_KEY_DATA_KEY,
    CLAIM_TEMPLATE_NAME,
    PODMONITOR_API_VERSION,
    PRUNABLE_ELSEWHERE,
    PRUNABLE_KINDS,
    Cluster,
    build_generated_key_secret,
    build_http_routes,
    build_pod_monitor,
    build_reference_grants,
    desired_children,
    invalid_scraper_configs,
    server_configuration_hash,
)
from typesense_operator.resources.core import NODE, TYPESENSE_CONTAINER
from typesense_operator.resources.ingress import PROXY

__all__ = [
    "REFERENCE_GRANTS_FINALIZER",
    "Outcome",
    "Scope",
    "decoded_key",
    "finalize",
    "needs_finalizer",
    "node_targets",
    "probe_cluster",
    "reconcile",
]

REVISION_LABEL = "controller-revision-hash"
"""The StatefulSet controller's label on each pod: the revision it was made from."""
ROLL_LOOK_SECONDS = 2.0
"""How soon a cluster in the middle of a roll looks again: for a node catching up, which no watch tells."""
CRD_RECHECK_SECONDS = 15.0
"""How often a cluster that wants a PodMonitor or HTTPRoutes looks for their CRDs again: nothing we
watch tells when Prometheus Operator or the Gateway API is installed."""
REFERENCE_GRANTS_FINALIZER = "ts.opentelekomcloud.com/reference-grants"
"""Held by a cluster whose spec wants a ReferenceGrant in a Gateway's namespace, which no owner
reference can clean up: the cluster goes only once its grants are gone."""
_KEY_ALPHABET = string.ascii_letters + string.digits
_KEY_LENGTH = 48


@dataclass
class Scope:
    """What one reconcile knows and has decided so far."""

    obj: dict[str, Any]
    cluster: Cluster
    kube: Kube
    book: ConditionBook
    settings: TypesenseSettings
    addressing: NodeAddressing
    resync_seconds: float
    api_key: str | None = None
    members: tuple[int, ...] | None = None
    """Pod ordinals in the nodes list, as the quorum decision wants them (None: not decided)."""
    plan: Plan | None = None
    nodes_answered: bool = False
    """Some node answered this reconcile's probes."""
    nodes_addressable: bool = False
    """Some pod has an IP, so a probe could reach it: without one, only a pod's change can help."""
    pod_monitor: dict[str, Any] | None = None
    """The PodMonitor to apply with the children (None: not requested, or its CRD is not installed)."""
    quorum: dict[str, Any] = field(default_factory=dict)
    observed: dict[str, Any] = field(default_factory=dict)
    waiting_for_user: bool = False
    """A prerequisite only the user can fix (a Secret) is missing: only a change of it can help, and the
    Secret the spec names wakes the cluster when it changes."""

    waiting_for_crd: bool = False
    """spec.metrics asks for a PodMonitor, or spec.httpRoutes for routes, whose CRD is not installed (yet)."""
    routes: list[dict[str, Any]] = field(default_factory=list)
    """The HTTPRoutes and ReferenceGrants to apply with the children: those whose kind is served."""
    routes_applied: str | None = None
    """RoutesReady's message once they are applied (None: none requested, or a Gateway API CRD missing)."""

    create_once: list[tuple[dict[str, Any], str]] = field(default_factory=list)
    """Children to create, never apply, with the others, and what each is for (the generated key)."""
    claim_size: str | None = None
    """The size the StatefulSet's claim template keeps (None: the spec's)."""

    nodes: list[tuple[NodeTarget, NodeProbe, dict[str, Any]]] = field(default_factory=list)
    """Each node's target, probe and pod, as this reconcile's quorum step saw them."""
    roll: dict[str, Any] | None = None
    """status.roll as this reconcile leaves it (None: as it was)."""
    rolling: bool = False
    """A roll is under way: the next look comes soon (the pods' changes wake the cluster too)."""
    restore: dict[str, Any] | None = None
    """status.restore as this reconcile leaves it (None: as it was)."""
    restore_look: float | None = None
    """The restore waits for something that wakes nothing (its backup, its pod's last status): look
    again this soon."""

    @property
    def requeue_after(self) -> float:
        if self.restore_look is not None:
            return self.restore_look
        if self.rolling:
            return min(self._next_look, ROLL_LOOK_SECONDS)
        if self.waiting_for_user:
            return WAIT_FOR_CHANGE
        if self.waiting_for_crd:
            return min(self._next_look, CRD_RECHECK_SECONDS)
        return self._next_look

    @property
    def _next_look(self) -> float:
        if self.plan is None:
            return self.resync_seconds
        if not self.nodes_addressable and self.plan.action is Action.NONE:
            # Nothing to probe yet: a pod that gets its IP (or any other change of a pod) wakes the loop.
            return self.resync_seconds
        return min(self.plan.requeue_after, self.resync_seconds)

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
        await self.book.set(condition_type, status, reason, message, warn=warn)

    async def event(self, event_type: EventType, reason: EventReason, note: str) -> None:
        await self.book.event(event_type, reason, note)


Step = Callable[[Scope], Awaitable[Outcome]]


def _generate_key() -> str:
    return "".join(secrets.choice(_KEY_ALPHABET) for _ in range(_KEY_LENGTH))


def decoded_key(secret: dict[str, Any] | None) -> str | None:
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
        # Created with the first children, not before them: a new cluster's children wait for no
        # write of their own (and a Created Event for a key made again names it).
        scope.create_once.append((manifest, "a generated admin API key"))
        secret = manifest
    if secret is None:
        await scope.set_condition(
            ConditionType.ADMIN_KEY_READY,
            "False",
            "SecretNotFound",
            f"Secret {name} (spec.adminApiKey) does not exist in namespace {cluster.namespace}; create it "
            f"with the data key {API_KEY_DATA_KEY}, or remove spec.adminApiKey to have a key generated",
            warn=EventReason.ADMIN_KEY_MISSING,
        )
        scope.waiting_for_user = True
        return Outcome.STOP
    key = decoded_key(secret)
    if not key:
        await scope.set_condition(
            ConditionType.ADMIN_KEY_READY,
            "False",
            "KeyMissing",
            f"Secret {name} has no data key {API_KEY_DATA_KEY}; add the admin API key under that key",
            warn=EventReason.ADMIN_KEY_MISSING,
        )
        scope.waiting_for_user = True
        return Outcome.STOP
    register_secret(key)
    scope.api_key = key
    await scope.set_condition(
        ConditionType.ADMIN_KEY_READY, "True", "SecretFound", f"the key is in Secret {name}"
    )
    return Outcome.CONTINUE


def pod_addresses(pods: list[dict[str, Any]], statefulset: str) -> dict[int, str]:
    """Each node pod's IP by ordinal, for the nodes list. A pod being deleted keeps its address while
    its process may still lead; one that has ended (Failed, Succeeded) has none any more."""
    addresses = {}
    for pod in pods:
        status = pod.get("status") or {}
        index = pod_ordinal(pod["metadata"]["name"], statefulset)
        if index is not None and status.get("podIP") and status.get("phase") not in ("Failed", "Succeeded"):
            addresses[index] = str(status["podIP"])
    return addresses


def _held_back(pod: dict[str, Any]) -> str | None:
    """The Typesense container's waiting reason when its kubelet holds it back (quorum/decide.py's
    HELD_BACK_REASONS); None while it runs or is about to start."""
    reason = (container_state(pod, TYPESENSE_CONTAINER).get("waiting") or {}).get("reason")
    return str(reason) if reason in HELD_BACK_REASONS else None


def _running_since(pod: dict[str, Any]) -> datetime | None:
    """When the Typesense container started, while it runs (its kubelet's ``state.running.startedAt``)."""
    return parse_wire_time((container_state(pod, TYPESENSE_CONTAINER).get("running") or {}).get("startedAt"))


def _target(pod: dict[str, Any], index: int, cluster: Cluster) -> NodeTarget:
    return NodeTarget(
        index=index,
        pod=pod["metadata"]["name"],
        namespace=cluster.namespace,
        pod_ip=(pod.get("status") or {}).get("podIP"),
        port=cluster.spec.api_port,
        kubelet_ready=reports_true(pod),
        peering_port=cluster.spec.peering_port,
        held_back=_held_back(pod),
        running_since=_running_since(pod),
    )


async def node_targets(
    kube: Kube, cluster: Cluster, *, terminating: bool = False
) -> tuple[list[NodeTarget], list[dict[str, Any]]]:
    """The cluster's node pods that are not going away (``terminating``: those that are), as probe
    targets, and the pods themselves."""
    pods = await kube.list("v1", "Pod", cluster.namespace, labels=cluster.labels(NODE))
    targets, target_pods = [], []
    for pod in pods:
        index = pod_ordinal(pod["metadata"]["name"], cluster.statefulset_name)
        if index is None or bool(pod["metadata"].get("deletionTimestamp")) is not terminating:
            continue
        target_pods.append(pod)
        targets.append(_target(pod, index, cluster))
    return targets, target_pods


HURRIED_GRACE_SECONDS = 1
"""The grace of a second delete of a pod whose shutdown is stuck: not 0, which would remove the pod
object at once (a force delete) while its process may still hold the volume."""


async def _hurry_stuck_shutdowns(scope: Scope, now: datetime) -> None:
    """A pod being deleted whose node still leads after a few seconds holds the whole cluster (see
    quorum/decide.py's leaders_stuck_in_shutdown): delete it again with a grace of a second."""
    cluster = scope.cluster
    targets, pods = await node_targets(scope.kube, cluster, terminating=True)
    waiting, ages = [], {}
    for target, pod in zip(targets, pods, strict=True):
        metadata = pod["metadata"]
        grace = metadata.get("deletionGracePeriodSeconds")
        deadline = parse_wire_time(metadata.get("deletionTimestamp"))
        if grace is None or grace <= HURRIED_GRACE_SECONDS or deadline is None:
            continue
        waiting.append(target)
        ages[target.index] = (now - deadline).total_seconds() + grace  # since the deletion began
    if not waiting:
        return
    assert scope.api_key is not None
    probes = await probe_cluster(scope.addressing, scope.settings, cluster, waiting, scope.api_key)
    for index in leaders_stuck_in_shutdown([(probe, ages[probe.index]) for probe in probes]):
        name = cluster.pod_name(index)
        age = ages[index]
        await scope.kube.delete("v1", "Pod", name, cluster.namespace, grace_period=HURRIED_GRACE_SECONDS)
        await scope.event(
            "Warning",
            EventReason.LEADER_SHUTDOWN_HURRIED,
            f"pod {name} has been shutting down for {age:.0f} s and its node still leads the raft "
            "(typesense-server waits for writes that can no longer commit, and its heartbeats keep the "
            f"followers from electing another): its grace is cut to {HURRIED_GRACE_SECONDS} s",
        )


async def probe_cluster(
    addressing: NodeAddressing,
    settings: TypesenseSettings,
    cluster: Cluster,
    targets: list[NodeTarget],
    key: str,
) -> list[NodeProbe]:
    return await probe_nodes(
        addressing,
        targets,
        key,
        # The spec may ask for more patience, never for less than the operator's own floor.
        timeout=max(settings.probe_timeout, cluster.spec.health_probe_timeout_in_milliseconds / 1000),
        concurrency=settings.probe_concurrency,
    )


class CommitMemory:
    """The furthest commit seen of each cluster, as of the last look: its status has it only as of the
    last time anything went wrong or the leader's term changed (quorum/record.py says why).

    Kept by (namespace, name) with the uid it was seen for, so that a cluster made again under the same
    name starts afresh, and forgotten when the cluster is gone.
    """

    def __init__(self) -> None:
        self._seen: dict[tuple[str, str], tuple[str, tuple[int, int]]] = {}

    def recall(self, namespace: str, name: str, uid: str) -> tuple[int, int] | None:
        seen_uid, committed = self._seen.get((namespace, name), (None, None))
        return committed if seen_uid == uid else None

    def keep(self, namespace: str, name: str, uid: str, committed: tuple[int, int]) -> None:
        self._seen[(namespace, name)] = (uid, committed)

    def forget(self, namespace: str, name: str) -> None:
        self._seen.pop((namespace, name), None)


COMMITS = CommitMemory()


async def manage_quorum(scope: Scope) -> Outcome:
    """Probe the nodes, decide the raft members, and take the decided step (recorded first if destructive)."""
    cluster = scope.cluster
    assert scope.api_key is not None
    await _hurry_stuck_shutdowns(scope, utcnow())
    targets, target_pods = await node_targets(scope.kube, cluster)
    probes = await probe_cluster(scope.addressing, scope.settings, cluster, targets, scope.api_key)
    settings = QuorumSettings(
        grace_seconds=scope.settings.grace_seconds,
        loading_limit_seconds=scope.settings.loading_limit_seconds,
        incremental=cluster.spec.incremental_quorum_recovery,
    )
    previous = (scope.obj.get("status") or {}).get("quorum")
    record = record_from_status(scope.obj.get("status"))
    uid = scope.obj["metadata"].get("uid", "")
    seen = COMMITS.recall(cluster.namespace, cluster.name, uid)
    remembered = max(filter(None, (record.committed, seen)), default=None)
    record = replace(record, committed=remembered)
    now = utcnow()  # after the probes: a grace is counted to what they saw
    plan = decide(probes, cluster.spec.replicas, record, now, settings)
    if plan.record.committed is not None:
        COMMITS.keep(cluster.namespace, cluster.name, uid, plan.record.committed)
    scope.plan, scope.members = plan, plan.members
    scope.nodes = list(zip(targets, probes, target_pods, strict=True))
    scope.nodes_answered = any(probe.reachable for probe in probes)
    scope.nodes_addressable = any(target.pod_ip for target in targets)
    scope.quorum = status_from_plan(plan, previous, now)
    changed_action = (
        plan.action is not Action.NONE and (previous or {}).get("lastAction") != plan.action.value
    )
    if plan.action in (Action.DOWNGRADE, Action.RESTART_SURVIVOR) and scope.kube.cache is not None:
        # Surgery decided from a stale list of pods could fence the wrong members: refuse it, and
        # look again once the watch caught up (NotSynced is temporary: the loop backs off).
        scope.kube.cache.require_synced("taking quorum surgery")
    observe_quorum(cluster.namespace, cluster.name, plan, probes)
    try:
        if plan.action is Action.DOWNGRADE:
            await scope.event("Warning", EventReason.QUORUM_DOWNGRADED, plan.message)
            await _fence(scope, plan)
        elif plan.action is Action.UPGRADE:
            await scope.event("Normal", EventReason.QUORUM_UPGRADED, plan.message)
        elif plan.action is Action.NEEDS_INTERVENTION and changed_action:
            await scope.event("Warning", EventReason.QUORUM_NEEDS_INTERVENTION, "; ".join(plan.warnings))
            RECOVERIES.labels(plan.action.value, "needed").inc()
        elif plan.action is Action.RESTART_SURVIVOR:
            await _restart_survivor(scope, plan)
        elif plan.action is Action.RESTART_ERRORED:
            await _restart_errored(scope, plan)
        elif plan.action is Action.HOLD and changed_action:
            await scope.event("Warning", EventReason.QUORUM_SURGERY_HELD, plan.message)
            RECOVERIES.labels(plan.action.value, "needed").inc()
    except Exception:
        RECOVERIES.labels(plan.action.value, "failed").inc()
        raise
    if plan.action in (Action.DOWNGRADE, Action.UPGRADE, Action.RESTART_SURVIVOR, Action.RESTART_ERRORED):
        RECOVERIES.labels(plan.action.value, "taken").inc()
    return Outcome.CONTINUE


async def _restart_survivor(scope: Scope, plan: Plan) -> None:
    """The last resort, taken once: the record says so before the pod is deleted."""
    cluster, metadata = scope.cluster, scope.obj["metadata"]
    assert plan.survivor is not None
    await scope.kube.patch_status(
        TYPESENSE_CLUSTER.api_version,
        TYPESENSE_CLUSTER.kind,
        metadata["name"],
        metadata["namespace"],
        {"quorum": scope.quorum},
    )
    scope.obj = {**scope.obj, "status": {**(scope.obj.get("status") or {}), "quorum": scope.quorum}}
    pod = cluster.pod_name(plan.survivor)
    await _delete_stuck_pod(scope, pod)
    await scope.event("Warning", EventReason.QUORUM_SURVIVOR_RESTARTED, f"{plan.message}: deleted pod {pod}")


async def _restart_errored(scope: Scope, plan: Plan) -> None:
    """Delete the pods of members whose raft stopped; their StatefulSet makes them again, on their volumes."""
    for index in plan.restarted:
        pod = scope.cluster.pod_name(index)
        if await _delete_stuck_pod(scope, pod):
            await scope.event(
                "Warning", EventReason.ERRORED_NODE_RESTARTED, f"deleted pod {pod}: {plan.message}"
            )


async def _fence(scope: Scope, plan: Plan) -> None:
    """Delete the pods of members that answered nothing, before the nodes list names the survivor alone.

    Deleted first and recorded after: an operator that stops in between downgrades again and fences
    whatever is still silent, which costs a restart at most, never a second leader.
    """
    for index in plan.fenced:
        pod = scope.cluster.pod_name(index)
        if await _delete_stuck_pod(scope, pod):
            await scope.event(
                "Warning",
                EventReason.QUORUM_MEMBER_FENCED,
                f"deleted pod {pod}: it answered nothing when the cluster was downgraded, and must not "
                "come back as part of the old majority",
            )


async def _delete_stuck_pod(scope: Scope, pod: str) -> bool:
    grace = scope.settings.stuck_pod_grace_seconds
    return await scope.kube.delete("v1", "Pod", pod, scope.cluster.namespace, grace_period=grace)


async def plan_pod_monitor(scope: Scope) -> Outcome:
    """A PodMonitor only where Prometheus Operator's CRD exists; without it, a Warning, not a failure."""
    monitor = build_pod_monitor(scope.cluster)
    if monitor is None:
        await scope.set_condition(ConditionType.METRICS_READY, "True", "NotRequested")
    elif not await scope.kube.serves(PODMONITOR_API_VERSION, "PodMonitor"):
        scope.waiting_for_crd = True
        await scope.set_condition(
            ConditionType.METRICS_READY,
            "False",
            "PodMonitorCRDMissing",
            "spec.metrics is set but the PodMonitor CRD (monitoring.coreos.com/v1) is not installed; "
            "the exporter sidecar runs, but nothing tells Prometheus to scrape it",
            warn=EventReason.POD_MONITOR_UNAVAILABLE,
        )
    else:
        scope.pod_monitor = monitor
    return Outcome.CONTINUE


async def plan_routes(scope: Scope) -> Outcome:
    """Gateway API HTTPRoutes (and ReferenceGrants) only where their CRDs exist; without them, a Warning
    and the rest of the cluster as usual. A kind that is not served is neither applied nor pruned, and
    one that is served is applied (not pruned for want of the other)."""
    routes, grants = build_http_routes(scope.cluster), build_reference_grants(scope.cluster)
    missing = []
    for manifests in (routes, grants):
        if not manifests:
            continue
        api_version, kind = manifests[0]["apiVersion"], manifests[0]["kind"]
        if await scope.kube.serves(api_version, kind):
            scope.routes.extend(manifests)
        else:
            missing.append(f"{kind} ({api_version})")
    if not routes:
        await scope.set_condition(ConditionType.ROUTES_READY, "True", "NotRequested")
    elif missing:
        scope.waiting_for_crd = True
        await scope.set_condition(
            ConditionType.ROUTES_READY,
            "False",
            "GatewayAPIMissing",
            f"spec.httpRoutes is set but the Gateway API CRDs of {' and '.join(missing)} are not installed; "
            "the cluster is served through its Services only until they are",
            warn=EventReason.ROUTES_UNAVAILABLE,
        )
    else:
        names = ", ".join(m["metadata"]["name"] for m in routes)
        granted = ", ".join(f"{m['metadata']['namespace']}/{m['metadata']['name']}" for m in grants)
        scope.routes_applied = f"HTTPRoute {names}" + (f"; ReferenceGrant {granted}" if grants else "")
    return Outcome.CONTINUE


async def grow_storage(scope: Scope) -> Outcome:
    """Grow every node's claim to spec.storage.size where the StorageClass allows it, then recreate the
    StatefulSet (its pods orphaned, not deleted) so that its claim template says the new size too.

    The claims are asked first and the StatefulSet deleted last: an operator stopped in between finds
    the template still small, and asks again (a no-op for the claims already grown). Where the class
    does not allow expansion, StorageReady says so and nothing changes: the StatefulSet keeps its size.
    """
    cluster, kube = scope.cluster, scope.kube
    # A new cluster's StatefulSet is not there yet, and asking the API server to be sure would delay
    # every child; one there without our labels gets them from the apply, and is looked at next time.
    live = await kube.get(
        "apps/v1", "StatefulSet", cluster.statefulset_name, cluster.namespace, labelled_only=True
    )
    if live is not None and live["metadata"].get("deletionTimestamp"):
        # Being orphaned by the garbage collector: its deletion wakes the cluster, which creates it anew.
        await scope.set_condition(ConditionType.STORAGE_READY, "True", "Expanding", _recreating(cluster))
        return Outcome.STOP
    template = claim_template_size(live)
    wanted = cluster.spec.storage.size
    if template is None or not smaller(template, wanted):
        scope.claim_size = template
        await scope.set_condition(ConditionType.STORAGE_READY, "True", "AsRequested")
        return Outcome.CONTINUE
    class_name = cluster.spec.storage.storage_class_name
    allows = await expansion_allowed(kube, class_name)
    plan = decide_expansion(
        wanted, template, class_name, allows, field="storage.size", volume="Typesense volumes"
    )
    if plan.action is not Expansion.EXPAND:
        scope.claim_size = template
        await scope.set_condition(
            ConditionType.STORAGE_READY,
            "False",
            "StorageNotExpandable",
            plan.message,
            warn=EventReason.STORAGE_NOT_EXPANDABLE,
        )
        return Outcome.CONTINUE
    claims = {}
    for index in range(cluster.spec.replicas):
        name = f"{CLAIM_TEMPLATE_NAME}-{cluster.pod_name(index)}"
        claims[name] = await kube.get("v1", "PersistentVolumeClaim", name, cluster.namespace)
    unbound = sorted(n for n, c in claims.items() if c and (c.get("status") or {}).get("phase") != "Bound")
    if unbound:
        # The API server grows bound claims only; a template grown before them would leave them small.
        scope.claim_size = template
        await scope.set_condition(
            ConditionType.STORAGE_READY,
            "False",
            "ClaimsNotBound",
            f"{plan.message} once every claim is bound; not bound yet: {', '.join(unbound)}",
        )
        return Outcome.CONTINUE
    for name, claim in claims.items():
        claimed = requested_size((claim or {}).get("spec"))
        if claimed is not None and smaller(claimed, wanted):
            await kube.apply(claim_expansion(name, cluster.namespace, wanted))
    await kube.delete(
        "apps/v1", "StatefulSet", cluster.statefulset_name, cluster.namespace, propagation="Orphan"
    )
    await scope.event("Normal", EventReason.STORAGE_EXPANDED, f"{plan.message}; {_recreating(cluster)}")
    await scope.set_condition(ConditionType.STORAGE_READY, "True", "Expanding", _recreating(cluster))
    return Outcome.STOP


async def take_over(scope: Scope) -> Outcome:
    """Replace workloads another controller made for this cluster (the Go operator's StatefulSet and
    proxy Deployment), whose selectors ours cannot apply over: controller/takeover.py says how."""
    cluster, kube = scope.cluster, scope.kube
    live = await kube.get(
        "apps/v1", "StatefulSet", cluster.statefulset_name, cluster.namespace, labelled_only=True
    )
    ours = cluster.selector(NODE)
    selector = foreign_selector(live, ours)
    if selector is not None:
        pods = await kube.list("v1", "Pod", cluster.namespace, labels=selector)
        plan = plan_takeover(cluster.statefulset_name, selector, ours, pods)
        # Labelled first: our Services select by these labels, and a pod the nodes list names by its
        # DNS name (one with no address yet) is found through the headless Service.
        for pod in plan.label:
            await kube.patch(
                "v1", "Pod", pod, cluster.namespace, {"metadata": {"labels": cluster.labels(NODE)}}
            )
        await kube.delete(
            "apps/v1", "StatefulSet", cluster.statefulset_name, cluster.namespace, propagation="Orphan"
        )
        await scope.event("Normal", EventReason.TOOK_OVER, plan.message)
        return Outcome.STOP
    if cluster.spec.ingress is not None:
        proxy = await kube.get(
            "apps/v1", "Deployment", cluster.proxy_name, cluster.namespace, labelled_only=True
        )
        if foreign_selector(proxy, cluster.selector(PROXY)) is not None:
            # Stateless: replaced at once (a moment without the proxy), its pods with it.
            await kube.delete("apps/v1", "Deployment", cluster.proxy_name, cluster.namespace)
            await scope.event(
                "Normal",
                EventReason.TOOK_OVER,
                f"Deployment {cluster.proxy_name} was made by another controller: "
                "replaced by this operator's",
            )
    return Outcome.CONTINUE


def _recreating(cluster: Cluster) -> str:
    return (
        f"recreating StatefulSet {cluster.statefulset_name} with a {cluster.spec.storage.size} claim "
        "template; its pods keep running"
    )


async def apply_children(scope: Scope) -> Outcome:
    """Every child (and the PodMonitor, when wanted and served) applied; what the spec dropped, deleted."""
    cluster = scope.cluster
    configuration = cluster.spec.additional_server_configuration
    configuration_hash = None
    if configuration is not None:
        # Watched: an edit of it alone wakes the cluster, and its new hash rolls the pods.
        config_map = await scope.kube.get("v1", "ConfigMap", configuration.name, cluster.namespace)
        configuration_hash = server_configuration_hash(config_map)
    # Ours only (labelled): one someone else made under its name is no evidence that this cluster served.
    budget = await scope.kube.get(
        "policy/v1", "PodDisruptionBudget", cluster.pdb_name, cluster.namespace, labelled_only=True
    )
    every_pod = await scope.kube.list("v1", "Pod", cluster.namespace, labels=cluster.labels(NODE))
    desired = desired_children(
        cluster,
        scope.members,
        scope.claim_size,
        configuration_hash,
        disruption_budget=guards_disruptions(
            (scope.obj.get("status") or {}).get("phase"),
            ready_nodes=sum(1 for target, _, _ in scope.nodes if target.kubelet_ready),
            budget_exists=budget is not None,
        ),
        addresses=pod_addresses(every_pod, cluster.statefulset_name),
    )
    if scope.pod_monitor is not None:
        desired.append(scope.pod_monitor)
    desired.extend(scope.routes)
    # Every pod that runs: a node not in the nodes list yet (growing back, scaling up) reads it too.
    pods = [pod for pod in every_pod if not pod["metadata"].get("deletionTimestamp")]
    nodes_list_before = None
    if pods and cluster.spec.force_reset_peers_config_on_update:
        nodes_list_before = await scope.kube.get(
            "v1", "ConfigMap", cluster.nodes_configmap_name, cluster.namespace
        )
    await apply_report_prune(
        scope.kube,
        scope.book,
        scope.cluster,
        desired,
        PRUNABLE_KINDS,
        prunable_elsewhere=PRUNABLE_ELSEWHERE,
        create_once=scope.create_once,
    )
    if nodes_list_before is not None:
        await _hurry_the_nodes_list(scope, nodes_list_before, desired, pods)
    if scope.pod_monitor is not None:
        await scope.set_condition(ConditionType.METRICS_READY, "True", "PodMonitorApplied")
    if scope.routes_applied is not None:
        await scope.set_condition(ConditionType.ROUTES_READY, "True", "Applied", scope.routes_applied)
    return Outcome.CONTINUE


def _cluster_of(obj: dict[str, Any]) -> Cluster | None:
    try:
        return Cluster.from_object(obj)
    except errors.InvalidSpec:
        return None


def needs_finalizer(obj: dict[str, Any]) -> bool:
    """Whether the cluster wants a ReferenceGrant in another namespace (a spec its model refuses keeps
    whatever it holds now)."""
    if not (obj.get("spec") or {}).get("httpRoutes"):
        return False  # most clusters: no second validation of the spec on every reconcile
    cluster = _cluster_of(obj)
    if cluster is None:
        return REFERENCE_GRANTS_FINALIZER in (obj["metadata"].get("finalizers") or [])
    return bool(build_reference_grants(cluster))


async def finalize(obj: dict[str, Any], context: Context) -> float:
    """A deleted cluster's ReferenceGrants, in the Gateways' namespaces, deleted; the rest is garbage
    collected through owner references."""
    # Only the identity is needed here: a spec its model refuses must not hold the deletion.
    cluster = _cluster_of(obj) or Cluster.from_object({**obj, "spec": {"image": "unused"}})
    for grant in await owned_children(context.kube, cluster, PRUNABLE_ELSEWHERE, anywhere=True):
        metadata = grant["metadata"]
        await context.kube.delete(grant["apiVersion"], grant["kind"], metadata["name"], metadata["namespace"])
    return FINALIZED


NODES_LIST_ANNOTATION = "ts.opentelekomcloud.com/nodes-list-hash"
"""Pod annotation set when the nodes list changes (spec.forceResetPeersConfigOnUpdate): a change of the
pod makes its kubelet refresh the mounted nodes file at once, not at its next periodic sync (up to a
minute or more), so that Typesense reads the new raft configuration within its own 10 s."""


async def _hurry_the_nodes_list(
    scope: Scope, before: dict[str, Any], desired: list[dict[str, Any]], pods: list[dict[str, Any]]
) -> None:
    cluster = scope.cluster
    (nodes_list,) = (
        m
        for m in desired
        if m["kind"] == "ConfigMap" and m["metadata"]["name"] == cluster.nodes_configmap_name
    )
    if (before.get("data") or {}) == nodes_list["data"]:
        return
    digest = hashlib.sha256(json.dumps(nodes_list["data"], sort_keys=True).encode()).hexdigest()[:16]
    for pod in pods:
        if (pod["metadata"].get("annotations") or {}).get(NODES_LIST_ANNOTATION) != digest:
            patch = {"metadata": {"annotations": {NODES_LIST_ANNOTATION: digest}}}
            await scope.kube.patch("v1", "Pod", pod["metadata"]["name"], cluster.namespace, patch)


async def roll_nodes(scope: Scope) -> Outcome:
    """Take the roll planner's next step (quorum/roll.py) towards the StatefulSet's update revision.

    The StatefulSet's update strategy is OnDelete: a new pod template reaches a node only when this
    step deletes its pod. Everything it decides from comes from observations (each pod's revision,
    the probes), so a restarted operator resumes a roll where it stopped; status.roll keeps only
    since when it has waited for a node, for the pause.
    """
    cluster, kube = scope.cluster, scope.kube
    sts = await kube.get("apps/v1", "StatefulSet", cluster.statefulset_name, cluster.namespace)
    status = (sts or {}).get("status") or {}
    revision = status.get("updateRevision")
    if sts is None or not revision or status.get("observedGeneration") != sts["metadata"].get("generation"):
        # The StatefulSet controller has not seen the template yet: its status change wakes the cluster.
        return Outcome.CONTINUE
    seen = {target.index: (probe, pod) for target, probe, pod in scope.nodes}
    nodes = []
    for index in range(cluster.spec.replicas):
        if index in seen:
            probe, pod = seen[index]
            labels = pod["metadata"].get("labels") or {}
            nodes.append(RollNode(probe, labels.get(REVISION_LABEL), ready=reports_true(pod)))
        else:  # no pod, or one being deleted: on its way back
            nodes.append(RollNode(NodeProbe(index=index, reachable=False), None, deleting=True))
    waiting_since = roll_waiting_since(scope.obj.get("status"), revision)
    now = utcnow()
    outdated = any(node.revision not in (None, revision) for node in nodes)
    step = None
    # A roll under way goes on until its last restarted node is back; otherwise a missing pod is only
    # one the StatefulSet controller is about to make, from the update revision.
    if outdated or roll_under_way(scope.obj.get("status"), revision):
        quorum_ready = scope.plan is not None and scope.plan.ready
        step = plan_roll(
            nodes,
            revision,
            quorum_ready=quorum_ready,
            waiting_since=waiting_since,
            now=now,
            settings=RollSettings(
                catch_up_entries=scope.settings.roll_catch_up_entries,
                back_within_seconds=scope.settings.roll_back_within_seconds,
            ),
        )
    if step is None or step.action is RollAction.DONE:
        scope.roll = roll_status(revision, None, None)
        await scope.set_condition(
            ConditionType.PROGRESSING, "False", "UpToDate", f"every node runs revision {revision}"
        )
        return Outcome.CONTINUE
    scope.rolling = True
    coming_back = step.action in (RollAction.WAIT, RollAction.PAUSE) and step.node is not None
    since = (waiting_since or now) if coming_back else None
    if step.action is RollAction.RESTART and step.node is not None:
        pod_name = cluster.pod_name(step.node)
        # A node that answers nothing (hung) cannot shut down cleanly: its pod's own grace would only
        # be waited out.
        silent = step.node not in seen or not seen[step.node][0].reachable
        grace = scope.settings.stuck_pod_grace_seconds if silent else None
        await kube.delete("v1", "Pod", pod_name, cluster.namespace, grace_period=grace)
        await scope.event(
            "Normal", EventReason.NODE_RESTARTED, f"{step.message} (pod {pod_name}) for revision {revision}"
        )
        since = now
    done, to_do = ", ".join(map(str, step.done)) or "none", ", ".join(map(str, step.to_do))
    progress = f"rolling to revision {revision}: done {done}; to do {to_do}. {step.message}"
    if step.action is RollAction.PAUSE:
        await scope.set_condition(
            ConditionType.PROGRESSING, "False", "RollPaused", progress, warn=EventReason.ROLL_PAUSED
        )
    else:
        await scope.set_condition(ConditionType.PROGRESSING, "True", "Rolling", progress)
    scope.roll = roll_status(revision, step, since)
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
    restore_from_backup,
    take_over,
    manage_quorum,
    plan_pod_monitor,
    plan_routes,
    grow_storage,
    apply_children,
    roll_nodes,
    observe_nodes,
)


async def reconcile(
    obj: dict[str, Any], context: Context, addressing: NodeAddressing, settings: TypesenseSettings
) -> float:
    """Bring one cluster to its spec and write its status; returns seconds until the next look."""
    scope = Scope(
        obj=obj,
        cluster=Cluster.from_object(obj),
        kube=context.kube,
        book=ConditionBook.of(obj, context.recorder),
        settings=settings,
        addressing=addressing,
        resync_seconds=context.settings.resync_seconds,
    )
    await run_steps(STEPS, scope, finish=_write_status)
    return scope.requeue_after


async def _write_status(scope: Scope, completed: bool) -> None:
    bootstrapping = (scope.obj.get("status") or {}).get("phase") in (None, BOOTSTRAPPING)
    await scope.book.set_ready(
        *ready_condition(
            scope.book.conditions, scope.plan, observed=scope.nodes_answered or not bootstrapping
        ),
        became_ready=EventReason.QUORUM_READY,
        became_not_ready=EventReason.QUORUM_NOT_READY,
        condition_type=ConditionType.READY,
    )
    current = scope.obj.get("status") or {}
    nodes = None
    if scope.plan is not None:  # the nodes were probed
        seen = [
            (target.pod, probe, (pod["metadata"].get("labels") or {}).get(REVISION_LABEL))
            for target, probe, pod in scope.nodes
        ]
        nodes = nodes_to_publish(
            current, node_views(seen, (scope.roll or {}).get("updateRevision")), utcnow()
        )
    patch = status_patch(
        current,
        scope.book.conditions,
        scope.observed,
        quorum=scope.quorum,
        roll=scope.roll,
        restore=scope.restore,
        nodes=nodes,
        generation=scope.obj["metadata"].get("generation") if completed else None,
    )
    await write_status(scope.kube, TYPESENSE_CLUSTER, scope.obj, patch)
