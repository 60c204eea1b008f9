"""The scope of one reconcile of one TypesenseCluster: what its steps share, what they have found and
decided so far, and when the cluster is to be looked at again. Who uses it: every step of
:mod:`.reconcile`, and :mod:`.restore`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from operator_core.conditions import ConditionStatus
from operator_core.events import EventType
from operator_core.reconciling import WAIT_FOR_CHANGE, Context
from operator_core.steps import Scope as BaseScope
from typesense_operator.api.reasons import ConditionType, EventReason
from typesense_operator.controller.runtime import TypesenseRuntime
from typesense_operator.controller.settings import TypesenseSettings
from typesense_operator.quorum.hosts import Host
from typesense_operator.quorum.model import Action, NodeProbe, Plan
from typesense_operator.quorum.probe import NodeAddressing, NodeTarget
from typesense_operator.resources import Cluster
from typesense_operator.resources.tls import CertificateCopy, NodesTls

__all__ = ["CRD_RECHECK_SECONDS", "ROLL_LOOK_SECONDS", "Scope", "look_again_after"]

ROLL_LOOK_SECONDS = 2.0
"""How soon a cluster in the middle of a roll looks again: for a node catching up, which no watch tells."""
CRD_RECHECK_SECONDS = 15.0
"""How often a cluster that wants a PodMonitor or HTTPRoutes looks for their CRDs again: nothing we
watch tells when Prometheus Operator or the Gateway API is installed."""


def look_again_after(
    *,
    restore_look: float | None,
    rolling: bool,
    stopped_for_user: bool,
    waiting_for_crd: bool,
    quorum_look: float,
) -> float:
    """Seconds until a cluster is looked at again, from what its reconcile found.

    ``stopped_for_user``: the reconcile stopped before its nodes were probed, for what only the user can
    fix (no admin key, a new cluster's certificate): only their change helps. Once the nodes were probed,
    their quorum keeps its own pace whatever else waits for the user: a refused certificate renewal must
    not stall the recovery of a lost majority, whose grace no watch event ends.
    """
    if restore_look is not None:
        return restore_look
    if rolling:
        return min(quorum_look, ROLL_LOOK_SECONDS)
    if stopped_for_user:
        return WAIT_FOR_CHANGE
    if waiting_for_crd:
        return min(quorum_look, CRD_RECHECK_SECONDS)
    return quorum_look


@dataclass(kw_only=True)
class Scope(BaseScope):
    """What one reconcile of one TypesenseCluster knows and has decided so far. Its :attr:`next_look` is
    the resync interval: the quorum, a roll, a restore or a missing CRD ask for a sooner one."""

    cluster: Cluster
    runtime: TypesenseRuntime
    api_key: str | None = None
    members: tuple[int, ...] | None = None
    """Pod ordinals in the nodes list, as the quorum decision wants them (None: not decided)."""
    plan: Plan | None = None
    nodes_answered: bool = False
    """Some node answered this reconcile's probes."""
    nodes_addressable: bool = False
    """Some pod has an IP, so a probe could reach it: without one, only a pod's change can help."""
    served: set[tuple[str, str]] = field(default_factory=set)
    """The optional kinds the spec needs whose CRDs the API server serves (PodMonitor, the Gateway API's,
    cert-manager's Certificate), as the steps found them: the desired state has their children."""
    quorum: dict[str, Any] = field(default_factory=dict)
    observed: dict[str, Any] = field(default_factory=dict)
    waiting_for_user: bool = False
    """A prerequisite only the user can fix (a Secret) is missing or refused: the Secret the spec names
    wakes the cluster when it changes. Before the nodes are probed, only that change can help; after,
    the quorum's own pace goes on (:func:`look_again_after`)."""

    waiting_for_crd: bool = False
    """spec.metrics asks for a PodMonitor, or spec.httpRoutes for routes, whose CRD is not installed (yet)."""
    routes_applied: str | None = None
    """RoutesReady's message once they are applied (None: none requested, or a Gateway API CRD missing)."""

    nodes_tls: NodesTls | None = None
    """The nodes serve their API over TLS (spec.tls, once a certificate passed the check), and the CA
    bundle the cluster's own clients trust them with; None: plain HTTP."""
    certificate_copy: CertificateCopy | None = None
    """The certificate that passed the check this reconcile, for the nodes' copy (None: it stays as is)."""
    certificate_only: bool = False
    """A new cluster waits for its certificate: the apply makes only cert-manager's Certificate."""
    served_before: dict[str, Any] | None = None
    """The checked copy as it was before this reconcile (None: there was none)."""

    generated_key: str | None = None
    """An admin key generated this reconcile: its Secret is created, never applied, with the children."""
    claim_size: str | None = None
    """The size the StatefulSet's claim template keeps (None: the spec's)."""

    nodes: list[tuple[NodeTarget, NodeProbe, dict[str, Any]]] = field(default_factory=list)
    """Each node's target, probe and pod, as this reconcile's quorum step saw them."""
    hosts: list[Host] = field(default_factory=list)
    """The Kubernetes node of each of :attr:`nodes`, in the same order."""
    node_loss_notes: list[str] = field(default_factory=list)
    """What the node-loss step says after the lost nodes' notes in Ready's message."""
    roll: dict[str, Any] | None = None
    """status.roll as this reconcile leaves it (None: as it was)."""
    rolling: bool = False
    """A roll is under way: the next look comes soon (the pods' changes wake the cluster too)."""
    restore: dict[str, Any] | None = None
    """status.restore as this reconcile leaves it (None: as it was)."""
    restore_look: float | None = None
    """The restore waits for something that wakes nothing (its backup, its pod's last status): look
    again this soon."""
    restore_not_served: list[str] = field(default_factory=list)
    """After a restore, what keeps Ready False until every node serves the restored data."""

    @classmethod
    def of(cls, obj: dict[str, Any], context: Context) -> Scope:
        return cls(
            **BaseScope.parts(obj, context),
            cluster=Cluster.from_object(obj),
            runtime=context.runtime_of(TypesenseRuntime),
        )

    @property
    def settings(self) -> TypesenseSettings:
        return self.runtime.settings

    @property
    def addressing(self) -> NodeAddressing:
        return self.runtime.addressing

    @property
    def requeue_after(self) -> float:
        return look_again_after(
            restore_look=self.restore_look,
            rolling=self.rolling,
            stopped_for_user=self.waiting_for_user and self.plan is None,
            waiting_for_crd=self.waiting_for_crd,
            quorum_look=self._quorum_look,
        )

    @property
    def _quorum_look(self) -> float:
        if self.plan is None:
            return self.next_look
        if not self.nodes_addressable and self.plan.action is Action.NONE:
            # Nothing to probe yet: a pod that gets its IP (or any other change of a pod) wakes the loop.
            return self.next_look
        return min(self.plan.requeue_after, self.next_look)

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
