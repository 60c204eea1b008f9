"""The cluster's storage step: every node's claim grown to spec.storage.size where its StorageClass
allows it, then the StatefulSet recreated (its pods orphaned) so that its claim template says so too."""

from __future__ import annotations

from operator_core.steps import Outcome
from operator_core.storage import (
    Expansion,
    claim_expansion,
    claim_template_size,
    decide_expansion,
    expansion_allowed,
    requested_size,
    smaller,
)
from typesense_operator.api.reasons import ConditionType, EventReason
from typesense_operator.controller.scope import Scope
from typesense_operator.resources import CLAIM_TEMPLATE_NAME, Cluster

__all__ = ["grow_storage"]


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


def _recreating(cluster: Cluster) -> str:
    return (
        f"recreating StatefulSet {cluster.statefulset_name} with a {cluster.spec.storage.size} claim "
        "template; its pods keep running"
    )
