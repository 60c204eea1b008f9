"""The cluster's storage step: every node's claim grown to spec.storage.size (or to what
spec.storage.autoGrow asked for, when a node's file system passed its threshold) where its StorageClass
allows it, then the StatefulSet recreated (its pods orphaned) so that its claim template says so too."""

from __future__ import annotations

from operator_core.clock import utcnow, wire_time
from operator_core.steps import Outcome
from operator_core.storage import (
    AutoGrowth,
    Expansion,
    VolumeUsage,
    claim_expansion,
    claim_template_size,
    decide_auto_growth,
    decide_expansion,
    expansion_allowed,
    requested_size,
    smaller,
)
from typesense_operator.api import TYPESENSE_CLUSTER
from typesense_operator.api.reasons import ConditionType, EventReason
from typesense_operator.controller.cluster.scope import Scope
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
        await scope.set_condition(
            ConditionType.STORAGE_READY, "True", "Expanding", _recreating(cluster, _wanted(scope)[0])
        )
        return Outcome.STOP
    template = claim_template_size(live)
    wanted, field = _wanted(scope)
    if template is None:
        # A new cluster, or one whose StatefulSet a growth recreates: made with the size wanted.
        scope.claim_size = wanted
        await scope.set_condition(ConditionType.STORAGE_READY, "True", "AsRequested")
        return Outcome.CONTINUE
    if not smaller(template, wanted):
        scope.claim_size = template
        return await _auto_grow(scope, template)
    class_name = cluster.spec.storage.storage_class_name
    allows = await expansion_allowed(kube, class_name)
    plan = decide_expansion(wanted, template, class_name, allows, field=field, volume="Typesense volumes")
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
    recreating = _recreating(cluster, wanted)
    await scope.event("Normal", EventReason.STORAGE_EXPANDED, f"{plan.message}; {recreating}")
    await scope.set_condition(ConditionType.STORAGE_READY, "True", "Expanding", recreating)
    return Outcome.STOP


def _wanted(scope: Scope) -> tuple[str, str]:
    """The size the volumes are to have, and the field that asks for it: spec.storage.size, or what
    autoGrow grew them to (status.storage.autoGrownTo) when that is larger."""
    size = scope.cluster.spec.storage.size
    grown = ((scope.obj.get("status") or {}).get("storage") or {}).get("autoGrownTo")
    if grown and smaller(size, grown):
        return grown, "storage.autoGrow"
    return size, "storage.size"


async def _auto_grow(scope: Scope, size: str) -> Outcome:
    """With spec.storage.autoGrow enabled and a node's file system past its threshold: every claim grown
    by a step (recorded in status.storage before anything is asked, so that a restarted operator goes on
    from it), or, at autoGrow.maxSize, a Warning and StorageReady False."""
    cluster = scope.cluster
    settings = cluster.spec.storage.auto_grow
    if settings is None or not settings.enabled or settings.max_size is None:
        await scope.set_condition(ConditionType.STORAGE_READY, "True", "AsRequested")
        return Outcome.CONTINUE
    usages = [
        VolumeUsage(f"node {probe.index}", probe.disk_used_bytes, probe.disk_total_bytes)
        for _, probe, _ in scope.nodes
        if probe.disk_used_bytes is not None and probe.disk_total_bytes is not None
    ]
    plan = decide_auto_growth(
        usages,
        size,
        threshold_percent=settings.threshold_percent,
        step=settings.step,
        max_size=settings.max_size,
    )
    if plan.action is AutoGrowth.AT_MAX:
        await scope.set_condition(
            ConditionType.STORAGE_READY,
            "False",
            "AutoGrowLimitReached",
            plan.condition,
            warn=EventReason.STORAGE_AUTO_GROW_LIMIT_REACHED,
        )
        return Outcome.CONTINUE
    if plan.action is not AutoGrowth.GROW:
        await scope.set_condition(ConditionType.STORAGE_READY, "True", "AsRequested")
        return Outcome.CONTINUE
    class_name = cluster.spec.storage.storage_class_name
    if not await expansion_allowed(scope.kube, class_name):
        await scope.set_condition(
            ConditionType.STORAGE_READY,
            "False",
            "StorageNotExpandable",
            f"{plan.condition}, but StorageClass {class_name} does not allow volume expansion "
            "(allowVolumeExpansion: true)",
            warn=EventReason.STORAGE_NOT_EXPANDABLE,
        )
        return Outcome.CONTINUE
    # Recorded before the claims are asked: a restarted operator goes on from the size decided.
    await scope.record_now(
        TYPESENSE_CLUSTER,
        storage={
            "autoGrownTo": plan.size,
            "lastAutoGrowth": wire_time(utcnow()),
            "lastAutoGrowthMessage": plan.message,
        },
    )
    await scope.event("Normal", EventReason.STORAGE_AUTO_GROWN, plan.message)
    return await grow_storage(scope)


def _recreating(cluster: Cluster, size: str) -> str:
    name = cluster.statefulset_name
    return f"recreating StatefulSet {name} with a {size} claim template; its pods keep running"
