"""The cluster's roll step: the roll planner's next move (:mod:`typesense_operator.quorum.roll`) towards
the StatefulSet's update revision, one pod at a time."""

from __future__ import annotations

from operator_core.clock import utcnow
from operator_core.conditions import reports_true
from operator_core.steps import Outcome
from typesense_operator.api.reasons import ConditionType, EventReason
from typesense_operator.controller.cluster.scope import Scope
from typesense_operator.quorum.model import NodeProbe
from typesense_operator.quorum.record import (
    roll_status,
    roll_under_way,
    roll_waiting_since,
)
from typesense_operator.quorum.roll import RollAction, RollNode, RollSettings, plan_roll

__all__ = ["REVISION_LABEL", "roll_nodes"]

REVISION_LABEL = "controller-revision-hash"
"""The StatefulSet controller's label on each pod: the revision it was made from."""


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
