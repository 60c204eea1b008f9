"""One reconcile of one TypesenseCluster: the ordered list of its steps over a scope, then status once.

Each step lives in a module of its own (:mod:`.nodes` reaches the nodes, :mod:`.quorum` keeps the raft
members, :mod:`.storage` grows the volumes, :mod:`.children` applies the children, :mod:`.roll` rolls
the pods, :mod:`.takeover` replaces another controller's workloads, :mod:`.restore` fills a new
cluster's first node from a backup); this module holds the list, the steps too small for a room of
their own, the status written at the end and the cluster's finalizer.

Steps read, diff and apply; every decision comes from the pure ``resources`` room, the quorum's
decision or :mod:`.status`. A step that cannot go on returns ``STOP`` and the reconcile ends with the
conditions it set (for example, a missing admin key Secret stops before anything that would use a wrong
key is applied). Status is written once at the end, and only when it changed, so a reconcile where
nothing changed makes no write call at all.
"""

from __future__ import annotations

from typing import Any

from operator_core import errors
from operator_core.applying import owned_children
from operator_core.clock import utcnow
from operator_core.controller import FINALIZED
from operator_core.reconciling import Context
from operator_core.secrets import register_secret
from operator_core.steps import Outcome, Steps
from typesense_operator.api import TYPESENSE_CLUSTER
from typesense_operator.api.reasons import ConditionType, EventReason
from typesense_operator.controller.cluster.children import (
    NODES_LIST_ANNOTATION,
    apply_children,
    plan_pod_monitor,
    plan_routes,
)
from typesense_operator.controller.cluster.node_loss import handle_node_loss
from typesense_operator.controller.cluster.nodes import decoded_key, generate_key
from typesense_operator.controller.cluster.quorum import manage_quorum
from typesense_operator.controller.cluster.restore import confirm_restore_served, restore_from_backup
from typesense_operator.controller.cluster.roll import REVISION_LABEL, roll_nodes
from typesense_operator.controller.cluster.scope import Scope
from typesense_operator.controller.cluster.status import (
    BOOTSTRAPPING,
    node_views,
    nodes_to_publish,
    ready_condition,
    status_fields,
)
from typesense_operator.controller.cluster.storage import grow_storage
from typesense_operator.controller.cluster.takeover import take_over
from typesense_operator.controller.cluster.tls import prepare_tls
from typesense_operator.quorum.hosts import host_notes
from typesense_operator.resources import (
    API_KEY_DATA_KEY,
    PRUNABLE_ELSEWHERE,
    Cluster,
    build_generated_key_secret,
    build_reference_grants,
    invalid_scraper_configs,
)

# NODES_LIST_ANNOTATION is named here too: the end-to-end tests read it from this module.
__all__ = [
    "NODES_LIST_ANNOTATION",
    "REFERENCE_GRANTS_FINALIZER",
    "STEPS",
    "finalize",
    "needs_finalizer",
    "reconcile",
]

REFERENCE_GRANTS_FINALIZER = "ts.opentelekomcloud.com/reference-grants"
"""Held by a cluster whose spec wants a ReferenceGrant in a Gateway's namespace, which no owner
reference can clean up: the cluster goes only once its grants are gone."""


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
        generated = generate_key()
        register_secret(generated)
        manifest = build_generated_key_secret(cluster, generated)
        assert manifest is not None
        # Created with the first children, not before them: a new cluster's children wait for no
        # write of their own (and a Created Event for a key made again names it).
        scope.generated_key = generated
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


async def observe_nodes(scope: Scope) -> Outcome:
    cluster = scope.cluster
    statefulset = await scope.kube.get("apps/v1", "StatefulSet", cluster.statefulset_name, cluster.namespace)
    status = (statefulset or {}).get("status") or {}
    scope.observed = {"replicas": status.get("replicas", 0), "readyReplicas": status.get("readyReplicas", 0)}
    return Outcome.CONTINUE


async def report(scope: Scope, completed: bool) -> None:
    """Ready from the prerequisites and the quorum, and the status fields the cluster owns: its phase,
    replicas, the quorum's record, the roll, the restore and each node's view."""
    current = scope.current
    bootstrapping = current.get("phase") in (None, BOOTSTRAPPING)
    lost = host_notes(
        [
            (target.index, target.pod, probe.reachable, host)
            for (target, probe, _), host in zip(scope.nodes, scope.hosts, strict=False)
        ]
    )
    await scope.book.set_ready(
        *ready_condition(
            scope.book.conditions,
            scope.plan,
            observed=scope.nodes_answered or not bootstrapping,
            host_notes=[*lost, *scope.node_loss_notes],
            not_served=scope.restore_not_served,
        ),
        became_ready=EventReason.QUORUM_READY,
        became_not_ready=EventReason.QUORUM_NOT_READY,
        condition_type=ConditionType.READY,
    )
    nodes = None
    if scope.plan is not None:  # the nodes were probed
        seen = [
            (target.pod, probe, (pod["metadata"].get("labels") or {}).get(REVISION_LABEL))
            for target, probe, pod in scope.nodes
        ]
        nodes = nodes_to_publish(
            current, node_views(seen, (scope.roll or {}).get("updateRevision"), scope.hosts), utcnow()
        )
    scope.status.update(
        status_fields(
            current,
            scope.book.conditions,
            scope.observed,
            quorum=scope.quorum,
            roll=scope.roll,
            restore=scope.restore,
            nodes=nodes,
        )
    )


STEPS = Steps(
    TYPESENSE_CLUSTER,
    Scope.of,
    (
        check_configuration,
        ensure_admin_key,
        prepare_tls,
        restore_from_backup,
        take_over,
        manage_quorum,
        confirm_restore_served,
        handle_node_loss,
        plan_pod_monitor,
        plan_routes,
        grow_storage,
        apply_children,
        roll_nodes,
        observe_nodes,
    ),
    report,
    apply=apply_children,
)
reconcile = STEPS.reconcile
"""Bring one cluster to its spec and write its status; returns seconds until the next look."""
