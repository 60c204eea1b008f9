"""Whether to replace a member lost with its Kubernetes node (``spec.nodeLoss``). Pure: the members'
probes and hosts, the policy, the replacement under way and the time in; a :class:`NodeLossVerdict`
out, table-tested in tests/unit/test_typesense_node_loss.py.

A member on a node that is gone for good never starts again where its volume is, when the volume is
local (local-path, local PVs, instance stores): its pod is pinned by the volume's node affinity, and
the StatefulSet waits for it forever. Replacing it means deleting its pod and its claim, so that the
StatefulSet makes both again on a node that can take them, where the new member catches up from its
peers. That deletes the member's data, so it is done only when nothing can be lost by it:

- the policy says Replace (opt-in), and the node has been lost for the delay, or a person tainted it
  out-of-service, or its Node object is gone;
- the member does not answer: one that answers may still be writing (a kubelet cut off from the API
  server leaves its containers running), and is never replaced;
- the other members are a healthy quorum without it: a leader among them, each of them answering and
  healthy, and a majority of the desired members. Every acknowledged write is then on a majority of
  those, so the lost member's copy is not needed; and a member cut off from them cannot commit a write;
- no other replacement is under way: one member at a time, the next only once the last is healthy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum

from operator_core.clock import wire_time
from typesense_operator.quorum.hosts import Host, HostState
from typesense_operator.quorum.model import NodeProbe

__all__ = ["LostMember", "NodeLossPolicy", "NodeLossVerdict", "decide_node_loss"]


class NodeLossPolicy(StrEnum):
    WAIT = "Wait"
    REPLACE = "Replace"


@dataclass(frozen=True)
class LostMember:
    """A member whose node is lost, and when it would be (or is) due for replacement."""

    index: int
    host: Host
    due_at: datetime | None
    """None: due at once (out-of-service, or its Node is gone)."""
    answering: bool

    def due(self, now: datetime) -> bool:
        return self.due_at is None or now >= self.due_at

    @property
    def why(self) -> str:
        since = f" since {wire_time(self.host.since)}" if self.host.since is not None else ""
        return f"its node {self.host.name} is {self.host.state.value}{since}"


@dataclass(frozen=True)
class NodeLossVerdict:
    lost: tuple[LostMember, ...] = ()
    """Every member whose node is lost, in ordinal order."""
    replace: LostMember | None = None
    """The member to replace now (its pod and claim deleted)."""
    replaced: bool = False
    """The replacement under way is over: its member answers healthy."""
    held: str | None = None
    """Why a member due for replacement is not replaced now."""
    next_look_seconds: float | None = None
    """When the next member falls due (None: nothing to wait for)."""
    notes: tuple[str, ...] = field(default=())
    """What the status says about it, after the lost nodes' own notes."""


def decide_node_loss(
    policy: NodeLossPolicy,
    delay_seconds: float,
    members: Sequence[tuple[NodeProbe, Host]],
    desired: int,
    replacing: int | None,
    now: datetime,
) -> NodeLossVerdict:
    """Whom to replace, if anyone (module docstring). ``members``: each member's probe and host, by
    ordinal; ``replacing``: the ordinal of the replacement under way (None: none)."""
    lost = tuple(
        LostMember(probe.index, host, _due_at(host, delay_seconds), probe.reachable)
        for probe, host in sorted(members, key=lambda member: member[0].index)
        if host.lost
    )
    healthy = {probe.index for probe, _ in members if probe.reachable and probe.health_ok is True}
    if replacing is not None:
        if replacing in healthy:
            return NodeLossVerdict(lost, replaced=True)
        return NodeLossVerdict(
            lost,
            held=f"member {replacing} is being replaced: the next waits until it is healthy",
            notes=(f"member {replacing} is being replaced (spec.nodeLoss) and catches up from its peers",),
        )
    if not lost:
        return NodeLossVerdict()
    if policy is not NodeLossPolicy.REPLACE:
        return NodeLossVerdict(lost, notes=("spec.nodeLoss.policy is Wait: nothing is replaced",))
    waiting = [member.due_at for member in lost if not member.due(now) and member.due_at is not None]
    next_look = min(((due - now).total_seconds() for due in waiting), default=None)
    for member in lost:
        if not member.due(now):
            continue
        if member.answering:
            return _held(lost, next_look, f"member {member.index} still answers: it may be writing")
        others = [(probe, host) for probe, host in members if probe.index != member.index]
        held = _not_a_healthy_quorum(others, healthy, desired)
        if held is not None:
            return _held(lost, next_look, f"member {member.index} is due for replacement, but {held}")
        return NodeLossVerdict(lost, replace=member, next_look_seconds=next_look)
    due_notes = tuple(
        f"member {member.index} is replaced at {wire_time(member.due_at)} unless its node comes back"
        for member in lost
        if member.due_at is not None and not member.due(now)
    )
    return NodeLossVerdict(lost, next_look_seconds=next_look, notes=due_notes)


def _due_at(host: Host, delay_seconds: float) -> datetime | None:
    if host.state in (HostState.OUT_OF_SERVICE, HostState.GONE) or host.since is None:
        return None
    return host.since + timedelta(seconds=delay_seconds)


def _not_a_healthy_quorum(
    others: Sequence[tuple[NodeProbe, Host]], healthy: set[int], desired: int
) -> str | None:
    """Why the members other than the one to replace are not a healthy quorum (None: they are)."""
    sick = sorted(probe.index for probe, _ in others if probe.index not in healthy)
    if sick:
        return f"member(s) {', '.join(map(str, sick))} are not healthy: never two at once"
    if not any(probe.state == "LEADER" for probe, _ in others):
        return "the other members have no leader"
    if len(others) < desired // 2 + 1:
        return f"{len(others)} other member(s) are not a majority of {desired}"
    return None


def _held(lost: tuple[LostMember, ...], next_look: float | None, why: str) -> NodeLossVerdict:
    return NodeLossVerdict(lost, held=why, next_look_seconds=next_look, notes=(f"not replaced: {why}",))
