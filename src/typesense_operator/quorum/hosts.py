"""The Kubernetes nodes the members run on, as the control plane sees them: whether each is Ready, its
kubelet stopped reporting (unreachable), it is marked out of service, or it is gone. Pure: the Node
objects (or their absence) in, one :class:`Host` per member out, and the sentences the cluster's
status says of the ones that are not Ready.

A member is probed by the operator itself, so the probe says whether Typesense answers. What a probe
cannot say is why a member is silent, or that one that answers sits on a node the control plane has
lost (its kubelet cut off, its containers still running): the Node does. Both are said in the status,
naming the node, so that nobody reads "2/3 members healthy" without knowing that node-a went dark.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from operator_core.clock import parse_wire_time, wire_time

__all__ = [
    "HOST_FIELDS",
    "NODE_HEARTBEAT_SILENT_SECONDS",
    "OUT_OF_SERVICE_TAINT",
    "UNREACHABLE_TAINT",
    "Host",
    "HostState",
    "heartbeat_silent",
    "host_notes",
    "host_of",
]

OUT_OF_SERVICE_TAINT = "node.kubernetes.io/out-of-service"
"""Kubernetes' taint for a node a person declared shut down for good (non-graceful node shutdown)."""
UNREACHABLE_TAINT = "node.kubernetes.io/unreachable"
NODE_HEARTBEAT_SILENT_SECONDS = 20.0
"""How long a node's kubelet may go without renewing its Lease (kube-node-lease) before the node is
taken for dark. A kubelet renews it every 10 s (a quarter of its 40 s duration): two missed renewals.
The node controller waits its grace (40 s, and 5 s more) before it calls the node unreachable."""
HOST_FIELDS = ("spec.taints", "spec.unschedulable", "status.conditions")
"""All that is read of a Node, and all its watch cache holds (not its images, volumes or addresses)."""


class HostState(StrEnum):
    READY = "Ready"
    NOT_READY = "NotReady"
    """Its kubelet reports it not ready (a runtime down, a network plugin not ready)."""
    UNREACHABLE = "Unreachable"
    """Its kubelet stopped reporting: a power cut, a crashed kubelet, or one cut off from the API server
    (whose containers may still run)."""
    OUT_OF_SERVICE = "OutOfService"
    """Tainted out-of-service: a person says it is shut down and will not come back as it was."""
    GONE = "Gone"
    """The Node object does not exist any more (a machine removed from the cluster)."""
    UNKNOWN = "Unknown"
    """The operator could not read the Node (not permitted, or the member has no node yet)."""


_TELLING = {
    HostState.NOT_READY: "is NotReady",
    HostState.UNREACHABLE: "is unreachable (its kubelet stopped reporting)",
    HostState.OUT_OF_SERVICE: "is tainted out-of-service",
    HostState.GONE: "no longer exists",
}


@dataclass(frozen=True)
class Host:
    """The Kubernetes node one member's pod is bound to."""

    name: str | None
    state: HostState
    since: datetime | None = None
    """When its Ready condition last changed (the taint's time for out-of-service, where given)."""
    cordoned: bool = False

    @property
    def lost(self) -> bool:
        """Not Ready, as far as the control plane knows: what it runs may be dead or cut off."""
        return self.state not in (HostState.READY, HostState.UNKNOWN)


def host_of(node_name: str | None, node: Mapping[str, Any] | None, *, readable: bool = True) -> Host:
    """The state of ``node_name`` from its Node object (``node`` None: none exists, or, with
    ``readable`` False, the operator may not read it)."""
    if not node_name or not readable:
        return Host(node_name, HostState.UNKNOWN)
    if node is None:
        return Host(node_name, HostState.GONE)
    spec, status = node.get("spec") or {}, node.get("status") or {}
    cordoned = bool(spec.get("unschedulable"))
    for taint in spec.get("taints") or ():
        if taint.get("key") == OUT_OF_SERVICE_TAINT:
            added = parse_wire_time(taint.get("timeAdded"))
            return Host(node_name, HostState.OUT_OF_SERVICE, added, cordoned)
    ready = next((c for c in status.get("conditions") or () if c.get("type") == "Ready"), None)
    since = parse_wire_time((ready or {}).get("lastTransitionTime"))
    if ready is None or ready.get("status") == "Unknown":
        return Host(node_name, HostState.UNREACHABLE, since, cordoned)
    if ready.get("status") != "True":
        return Host(node_name, HostState.NOT_READY, since, cordoned)
    return Host(node_name, HostState.READY, since, cordoned)


def heartbeat_silent(lease: Mapping[str, Any] | None, now: datetime) -> bool:
    """Whether a node's kubelet stopped renewing its Lease (``lease``: the Lease named after the node in
    kube-node-lease) :data:`NODE_HEARTBEAT_SILENT_SECONDS` ago or more, before the node controller's
    grace runs out. No Lease, or none renewed: not known to be silent."""
    renewed = parse_wire_time(((lease or {}).get("spec") or {}).get("renewTime"))
    return renewed is not None and (now - renewed).total_seconds() >= NODE_HEARTBEAT_SILENT_SECONDS


def host_notes(members: Sequence[tuple[int, str, bool, Host]]) -> list[str]:
    """What the status says of each member whose node is lost: ``(ordinal, pod, answering, host)``
    each, in ordinal order, as "member 1 (pod search-1) does not answer: its node node-b is
    unreachable (its kubelet stopped reporting) since 2026-12-02T05:01:02Z". A time, not an age: the
    same state reads the same at every look, and costs no write."""
    notes = []
    for index, pod, answering, host in sorted(members, key=lambda member: member[0]):
        if not host.lost:
            continue
        how_long = f" since {wire_time(host.since)}" if host.since is not None else ""
        said = "answers the operator, but" if answering else "does not answer:"
        telling = f"{_TELLING[host.state]}{how_long}"
        notes.append(f"member {index} (pod {pod}) {said} its node {host.name} {telling}")
    return notes
