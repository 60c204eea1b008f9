"""The quorum's vocabulary: what a node answered (:class:`NodeProbe`), what the operator remembers between
reconciles (:class:`QuorumRecord`), its settings, and the plan a decision gives (:class:`Plan`, its
:class:`ClusterState` and :class:`Action`). Pure data: the decision (:mod:`.decide`), the probes
(:mod:`.probe`), the roll, the record, the backups and the controller all speak it, and none of them
needs the decision itself for a type.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

from typesense_operator.api.reasons import ReadyReason

__all__ = [
    "HELD_BACK_REASONS",
    "RESTARTABLE_HELD_BACK_REASON",
    "Action",
    "ClusterState",
    "NodeProbe",
    "Plan",
    "QuorumRecord",
    "QuorumSettings",
]


class ClusterState(StrEnum):
    OK = "OK"
    """Exactly one member is LEADER."""
    SPLIT_BRAIN = "SPLIT_BRAIN"
    """More than one member claims to be LEADER."""
    NOT_READY = "NOT_READY"
    """No leader, and more members than raft tolerates are NOT_READY or unreachable."""
    ELECTION_DEADLOCK = "ELECTION_DEADLOCK"
    """No leader, though enough members answer."""


class Action(StrEnum):
    NONE = "None"
    """Nothing to change: healthy, or waiting for raft to heal itself."""
    DOWNGRADE = "Downgrade"
    """Rewrite the nodes list to the single survivor."""
    UPGRADE = "Upgrade"
    """Grow the nodes list back towards every desired node."""
    RESTART_SURVIVOR = "RestartSurvivor"
    """Last resort: delete the survivor's pod, once, because a one-node list did not elect it."""
    NEEDS_INTERVENTION = "NeedsIntervention"
    """A node is out of memory or disk: no surgery, a person must act."""
    HOLD = "Hold"
    """Surgery is due, but kubelets report Ready pods that the operator cannot reach: wait for agreement."""
    RESTART_ERRORED = "RestartErrored"
    """Delete the pods of members whose raft stopped (state ERROR), or whose process hangs (it runs,
    and answers neither the operator nor its kubelet): only a restart brings them back."""
    RESTART_HELD_BACK = "RestartHeldBack"
    """Delete the pods of a majority their kubelets hold back in a crash-loop back-off, once: new pods
    run at once on the same volumes, and raft heals with every acknowledged write, which a minority
    kept by a downgrade may lack."""


@dataclass(frozen=True)
class NodeProbe:
    """What one node answered. ``reachable`` is False when neither endpoint answered at all."""

    index: int
    reachable: bool
    state: str | None = None
    """``state`` of /status: LEADER, FOLLOWER, CANDIDATE, NOT_READY, ..."""
    committed_index: int | None = None
    health_ok: bool | None = None
    """``ok`` of /health."""
    resource_error: str | None = None
    """``resource_error`` of /health: OUT_OF_MEMORY or OUT_OF_DISK (newer Typesense releases)."""
    kubelet_ready: bool = False
    """The pod's Ready condition: what its kubelet's readiness probe last saw, from inside the node."""
    last_log: tuple[int, int] | None = None
    """(term, index) of the last entry in the node's raft log (braft's /raft_stat)."""
    raft_peers: tuple[str, ...] | None = None
    """``ip:peering_port`` of every peer in the node's raft configuration (braft's /raft_stat)."""
    address: str | None = None
    """This node's own ``ip:peering_port`` now (its pod's IP): where its peers must reach it."""
    held_back: str | None = None
    """Why its kubelet keeps the Typesense container from running for a while (a waiting reason of
    :data:`HELD_BACK_REASONS`, such as CrashLoopBackOff); None while it runs or is about to start."""
    running_since: datetime | None = None
    """When its Typesense container started, as its kubelet reports; None when it does not run."""
    unready_since: datetime | None = None
    """Since when its kubelet has reported the pod not Ready (the Ready condition's last transition),
    while it does; None while it is Ready."""
    disk_used_bytes: int | None = None
    """Bytes used on its data volume (/metrics.json): for the status view, spec.storage.autoGrow, and
    whether a member in raft state ERROR has room again."""
    disk_total_bytes: int | None = None
    """Size of its data volume (/metrics.json)."""
    certificate_serial: str | None = None
    """The serial of the certificate its API served this probe (spec.tls; None: plain, or not seen)."""
    status_silent: bool = False
    """/status gave no answer at all (timed out, refused) while /health answered: what the probe saw
    this time. A node starting or loading answers /status (NOT_READY); a hung raft does not."""
    status_silent_since: datetime | None = None
    """Since when /status has been silent while its /health said ok, look after look, by the
    operator's own clock (controller/cluster/nodes.py's SilenceMemory); None when it answered last time."""
    unreachable_since: datetime | None = None
    """Since when it has answered nothing at all, look after look, by the operator's own clock; None
    when it answered last time."""
    node_lost: bool = False
    """Its pod's Kubernetes node is lost (NotReady, unreachable, out of service or gone:
    :mod:`.hosts`): what its kubelet last reported of it (running, held back) is stale, and a delete
    of its pod cannot complete while the node is gone. spec.nodeLoss decides what becomes of it."""
    node_silent: bool = False
    """Its node's kubelet stopped renewing its heartbeat (:func:`.hosts.heartbeat_silent`) while the
    control plane still calls the node Ready: the node went dark within the node controller's grace.
    Read only before a silent member would be taken for hung (controller/cluster/quorum.py)."""


@dataclass(frozen=True)
class QuorumRecord:
    """What the operator remembers between reconciles, kept in the cluster's status."""

    members: tuple[int, ...] = ()
    """Pod ordinals in the nodes list now; empty means every desired node."""
    unhealthy_since: datetime | None = None
    """When the current leaderless (or split-brain) stretch was first seen, once no member was loading."""
    loading_since: datetime | None = None
    """When members were first seen loading (reachable, with no raft state yet)."""
    survivor: int | None = None
    """The node a downgrade kept, while the cluster is downgraded or growing back."""
    downgraded_at: datetime | None = None
    """When the survivor was chosen; cleared once a leader is seen. While set, the survivor has its own
    wait (no second downgrade), even after the list grew early."""
    survivor_restarted: bool = False
    """Whether the last-resort pod restart was already done for this downgrade."""
    held_back_restarted: bool = False
    """Whether the pods of a majority held back in a crash-loop back-off were restarted in this stretch
    without a leader (:attr:`Action.RESTART_HELD_BACK`, done once; a downgrade follows if they are held
    back again)."""
    committed: tuple[int, int] | None = None
    """(term, index): the furthest a leader was seen to have committed (its last log term, its
    committed index). Every acknowledged write up to there is in a node's log only if that log is at
    least as up to date (raft's own comparison); a downgrade never keeps a node whose log is behind."""


@dataclass(frozen=True)
class QuorumSettings:
    grace_seconds: float = 20.0
    """How long a leaderless or split-brain state must last before a downgrade."""
    survivor_elects_within_seconds: float = 30.0
    """How long a one-member list may go without a leader before the survivor's pod is restarted once
    (never less than the grace). The survivor reads its nodes file every 10 s, and a read while it
    still follows its dead leader (until its election timer fires) changes nothing: the kubelet's
    sync, two reads, a pre-vote and an election (seen: 19 s from the downgrade) must fit."""
    loading_limit_seconds: float = 600.0
    """How long reachable-but-loading (NOT_READY) members may hold the countdown."""
    incremental: bool = False
    """spec.incrementalQuorumRecovery: add one node per step when growing back."""


@dataclass(frozen=True)
class Plan:
    """What to do now, and what to tell the user."""

    state: ClusterState
    action: Action
    members: tuple[int, ...]
    """The nodes list to write: pod ordinals."""
    ready: bool
    reason: ReadyReason
    message: str
    requeue_after: float
    record: QuorumRecord
    survivor: int | None = None
    warnings: tuple[str, ...] = field(default=())
    fenced: tuple[int, ...] = field(default=())
    """Pod ordinals to delete with the downgrade: members that answered nothing at all."""
    restarted: tuple[int, ...] = field(default=())
    """Pod ordinals to delete because their raft stopped or their process hangs
    (:attr:`Action.RESTART_ERRORED`), or because their kubelets hold them back
    (:attr:`Action.RESTART_HELD_BACK`)."""
    wait_ends_at: datetime | None = None
    """While a grace period runs: when it ends."""
    then: str | None = None
    """While a grace period runs: what the operator does when it ends and nothing healed."""


RESTARTABLE_HELD_BACK_REASON = "CrashLoopBackOff"
"""The one held-back reason a new pod ends: its container ran and exited, and the kubelet waits out a
back-off before running it again, where a new pod runs it at once. A missing image or setting holds a
new pod back just as well."""
HELD_BACK_REASONS = frozenset(
    {"CrashLoopBackOff", "ImagePullBackOff", "ErrImagePull", "CreateContainerConfigError"}
)
"""Waiting reasons of a container that its kubelet will not run for seconds at least (a back-off, an
image or a setting that is missing). A container
just killed is restarted at once, and one being created starts in a moment: neither is here."""
