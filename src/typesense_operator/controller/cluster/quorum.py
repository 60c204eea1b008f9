"""The cluster's quorum step: probe the nodes, let the pure decision (:mod:`typesense_operator.quorum.decide`)
say who the raft members are, and take the step it decides. Recovery is a rewrite of the nodes list; the
one destructive step (restarting a survivor's pod) is recorded in status before it is taken, so a
restarted operator never takes it twice."""

from __future__ import annotations

from dataclasses import replace

from operator_core.clock import utcnow
from operator_core.steps import Outcome
from typesense_operator.api import TYPESENSE_CLUSTER
from typesense_operator.api.reasons import EventReason
from typesense_operator.controller.cluster.nodes import (
    member_hosts,
    node_targets,
    probe_cluster,
    with_node_heartbeats,
)
from typesense_operator.controller.cluster.scope import Scope
from typesense_operator.controller.metrics import RECOVERIES, observe_quorum
from typesense_operator.quorum.decide import decide
from typesense_operator.quorum.model import Action, Plan, QuorumSettings
from typesense_operator.quorum.record import record_from_status, status_from_plan

__all__ = ["manage_quorum"]


async def manage_quorum(scope: Scope) -> Outcome:
    """Probe the nodes, decide the raft members, and take the decided step (recorded first if destructive)."""
    cluster = scope.cluster
    assert scope.api_key is not None
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
    seen = scope.runtime.commits.recall(cluster.namespace, cluster.name, uid)
    remembered = max(filter(None, (record.committed, seen)), default=None)
    record = replace(record, committed=remembered)
    now = utcnow()  # after the probes: a grace is counted to what they saw
    probes = scope.runtime.silences.stamp(cluster.namespace, cluster.name, uid, probes, now)
    scope.hosts = await member_hosts(scope.kube, target_pods)
    probes = [replace(probe, node_lost=host.lost) for probe, host in zip(probes, scope.hosts, strict=True)]
    plan = decide(probes, cluster.spec.replicas, record, now, settings)
    if plan.action is Action.RESTART_ERRORED:
        # Before a silent member is taken for hung: did its whole node go dark, so recently that the
        # control plane still calls it Ready? Its kubelet's heartbeat says so before the node
        # controller's grace is over; such a member is not restarted (spec.nodeLoss is for it).
        probes = await with_node_heartbeats(scope.kube, probes, scope.hosts, plan.restarted, now)
        plan = decide(probes, cluster.spec.replicas, record, now, settings)
    if plan.record.committed is not None:
        scope.runtime.commits.keep(cluster.namespace, cluster.name, uid, plan.record.committed)
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
        elif plan.action is Action.RESTART_HELD_BACK:
            await _restart_held_back(scope, plan)
        elif plan.action is Action.HOLD and changed_action:
            await scope.event("Warning", EventReason.QUORUM_SURGERY_HELD, plan.message)
            RECOVERIES.labels(plan.action.value, "needed").inc()
    except Exception:
        RECOVERIES.labels(plan.action.value, "failed").inc()
        raise
    if plan.action in (
        Action.DOWNGRADE,
        Action.UPGRADE,
        Action.RESTART_SURVIVOR,
        Action.RESTART_ERRORED,
        Action.RESTART_HELD_BACK,
    ):
        RECOVERIES.labels(plan.action.value, "taken").inc()
    return Outcome.CONTINUE


async def _restart_survivor(scope: Scope, plan: Plan) -> None:
    """The last resort, taken once: the record says so before the pod is deleted."""
    cluster = scope.cluster
    assert plan.survivor is not None
    await scope.record_now(TYPESENSE_CLUSTER, quorum=scope.quorum)
    pod = cluster.pod_name(plan.survivor)
    await _delete_stuck_pod(scope, pod)
    await scope.event("Warning", EventReason.QUORUM_SURVIVOR_RESTARTED, f"{plan.message}: deleted pod {pod}")


async def _restart_errored(scope: Scope, plan: Plan) -> None:
    """Delete the pods of members whose raft stopped, or that hang; their StatefulSet makes them again,
    on their volumes."""
    await _restart_pods(scope, plan, EventReason.ERRORED_NODE_RESTARTED)


async def _restart_held_back(scope: Scope, plan: Plan) -> None:
    """Delete the pods of a majority held back in a crash-loop back-off, recorded first (it is done once):
    their StatefulSet makes them again at once, on their volumes."""
    await scope.record_now(TYPESENSE_CLUSTER, quorum=scope.quorum)
    await _restart_pods(scope, plan, EventReason.HELD_BACK_NODE_RESTARTED)


async def _restart_pods(scope: Scope, plan: Plan, reason: EventReason) -> None:
    for index in plan.restarted:
        pod = scope.cluster.pod_name(index)
        if await _delete_stuck_pod(scope, pod):
            await scope.event("Warning", reason, f"deleted pod {pod}: {plan.message}")


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
