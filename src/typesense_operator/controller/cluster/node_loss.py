"""The cluster's node-loss step: a member lost with its Kubernetes node is named, waited for, or
replaced on another node (``spec.nodeLoss``), as the pure decision says
(:mod:`typesense_operator.quorum.node_loss`). The replacement is recorded in status before its pod
and claim are deleted, so a restarted operator never replaces a second member before the first is
healthy."""

from __future__ import annotations

from typing import Any

from operator_core.clock import utcnow, wire_time
from operator_core.pods import pod_ordinal
from operator_core.steps import Outcome
from typesense_operator.api import TYPESENSE_CLUSTER
from typesense_operator.api.reasons import EventReason
from typesense_operator.controller.cluster.nodes import member_hosts
from typesense_operator.controller.cluster.scope import Scope
from typesense_operator.quorum.hosts import Host
from typesense_operator.quorum.model import Action, NodeProbe
from typesense_operator.quorum.node_loss import LostMember, NodeLossPolicy, decide_node_loss
from typesense_operator.resources.core import NODE, node_claim_name

__all__ = ["handle_node_loss"]


async def handle_node_loss(scope: Scope) -> Outcome:
    """Decide and, where the policy says Replace and nothing can be lost, replace one lost member."""
    if scope.plan is None or not scope.nodes:
        return Outcome.CONTINUE
    cluster, now = scope.cluster, utcnow()
    spec = cluster.spec.node_loss
    recorded = dict((scope.obj.get("status") or {}).get("nodeLoss") or {})
    replacing = recorded.get("replacing") or None
    verdict = decide_node_loss(
        NodeLossPolicy(spec.policy if spec is not None else NodeLossPolicy.WAIT),
        spec.delay_seconds if spec is not None else 0,
        await _members(scope),
        cluster.spec.replicas,
        replacing["member"] if replacing else None,
        now,
    )
    scope.node_loss_notes = list(verdict.notes)
    if verdict.next_look_seconds is not None:
        scope.next_look = min(scope.next_look, max(verdict.next_look_seconds, 1.0))
    if verdict.replaced and replacing:
        done = {**replacing, "completedAt": wire_time(now)}
        await scope.record_now(TYPESENSE_CLUSTER, nodeLoss={"replacing": None, "lastReplaced": done})
        await scope.event(
            "Normal",
            EventReason.MEMBER_REPLACEMENT_DONE,
            f"member {done['member']} (pod {done['pod']}) is healthy again on a new volume; it was "
            f"replaced because {done['reason']}",
        )
        return Outcome.CONTINUE
    held = verdict.held if replacing is None else None
    if held != recorded.get("held"):
        # Said once per reason, as a Warning: a person may have to act (a second node lost, say).
        await scope.record_now(TYPESENSE_CLUSTER, nodeLoss={"held": held})
        if held is not None:
            await scope.event("Warning", EventReason.MEMBER_REPLACEMENT_HELD, held)
    if verdict.replace is None:
        return Outcome.CONTINUE
    if scope.plan.action is not Action.NONE:
        return Outcome.CONTINUE  # a quorum step goes first; the member is looked at again after it
    if scope.kube.cache is not None:
        # Deleting a claim decided from a stale view of the pods could delete a live member's data.
        scope.kube.cache.require_synced("replacing a member lost with its node")
    await _replace(scope, verdict.replace)
    return Outcome.CONTINUE


async def _members(scope: Scope) -> list[tuple[NodeProbe, Host]]:
    """Each member's probe and host: those the quorum step probed, and the pods it leaves out because
    they are being deleted, which on a lost node stay Terminating for as long as the node is gone
    (a kubelet confirms a pod's end), and hold their StatefulSet back from making them again."""
    members = [(probe, host) for (_, probe, _), host in zip(scope.nodes, scope.hosts, strict=False)]
    probed = {probe.index for probe, _ in members}
    cluster = scope.cluster
    pods = await scope.kube.list("v1", "Pod", cluster.namespace, labels=cluster.labels(NODE))
    deleting = [
        (index, pod)
        for pod in pods
        if (index := pod_ordinal(pod["metadata"]["name"], cluster.statefulset_name)) is not None
        and index not in probed
        and pod["metadata"].get("deletionTimestamp")
    ]
    hosts = await member_hosts(scope.kube, [pod for _, pod in deleting])
    for (index, _), host in zip(deleting, hosts, strict=True):
        members.append((NodeProbe(index, reachable=False, node_lost=host.lost), host))
    return members


async def _replace(scope: Scope, member: LostMember) -> None:
    cluster = scope.cluster
    pod, claim = cluster.pod_name(member.index), node_claim_name(cluster, member.index)
    record: dict[str, Any] = {
        "member": member.index,
        "pod": pod,
        "node": member.host.name,
        "reason": member.why,
        "startedAt": wire_time(utcnow()),
    }
    await scope.record_now(TYPESENSE_CLUSTER, nodeLoss={"replacing": record})
    # The claim first: it is only marked for deletion while the pod uses it, and goes with the pod.
    # The pod second, at once (grace 0): its node is gone, and no kubelet will confirm a graceful end.
    # The StatefulSet then makes the pod again and, its claim gone, a new claim, bound on a node that
    # can take it.
    await scope.kube.delete("v1", "PersistentVolumeClaim", claim, cluster.namespace)
    await scope.kube.delete("v1", "Pod", pod, cluster.namespace, grace_period=0)
    await scope.event(
        "Warning",
        EventReason.MEMBER_REPLACED,
        f"member {member.index}: {member.why}; deleted pod {pod} and claim {claim}, so that the "
        "StatefulSet makes it again on another node, where it catches up from its peers (spec.nodeLoss)",
    )
