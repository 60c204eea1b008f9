"""Taking over a cluster whose StatefulSet another controller made (the Go typesense-operator 0.4.1).

Its StatefulSet selects the pods by ``app: {name}-sts``; ours by name, instance and component. A
StatefulSet's selector cannot change, so the foreign one is replaced: its pods are first given our
labels (a label change restarts nothing), then it is deleted with its pods orphaned, and the next
reconcile creates ours under the same name, which adopts the running pods and binds the same claims
(``data-{name}-sts-{i}``: the same claim template name on both sides). The roll then restarts the
adopted pods one at a time, the leader last, because their revision is not ours.

The pods are labelled before anything else is applied: our Services select by our labels, and
switching them to pods without those labels would take the pods' DNS names away, by which the nodes
list names a pod that has no address yet. A proxy Deployment with a foreign selector is replaced the
same way (it holds no data).

:func:`plan_takeover` is pure; :func:`take_over` is the reconcile step.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from operator_core.steps import Outcome
from typesense_operator.api.reasons import EventReason
from typesense_operator.controller.cluster.scope import Scope
from typesense_operator.resources.core import NODE
from typesense_operator.resources.ingress import PROXY

__all__ = ["TakeOver", "foreign_selector", "plan_takeover", "take_over"]

Manifest = Mapping[str, Any]


def foreign_selector(live: Manifest | None, ours: Mapping[str, str]) -> dict[str, str] | None:
    """The live workload's selector when it is not ours (another controller made it); None when it is
    ours, or there is no live workload."""
    if live is None or (live.get("metadata") or {}).get("deletionTimestamp"):
        return None
    selector = ((live.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
    return None if dict(selector) == dict(ours) else dict(selector)


@dataclass(frozen=True)
class TakeOver:
    """What to do to a StatefulSet another controller made."""

    label: tuple[str, ...]
    """Pods to give our labels first (the ordinals of this StatefulSet that lack them)."""
    message: str


def plan_takeover(
    statefulset: str, selector: Mapping[str, str], ours: Mapping[str, str], pods: Sequence[Manifest]
) -> TakeOver:
    """Which of the foreign StatefulSet's pods (those its ``selector`` selects) need our labels before
    it is replaced, and what to tell the user. Only the StatefulSet's own ordinals are touched."""
    prefix = f"{statefulset}-"
    label = []
    for pod in pods:
        name = pod["metadata"]["name"]
        labels = pod["metadata"].get("labels") or {}
        if not name.startswith(prefix) or not name[len(prefix) :].isdigit():
            continue
        if any(labels.get(key) != value for key, value in ours.items()):
            label.append(name)
    foreign = ", ".join(f"{key}={value}" for key, value in sorted(selector.items()))
    message = (
        f"StatefulSet {statefulset} was made by another controller (selector {foreign}): its pods get "
        f"this operator's labels{f' ({len(label)} now)' if label else ''}, then it is replaced without its "
        "pods or volumes; the new one adopts the running pods, and the roll restarts them one at a time, "
        "the leader last"
    )
    return TakeOver(tuple(sorted(label)), message)


async def take_over(scope: Scope) -> Outcome:
    """Replace workloads another controller made for this cluster (the Go operator's StatefulSet and
    proxy Deployment), whose selectors ours cannot apply over: controller/cluster/takeover.py says how."""
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
