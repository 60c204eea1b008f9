"""The roll planner: which node of a Typesense cluster to restart next for a new pod template, if any.
Pure: no I/O, no clock.

A StatefulSet's own rolling update sees readiness only. This planner sees raft:

- nothing is restarted while the cluster is not ``QuorumReady``, nor while a restarted node is not
  back (its pod Ready, a FOLLOWER whose /health is ok, its committed index within
  ``catch_up_entries`` of the leader's, and its address, new after a restart, in the leader's raft
  configuration), nor while that
  configuration names an address that no node has any more. A node back at a new address follows
  nobody until the leader's next nodes-file refresh (every 10 s) puts it in the configuration, and
  its committed index only looks caught up; restarting another node before that leaves a
  configuration whose reachable members are no majority: no leader can be elected, and quorum
  recovery has to step in, in the middle of a roll;
- an outdated node that is not caught up goes first: restarting it costs no caught-up node;
- a caught-up node is restarted only if a majority stays caught up without it;
- followers before the leader, and the leader last, once every follower runs the new revision and
  is caught up: raft then elects one of them within its election timeout. Typesense's
  ``POST /operations/vote`` cannot hand leadership over first: on typesense-server 0.24.1 it calls
  braft's ``Node::vote``, which only resets the follower's election timer, and no election starts
  while the leader's heartbeats arrive (tried: "Triggered vote. Ok? 1", and the leader unchanged);
- a node that does not come back within ``back_within_seconds`` pauses the roll, with the reason.

Its inputs are observations only (each pod's revision against the StatefulSet's update revision, and
the probes), so an operator restarted in the middle of a roll resumes it where it stopped.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from typesense_operator.quorum.decide import majority
from typesense_operator.quorum.model import NodeProbe

__all__ = ["RollAction", "RollNode", "RollPlan", "RollSettings", "plan_roll"]


class RollAction(StrEnum):
    DONE = "Done"
    """Every node runs the update revision."""
    WAIT = "Wait"
    """A node is coming back, or the cluster is not QuorumReady: look again soon."""
    RESTART = "Restart"
    """Delete this node's pod: the StatefulSet makes it again from the update revision."""
    PAUSE = "Pause"
    """A node did not come back in time: nothing more is restarted until it does."""


@dataclass(frozen=True)
class RollNode:
    """One node as observed: its pod and what it answered."""

    probe: NodeProbe
    revision: str | None
    """The pod's ``controller-revision-hash`` label; None without a pod."""
    ready: bool = False
    """The pod's Ready condition."""
    deleting: bool = False
    """The pod has a deletionTimestamp: it is being replaced."""

    @property
    def index(self) -> int:
        return self.probe.index


@dataclass(frozen=True)
class RollSettings:
    catch_up_entries: int = 100
    """How far behind the leader's committed index a node may be and still count as caught up."""
    back_within_seconds: float = 300.0
    """How long a restarted node may take to come back before the roll pauses."""


@dataclass(frozen=True)
class RollPlan:
    action: RollAction
    node: int | None
    """The node to restart, or the one waited for."""
    message: str
    done: tuple[int, ...]
    """Nodes that run the update revision."""
    to_do: tuple[int, ...]
    """Nodes still to restart."""


def _caught_up(node: RollNode, leader: NodeProbe | None, settings: RollSettings) -> bool:
    probe = node.probe
    if leader is None or not node.ready or node.deleting or not probe.reachable:
        return False
    if probe.index == leader.index:
        return True
    if probe.state != "FOLLOWER" or probe.committed_index is None or leader.committed_index is None:
        return False
    if not probe.health_ok:
        # Typesense's own verdict that it is not caught up (or out of a resource); the pod's Ready
        # condition can still say True for a probe period after a node was frozen or fell behind.
        return False
    if not _in_configuration(probe, leader):
        return False
    return leader.committed_index - probe.committed_index <= settings.catch_up_entries


def _in_configuration(probe: NodeProbe, leader: NodeProbe) -> bool:
    """Whether the leader's raft configuration names the node's current address (unknown: no)."""
    return leader.raft_peers is not None and probe.address is not None and probe.address in leader.raft_peers


def _stale_peers(nodes: Sequence[RollNode], leader: NodeProbe) -> list[str] | None:
    """The addresses in the leader's raft configuration that no node has now; None when unknown."""
    if leader.raft_peers is None:
        return None
    current = {node.probe.address for node in nodes if node.probe.address is not None}
    return [peer for peer in leader.raft_peers if peer not in current]


def _not_caught_up(node: RollNode, leader: NodeProbe) -> str:
    probe = node.probe
    if not node.ready:
        return "its pod is not Ready"
    if not probe.reachable:
        return "it does not answer"
    if probe.state != "FOLLOWER":
        return f"its raft state is {probe.state}"
    if not probe.health_ok:
        return "its /health is not ok"
    if not _in_configuration(probe, leader):
        return f"the leader's raft configuration does not name its address {probe.address} yet"
    return f"committed index {probe.committed_index}, the leader's {leader.committed_index}"


def plan_roll(
    nodes: Sequence[RollNode],
    update_revision: str,
    *,
    quorum_ready: bool,
    waiting_since: datetime | None,
    now: datetime,
    settings: RollSettings | None = None,
) -> RollPlan:
    """The next step of a roll to ``update_revision``; ``waiting_since`` is when the current wait for
    a node to come back began (kept by the caller), None when there is no such wait."""
    settings = settings or RollSettings()
    ordered = sorted(nodes, key=lambda n: n.index)
    done = tuple(n.index for n in ordered if n.revision == update_revision and not n.deleting)
    to_do = tuple(n.index for n in ordered if n.index not in done)
    if not to_do:
        return RollPlan(RollAction.DONE, None, f"every node runs revision {update_revision}", done, to_do)

    leaders = [n.probe for n in ordered if n.probe.state == "LEADER"]
    leader = leaders[0] if len(leaders) == 1 else None
    caught_up = {n.index for n in ordered if _caught_up(n, leader, settings)}
    # A node already restarted (current revision, or being replaced) that is not back holds the roll.
    coming_back = [n.index for n in ordered if (n.index in done or n.deleting) and n.index not in caught_up]
    if coming_back:
        names = ", ".join(map(str, coming_back))
        waited = (now - waiting_since).total_seconds() if waiting_since is not None else 0.0
        if waited >= settings.back_within_seconds:
            return RollPlan(
                RollAction.PAUSE,
                coming_back[0],
                f"paused: node(s) {names} did not come back within {settings.back_within_seconds:.0f} s "
                "(Ready, following the leader, caught up); the roll goes on once they are",
                done,
                to_do,
            )
        first = next(n for n in ordered if n.index == coming_back[0])
        why = f" (node {first.index}: {_not_caught_up(first, leader)})" if leader is not None else ""
        return RollPlan(
            RollAction.WAIT, coming_back[0], f"waiting for node(s) {names} to come back{why}", done, to_do
        )
    if not quorum_ready or leader is None:
        return RollPlan(
            RollAction.WAIT, None, "no node is restarted while the cluster is not QuorumReady", done, to_do
        )
    stale = _stale_peers(ordered, leader)
    if stale is None or stale:
        known = (
            "cannot be read" if stale is None else f"still names {', '.join(stale)}, which no node has now"
        )
        return RollPlan(
            RollAction.WAIT,
            None,
            f"no node is restarted while the leader's raft configuration {known}: the nodes left could "
            "be no majority of it",
            done,
            to_do,
        )

    outdated = [n for n in ordered if n.index in to_do]
    lagging = [n for n in outdated if n.index not in caught_up]
    if lagging:
        first = lagging[0]
        why = _not_caught_up(first, leader)
        return RollPlan(
            RollAction.RESTART,
            first.index,
            f"restarting node {first.index} first: it is not caught up anyway ({why})",
            done,
            to_do,
        )
    if len(ordered) == 1:
        return RollPlan(
            RollAction.RESTART,
            ordered[0].index,
            f"restarting node {ordered[0].index}: a single node has no follower to take over, and the "
            "cluster is unavailable until it is back",
            done,
            to_do,
        )
    # Every node is caught up by now (one that is not is coming back or goes first); kept as the rule.
    if len(caught_up) - 1 < majority(len(ordered)):
        return RollPlan(
            RollAction.WAIT,
            None,
            f"only {len(caught_up)} of {len(ordered)} nodes are caught up: restarting one would leave "
            "less than a majority",
            done,
            to_do,
        )
    followers = [n for n in outdated if n.index != leader.index]
    if followers:
        node = followers[0].index
        return RollPlan(RollAction.RESTART, node, f"restarting follower {node}", done, to_do)
    # Only the leader is left, and every follower is caught up: raft elects one of them.
    return RollPlan(
        RollAction.RESTART,
        leader.index,
        f"restarting leader {leader.index} last: raft elects one of the caught-up followers",
        done,
        to_do,
    )
