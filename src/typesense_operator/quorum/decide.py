"""The quorum decision: observations of every node in, one plan out. Pure: no I/O, no clock.

It follows the specification's algorithm (cluster states OK, SPLIT_BRAIN,
NOT_READY and ELECTION_DEADLOCK; downgrade to one node; upgrade back at once
or one node at a time; QuorumNeedsIntervention on OUT_OF_MEMORY/OUT_OF_DISK),
and is safer where the Go operator is not:

- the single node kept by a downgrade is the reachable node with the most
  up-to-date raft log (braft's /raft_stat: last term, then last index), then
  the highest ``committed_index`` (ties: the lowest ordinal), never simply
  ordinal 0, because that is the node most likely to hold every acknowledged
  write;
- recovery rewrites the nodes list (who is a member); deleting a pod is the
  last resort, only when a downgraded single node still has no leader after a
  second grace period;
- members that answer nothing at all when the cluster is downgraded are fenced
  (their pods deleted): hung or cut off, they may still be a majority of the old
  configuration, and would elect a second leader, and acknowledge writes that
  the survivor's cluster later overwrites, the moment they come back;
- a leaderless or split-brain state must last ``grace_seconds`` before any
  surgery (braft's election timeout is 5 to 6 s, so a leader's death is healed by
  raft itself well inside the default grace), and a node that is reachable but
  still loading (state NOT_READY) holds the countdown, up to a limit;
- a node that is reachable, follows a live leader and answers /health with
  ``ok: false`` is lagging, not failed: it is never a reason for surgery;
- the operator's probes are checked against the kubelets' view before any
  surgery: a member that the operator cannot reach but whose pod its kubelet
  still reports Ready is most likely cut off from the operator, not from its
  peers, so nothing is fenced or downgraded until the two views agree (the
  Go operator would take a healthy cluster down to one node here);
- "enough healthy nodes" means a raft majority of the members, not the
  specification's ``(N-1)/2`` (which, for 3 nodes, would call one node enough).

The caller records :attr:`Plan.record` in the cluster's status and passes it
back next time, so a restarted operator resumes a recovery where it stopped
and never repeats a destructive step.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from typesense_operator.api.reasons import ReadyReason
from typesense_operator.quorum.model import (
    RESTARTABLE_HELD_BACK_REASON,
    Action,
    ClusterState,
    NodeProbe,
    Plan,
    QuorumRecord,
    QuorumSettings,
)

__all__ = [
    "cluster_state",
    "committed_so_far",
    "decide",
    "electing_alone",
    "errored_members",
    "hung_members",
    "majority",
    "majority_held_back",
    "provable_deadlock",
    "requeue_seconds",
]


MIN_REQUEUE_SECONDS = 0.5
THEN_DOWNGRADE = (
    "downgrade to the reachable node with the most up-to-date raft log, fencing members that answer "
    "nothing, then grow back"
)
THEN_RESTART_SURVIVOR = "restart the single survivor's pod, once"
ERRORED_RESTART_AFTER_SECONDS = 60.0
"""How long a member in raft state ERROR must have run before its pod is deleted, when its disk has
no room (or its figures are unknown): a node that errs again right after a restart (its disk still full)
is restarted once a minute, not in a loop."""
ROOM_AGAIN_PERCENT = 95.0
"""Below this share of its disk used, a member in raft state ERROR is restarted at once."""


def majority(size: int) -> int:
    """Raft's quorum of a ``size``-member configuration."""
    return size // 2 + 1


def requeue_seconds(size: int, *, unhealthy: bool) -> float:
    """Larger clusters get more breathing room between quorum checks; trouble is looked at sooner.

    A healthy 3-node cluster is probed every 11 s: a failure that the pods' readiness probes have
    not reported yet (they need 15 s) is seen within that, and the grace period starts from there.
    A cluster in trouble (no leader, loading, downgraded or growing back) is probed every second
    (a third of a second per node beyond three): each step of a recovery waits on Typesense, and a
    longer interval only adds to the time without writes. Probes are HTTP to the nodes, never API
    requests.
    """
    return max(1.0, size / 3) if unhealthy else float(5 + 2 * size)


def cluster_state(probes: Sequence[NodeProbe]) -> ClusterState:
    """The specification's cluster state, from the /status answers of the members."""
    leaders = sum(1 for p in probes if p.state == "LEADER")
    if leaders == 1:
        return ClusterState.OK
    if leaders > 1:
        return ClusterState.SPLIT_BRAIN
    not_ready = sum(1 for p in probes if not p.reachable or p.state in (None, "NOT_READY"))
    tolerated = len(probes) - majority(len(probes))
    return ClusterState.NOT_READY if not_ready > tolerated else ClusterState.ELECTION_DEADLOCK


def committed_so_far(probes: Sequence[NodeProbe], before: tuple[int, int] | None) -> tuple[int, int] | None:
    """The furthest commit seen: ``before``, or a LEADER's (last log term, committed index) beyond it.

    A leader's last entry is of its own term (braft appends one when it is elected), and what it has
    committed was acknowledged. A log at least as up to date as (that term, that index) holds every
    entry up to there: one of a later term was written by a leader that held them all, one of that
    term by that leader itself.
    """
    seen = [
        (p.last_log[0], p.committed_index)
        for p in probes
        if p.state == "LEADER" and p.last_log is not None and p.committed_index
    ]
    return max([*seen, *([before] if before else [])], default=None)


def _holds_every_commit(probe: NodeProbe, committed: tuple[int, int] | None) -> bool:
    return committed is None or (probe.last_log is not None and probe.last_log >= committed)


def _best_survivor(probes: Sequence[NodeProbe], committed: tuple[int, int] | None = None) -> NodeProbe | None:
    """The reachable node most likely to hold every acknowledged write; None when no reachable node
    provably holds every write committed so far (``committed``, see :func:`committed_so_far`).

    Raft's own rule comes first: the most up-to-date log (last term, then last index). The
    committed index alone is not enough: after a restart every node reports 0 until it hears from a
    leader, and a node whose log is empty (it never joined) would win the tie by its ordinal.
    """
    candidates = [
        p
        for p in probes
        if p.reachable and (p.committed_index is not None or p.last_log) and _holds_every_commit(p, committed)
    ]
    if not candidates:
        return None
    return max(candidates, key=lambda p: (p.last_log or (0, 0), p.committed_index or 0, -p.index))


def _contradicted(probes: Sequence[NodeProbe]) -> str | None:
    """Why surgery must wait: members the operator cannot reach that their kubelets see Ready.

    A kubelet's Ready lags a real failure by its readiness probe's failure threshold at most, so a
    dead or hung member stops contradicting soon; a partition of the operator never does.
    """
    names = [str(p.index) for p in probes if not p.reachable and p.kubelet_ready]
    if not names:
        return None
    return (
        f"node(s) {', '.join(names)} pass their kubelet's readiness probe while the operator cannot "
        "reach them: the operator may be cut off from the nodes; no surgery until the two views agree"
    )


def provable_deadlock(probes: Sequence[NodeProbe]) -> str | None:
    """Why no member can ever be elected, when the observations prove it; None when raft may yet heal.

    Proven when every member answers, none is LEADER, and the raft configuration of each names too
    few of the members' current addresses to make its own majority: a candidate needs the votes of a
    majority of its configuration, and a peer at an address that no pod has any more never votes.
    After a full restart with new pod IPs this is every member, and Typesense refuses to reset the
    peers of a multi-node cluster without a leader, so waiting cannot help. A member whose
    configuration is unknown (no /raft_stat answer) proves nothing, and neither does a minority of
    stale peers: an election may still succeed.
    """
    if len(probes) < 2 or not all(p.reachable and p.address for p in probes):
        return None
    if any(p.state == "LEADER" for p in probes):
        return None
    addresses = {p.address for p in probes}
    stuck = []
    for probe in probes:
        if not probe.raft_peers:
            return None
        current = sum(1 for peer in probe.raft_peers if peer in addresses)
        if current >= majority(len(probe.raft_peers)):
            return None
        stuck.append(f"node {probe.index}: {current} of {len(probe.raft_peers)}")
    return (
        "no member can ever be elected: the raft configurations name too few current pod addresses "
        f"to make a majority ({'; '.join(stuck)})"
    )


def majority_held_back(probes: Sequence[NodeProbe]) -> str | None:
    """Why no leader can come while the grace runs, when the kubelets prove it; None otherwise.

    Proven when no member is LEADER, every member that does not answer is held back by its kubelet
    (:data:`HELD_BACK_REASONS`: not running, and not about to), and the members that do answer are too
    few to elect one of them (fewer than a raft majority). Raft needs those members back to heal, and
    they are not coming back within an election: waiting out the grace only adds to the time without
    writes. A member that does not answer but whose container runs (frozen, cut off, slow) proves
    nothing: it may answer in a moment, and it keeps its grace.
    """
    if len(probes) < 2 or any(p.state == "LEADER" for p in probes):
        return None
    silent = [p for p in probes if not p.reachable]
    # A lost node's kubelet said its last word before it went: its "held back" proves nothing now.
    if not silent or any(p.held_back is None or p.node_lost for p in silent):
        return None
    answering = len(probes) - len(silent)
    if answering >= majority(len(probes)):
        return None
    held = "; ".join(f"node {p.index}: {p.held_back}" for p in silent)
    return (
        f"no leader can be elected: {len(silent)} of {len(probes)} members are held back by their "
        f"kubelets ({held}), and the {answering} that answer are no majority"
    )


def _loading(probes: Sequence[NodeProbe]) -> bool:
    """Some node answers but has no raft state yet (NOT_READY, or /status not served yet): it is starting."""
    return any(p.reachable and p.state in (None, "NOT_READY") for p in probes)


@dataclass(frozen=True)
class _Decision:
    """What every plan of one decision shares; :meth:`plan` fills in the rest."""

    state: ClusterState
    desired: int
    members: tuple[int, ...]

    @property
    def full(self) -> tuple[int, ...]:
        return tuple(range(self.desired))

    def plan(
        self,
        action: Action,
        reason: ReadyReason,
        message: str,
        record: QuorumRecord,
        *,
        ready: bool = False,
        members: tuple[int, ...] | None = None,
        survivor: int | None = None,
        warnings: tuple[str, ...] = (),
        fenced: tuple[int, ...] = (),
        due_in: float | None = None,
        wait_ends_at: datetime | None = None,
        then: str | None = None,
    ) -> Plan:
        """``due_in``: seconds until a running grace period ends; the next look comes no later."""
        new_members = self.members if members is None else members
        # A downgraded cluster that is growing back is in trouble too, although it has a leader.
        recovering = record.survivor is not None or action is not Action.NONE
        requeue = requeue_seconds(self.desired, unhealthy=not ready or recovering)
        if due_in is not None:
            requeue = min(requeue, max(due_in, MIN_REQUEUE_SECONDS))
        return Plan(
            state=self.state,
            action=action,
            members=new_members,
            ready=ready,
            reason=reason,
            message=message,
            requeue_after=requeue,
            record=replace(record, members=() if new_members == self.full else new_members),
            survivor=survivor,
            warnings=warnings,
            fenced=fenced,
            wait_ends_at=wait_ends_at,
            then=then,
        )


def decide(
    probes: Sequence[NodeProbe],
    desired: int,
    record: QuorumRecord,
    now: datetime,
    settings: QuorumSettings | None = None,
) -> Plan:
    """One quorum decision for a cluster of ``desired`` nodes, given each member's probe."""
    settings = settings or QuorumSettings()
    full = tuple(range(desired))
    members = tuple(i for i in (record.members or full) if i < desired) or full
    member_probes = [p for p in probes if p.index in members]
    record = replace(record, committed=committed_so_far(probes, record.committed))
    decision = _Decision(cluster_state(member_probes), desired, members)
    size = len(members)

    exhausted = [p for p in member_probes if p.resource_error]
    if exhausted:
        errors = ", ".join(f"node {p.index}: {p.resource_error}" for p in exhausted)
        return decision.plan(
            Action.NEEDS_INTERVENTION,
            ReadyReason.QUORUM_NEEDS_INTERVENTION,
            f"{errors}; give the nodes more memory or disk in the TypesenseCluster spec",
            record,
            warnings=(f"Typesense reports {errors}: administrative action required",),
        )

    healthy = sum(1 for p in member_probes if p.health_ok)
    if decision.state is ClusterState.OK:
        reachable = {p.index for p in probes if p.reachable}
        return _restart_errored(
            _with_leader(decision, record, healthy, reachable, settings), member_probes, now
        )

    overtaken = _downgrade_overtaken(decision, probes, record)
    if overtaken is not None:
        return overtaken

    if record.survivor is not None and (size == 1 or record.downgraded_at is not None):
        # Downgraded already, and no leader seen since: the survivor's own grace runs from the
        # downgrade (the list may have grown already, while the survivor elects itself).
        return _survivor_without_leader(
            decision,
            probes,
            replace(record, unhealthy_since=record.unhealthy_since or now),
            now,
            settings,
        )

    if not any(p.reachable for p in member_probes):
        # Nobody answers yet (pods starting, or all gone): nothing to judge, and no clock to start.
        why = _contradicted(member_probes) or "waiting for the pods"
        return decision.plan(
            Action.NONE,
            ReadyReason.QUORUM_NOT_READY,
            f"{decision.state}: no node answers; {why}",
            replace(record, unhealthy_since=None),
        )

    state = decision.state
    # Messages name the start of a wait, not the seconds so far, so that they change (and are written) once.
    if _loading(member_probes):
        loading_since = record.loading_since or now
        if (now - loading_since).total_seconds() < settings.loading_limit_seconds:
            # Raft has not even started on some member: no election could have happened yet, so the
            # grace period starts only when loading ends.
            return decision.plan(
                Action.NONE,
                ReadyReason.QUORUM_NOT_READY,
                f"{state} since {_clock(loading_since)}: members are still loading their data",
                replace(record, unhealthy_since=None, loading_since=loading_since),
            )
    else:
        record = replace(record, loading_since=None)

    # No single leader: raft may heal itself within an election timeout; give it the grace period,
    # unless the observations prove that it cannot.
    since = record.unhealthy_since or now
    waited = (now - since).total_seconds()
    stretch = replace(record, unhealthy_since=since)
    proven = provable_deadlock(member_probes)
    held_back = majority_held_back(member_probes) if proven is None else None
    restartable = tuple(
        p.index for p in member_probes if not p.reachable and p.held_back == RESTARTABLE_HELD_BACK_REASON
    )
    if held_back is not None and restartable and not record.held_back_restarted:
        # They hold what a survivor may lack (a write acknowledged by a leader and one of them, that a
        # lagging follower never got): back on their volumes, raft elects with every commit.
        nodes = ", ".join(map(str, restartable))
        restart = decision.plan(
            Action.RESTART_HELD_BACK,
            ReadyReason.QUORUM_NOT_READY,
            f"{state}, {held_back}: restarting node(s) {nodes} once (a new pod runs at once on the same "
            "volume, where a downgrade to a minority could lose acknowledged writes only they hold)",
            replace(stretch, held_back_restarted=True),
        )
        return replace(restart, restarted=restartable)
    deadlock = proven or held_back
    if waited < settings.grace_seconds and deadlock is None:
        return decision.plan(
            Action.NONE,
            ReadyReason.QUORUM_NOT_READY,
            f"{state} since {_clock(since)}: {settings.grace_seconds:.0f} s grace for raft to elect a leader",
            stretch,
            due_in=settings.grace_seconds - waited,
            wait_ends_at=since + timedelta(seconds=settings.grace_seconds),
            then=THEN_DOWNGRADE,
        )
    if size == 1:
        return _survivor_without_leader(decision, probes, stretch, now, settings)

    kept = _best_survivor(member_probes, record.committed)
    if kept is None:
        if record.committed is not None and _best_survivor(member_probes) is not None:
            term, index = record.committed
            return decision.plan(
                Action.NONE,
                ReadyReason.QUORUM_NOT_READY,
                f"{state} since {_clock(since)}, but no node that answers has every acknowledged write "
                f"(a leader committed up to term {term}, index {index}; the best log that answers: "
                f"{_log_of(_best_survivor(member_probes))}): a downgrade would lose them; waiting for a "
                "node that has them to answer",
                stretch,
            )
        return decision.plan(
            Action.NONE,
            ReadyReason.QUORUM_NOT_READY,
            f"{state} since {_clock(since)}, but no node reports a committed index; waiting",
            stretch,
        )
    silent = tuple(p.index for p in member_probes if not p.reachable)
    contradicted = _contradicted(member_probes)
    if contradicted:
        return decision.plan(
            Action.HOLD,
            ReadyReason.QUORUM_NOT_READY,
            f"{state} since {_clock(since)}, but {contradicted}",
            stretch,
        )
    survivor = kept.index
    evidence = f"highest committed index {kept.committed_index}"
    if kept.last_log is not None:
        evidence = f"most up-to-date log: term {kept.last_log[0]}, index {kept.last_log[1]}; {evidence}"
    fencing = f"; fencing silent node(s) {', '.join(map(str, silent))}" if silent else ""
    why = f"{state}, {deadlock}" if deadlock is not None else f"{state} for {waited:.0f} s"
    return decision.plan(
        Action.DOWNGRADE,
        ReadyReason.QUORUM_DEGRADED,
        f"{why}: keeping node {survivor} ({evidence}) as a single-node cluster, then growing back{fencing}",
        replace(stretch, unhealthy_since=now, survivor=survivor, downgraded_at=now, survivor_restarted=False),
        members=(survivor,),
        survivor=survivor,
        fenced=silent,
    )


def overtaking_leader(
    probes: Sequence[NodeProbe], members: tuple[int, ...], survivor: int, desired: int
) -> NodeProbe | None:
    """The leader raft elected outside a downgrade's list, under the configuration from before it, when
    the downgrade's survivor follows it and a majority of every desired node answers as a member.

    A survivor reads its nodes file every 10 s; until it does, it is still a voter of the old
    configuration, and the old members can elect one of themselves and take it along. Such a cluster
    is whole again: restarting the survivor for "not leading alone" would only hurt it (seen in the
    chaos soak on real nodes: the survivor, following node 2, was restarted 30 s after the downgrade).
    """
    answering = [p for p in probes if p.index < desired and p.reachable]
    leaders = [p for p in answering if p.state == "LEADER"]
    kept = next((p for p in answering if p.index == survivor), None)
    if len(leaders) != 1 or leaders[0].index in members or kept is None or kept.state != "FOLLOWER":
        return None
    leader = leaders[0]
    if leader.raft_peers is not None and kept.address is not None and kept.address not in leader.raft_peers:
        return None  # the survivor follows nobody this leader counts as a voter
    voters = [p for p in answering if p.state in ("LEADER", "FOLLOWER")]
    return leader if len(voters) >= majority(desired) else None


def _downgrade_overtaken(
    decision: _Decision, probes: Sequence[NodeProbe], record: QuorumRecord
) -> Plan | None:
    """A downgrade that raft overtook (:func:`overtaking_leader`): the nodes list grows back whole."""
    if record.survivor is None or decision.members == decision.full:
        return None
    leader = overtaking_leader(probes, decision.members, record.survivor, decision.desired)
    if leader is None:
        return None
    calm = replace(
        record,
        unhealthy_since=None,
        loading_since=None,
        survivor=None,
        downgraded_at=None,
        survivor_restarted=False,
    )
    return decision.plan(
        Action.UPGRADE,
        ReadyReason.QUORUM_UPGRADED,
        f"node {leader.index} leads under the configuration from before the downgrade, and node "
        f"{record.survivor}, kept by it, follows: raft overtook the downgrade; growing the nodes list "
        f"back to {decision.desired}",
        calm,
        members=decision.full,
    )


def _with_leader(
    decision: _Decision, record: QuorumRecord, healthy: int, reachable: set[int], settings: QuorumSettings
) -> Plan:
    # A leader is seen: a downgrade's survivor led (or grew back), so its wait is over.
    calm = replace(
        record, unhealthy_since=None, loading_since=None, downgraded_at=None, held_back_restarted=False
    )
    members, full, size = decision.members, decision.full, len(decision.members)
    if members == full:
        calm = replace(calm, survivor=None, survivor_restarted=False)
    # Only nodes that answer can join: a member that is down would only make the new configuration
    # wait for it.
    joinable = [i for i in full if i not in members and i in reachable]
    if members != full and healthy == size and joinable:
        grown = _grow(members, joinable, full, settings.incremental)
        if grown == full:
            calm = replace(calm, survivor=None, survivor_restarted=False)
        return decision.plan(
            Action.UPGRADE,
            ReadyReason.QUORUM_UPGRADED,
            f"quorum healthy with {size} of {decision.desired} nodes; growing the nodes list to {len(grown)}",
            calm,
            members=grown,
        )
    if members != full:
        return decision.plan(
            Action.NONE,
            ReadyReason.QUORUM_UPGRADED,
            f"growing back: {healthy}/{size} members healthy; a node joins when all members are healthy "
            "and it answers",
            calm,
        )
    if healthy >= majority(size):
        return decision.plan(
            Action.NONE,
            ReadyReason.QUORUM_READY,
            f"leader elected; {healthy}/{size} members healthy",
            calm,
            ready=True,
        )
    # A leader, but too few healthy members: lagging or restarting nodes catch up by themselves.
    return decision.plan(
        Action.NONE,
        ReadyReason.QUORUM_NOT_READY,
        f"leader elected but only {healthy}/{size} members healthy (need {majority(size)}); waiting",
        calm,
    )


def errored_members(probes: Sequence[NodeProbe], now: datetime) -> tuple[int, ...]:
    """Members whose raft stopped for good: they answer, their state is ERROR, and either their disk
    has room again (by their own figures, under :data:`ROOM_AGAIN_PERCENT` used) or their container has
    run for :data:`ERRORED_RESTART_AFTER_SECONDS`.

    braft enters ERROR when it cannot go on (a failed write of its log, a full disk) and stays there
    until the process restarts: such a member neither votes nor replicates, so restarting it costs the
    quorum nothing and is the only way back. Its data stays on its volume. A disk with room again is
    restarted at once (the soak's nodes waited a minute after their disk was freed); one still full, or
    whose figures are unknown, once a minute, so that a restart does not run into the full disk in a
    loop.
    """

    def restartable(p: NodeProbe) -> bool:
        if p.running_since is None:
            return False
        if (now - p.running_since).total_seconds() >= ERRORED_RESTART_AFTER_SECONDS:
            return True
        used, total = p.disk_used_bytes, p.disk_total_bytes
        return (
            used is not None and total is not None and total > 0 and 100 * used / total < ROOM_AGAIN_PERCENT
        )

    return tuple(p.index for p in probes if p.reachable and p.state == "ERROR" and restartable(p))


def hung_members(probes: Sequence[NodeProbe], now: datetime) -> tuple[int, ...]:
    """Members whose process hangs: their container runs (for :data:`HUNG_RESTART_AFTER_SECONDS` at
    least, so not one starting), and for as long either

    - it answers neither the operator's probes, look after look, nor its kubelet's readiness probe,
      which has said not Ready all that time (a member loading for long, not Ready, that stops
      answering is not hung at once); or
    - its /health says ok (so its kubelet finds it Ready) while its /status has answered nothing at
      all, look after look.

    A leader frozen and thawed (typesense-server 0.24.1) has been seen to do either for minutes: take
    connections and answer none of them, where the liveness probe, which asks only for a connection,
    sees nothing wrong; or answer /health from its HTTP thread while its raft, which /status asks,
    stays stuck and out of the cluster. A loading node answers (503, and /status NOT_READY), and one
    its kubelet still finds Ready but the operator cannot reach may only be cut off from the operator:
    neither is here. Nor is a member whose Kubernetes node is lost: its kubelet's "running" is as old
    as the node's last report, and what becomes of it is spec.nodeLoss's to say (a power cut left
    it in a deleted pod, Terminating for as long as its node is gone). Nor one whose node's kubelet
    stopped its heartbeat (``node_silent``) before the control plane calls the node lost: a member cut
    off with its node within the node controller's grace, once taken for hung here, had its pod
    deleted 19 s after the cut.
    """

    def longer_than_enough(since: datetime | None) -> bool:
        return since is not None and (now - since).total_seconds() >= HUNG_RESTART_AFTER_SECONDS

    def silent(p: NodeProbe) -> bool:
        return (
            not p.reachable
            and longer_than_enough(p.unready_since)
            and longer_than_enough(p.unreachable_since)
        )

    def raft_stuck(p: NodeProbe) -> bool:
        return p.status_silent and p.health_ok is True and longer_than_enough(p.status_silent_since)

    return tuple(
        p.index
        for p in probes
        if p.held_back is None
        and not p.node_lost
        and not p.node_silent
        and longer_than_enough(p.running_since)
        and (silent(p) or raft_stuck(p))
    )


def _restart_errored(plan: Plan, probes: Sequence[NodeProbe], now: datetime) -> Plan:
    """The plan of a cluster with a leader, plus the restart of its errored or hung members when nothing
    else is being done (a growth of the nodes list goes first)."""
    errored, hung = errored_members(probes, now), hung_members(probes, now)
    if not (errored or hung) or plan.action is not Action.NONE:
        return plan
    why = []
    if errored:
        why.append(
            f"restarting node(s) {', '.join(map(str, errored))}: raft state ERROR for "
            f"{ERRORED_RESTART_AFTER_SECONDS:.0f} s (it stopped after a failed write; only a restart "
            "brings it back, and it is no voter meanwhile)"
        )
    if hung:
        why.append(
            f"restarting node(s) {', '.join(map(str, hung))}: running, yet answering nothing and not "
            f"Ready, or answering /health but not /status, for {HUNG_RESTART_AFTER_SECONDS:.0f} s (a hung "
            "process; the leader goes on without it)"
        )
    return replace(
        plan,
        action=Action.RESTART_ERRORED,
        restarted=errored + hung,
        message=f"{plan.message}; {'; '.join(why)}",
        requeue_after=min(plan.requeue_after, requeue_seconds(len(plan.members), unhealthy=True)),
    )


HUNG_RESTART_AFTER_SECONDS = 30.0
"""How long a member's process may run answering nothing, its pod not Ready, before its pod is deleted
(while a leader goes on without it): longer than any freeze the soak makes (12 s) and than a kubelet's
readiness probe needs to say so (15 s)."""


def _log_of(probe: NodeProbe | None) -> str:
    if probe is None or probe.last_log is None:
        return "unknown"
    return f"node {probe.index}, term {probe.last_log[0]}, index {probe.last_log[1]}"


def _clock(moment: datetime) -> str:
    return moment.strftime("%H:%M:%SZ")


def _grow(
    members: tuple[int, ...], joinable: Sequence[int], full: tuple[int, ...], incremental: bool
) -> tuple[int, ...]:
    added = joinable[:1] if incremental else joinable
    return tuple(i for i in full if i in members or i in added)


def electing_alone(probe: NodeProbe | None) -> bool:
    """Whether a node has reset its raft configuration to itself alone and has no leader yet: its
    /raft_stat names its own current address as the only peer.

    braft elects such a node by itself when its election timer next fires (within 5 to 6 s in
    typesense-server), with nobody's vote to wait for, and it stays a one-member configuration until,
    as leader, it reads a longer nodes list.
    """
    return (
        probe is not None
        and probe.reachable
        and probe.state not in ("LEADER", "ERROR")
        and probe.address is not None
        and probe.raft_peers == (probe.address,)
    )


def _has_a_log(probe: NodeProbe) -> bool:
    """A raft log with entries: the node's configuration comes from its log, never from the nodes
    file, so a restart while the list names more members cannot make it a voter of an empty majority."""
    return probe.reachable and probe.last_log is not None and probe.last_log[1] > 0


def _survivor_without_leader(
    decision: _Decision,
    probes: Sequence[NodeProbe],
    record: QuorumRecord,
    now: datetime,
    settings: QuorumSettings,
) -> Plan:
    """A downgrade's survivor that has not led yet: grow the list early once it elects alone, restart
    its pod once if it never does, otherwise wait.

    The early growth is what saves a 10 s read: typesense-server reads its nodes file every 10 s,
    resets its peers at one read (the list names it alone and it has no leader), is elected up to 6 s
    later, and grows the configuration at its next read. A longer list written only once it leads
    and is healthy (up to 9 s after the reset, plus the kubelet's copy) can miss that next read and
    wait 10 s more. Written as soon as its /raft_stat shows the reset, it is in place well
    before: at that read the survivor leads and adds the others; were it still electing, a
    multi-member list is refused by a node without a leader, and nothing changes.
    """
    members = decision.members
    # A one-node list without a survivor recorded: a cluster of one node, or a record from before.
    survivor = members[0] if record.survivor is None else record.survivor
    since = record.downgraded_at or record.unhealthy_since or now
    waited = (now - since).total_seconds()
    patience = max(settings.grace_seconds, settings.survivor_elects_within_seconds)
    kept = next((p for p in probes if p.index == survivor), None)
    if not record.survivor_restarted and waited >= patience:
        contradicted = _contradicted([kept] if kept else [])
        if contradicted:
            return decision.plan(
                Action.HOLD,
                ReadyReason.QUORUM_DEGRADED,
                f"single node {survivor}: {contradicted}",
                record,
                survivor=survivor,
            )
        # Its new pod gets a new address, and must read a list naming it alone to reset again.
        return decision.plan(
            Action.RESTART_SURVIVOR,
            ReadyReason.QUORUM_DEGRADED,
            f"{decision.state}: single node {survivor} elected no leader in {waited:.0f} s; "
            "restarting its pod once",
            replace(record, survivor_restarted=True),
            members=(survivor,),
            survivor=survivor,
        )
    joinable = [
        p.index for p in probes if p.index < decision.desired and p.index not in members and _has_a_log(p)
    ]
    # From the one-member list only: spec.incrementalQuorumRecovery's next nodes wait for a leader.
    if len(members) == 1 and electing_alone(kept) and joinable:
        assert kept is not None
        grown = _grow(members, joinable, decision.full, settings.incremental)
        added = ", ".join(str(i) for i in grown if i not in members)
        return decision.plan(
            Action.UPGRADE,
            ReadyReason.QUORUM_UPGRADED,
            f"node {survivor} has reset its raft configuration to itself alone (its /raft_stat names "
            f"only {kept.address}) and elects itself within an election timeout: growing the nodes list "
            f"to {len(grown)} now (adding node(s) {added}), so that the list is in place when it reads "
            "it again as leader",
            record,
            members=grown,
            survivor=survivor,
        )
    waiting = f"{decision.state}: single node {survivor} has no leader since the downgrade at {_clock(since)}"
    if len(members) > 1:
        waiting = (
            f"{decision.state}: node {survivor}, kept alone by the downgrade at {_clock(since)}, has no "
            f"leader yet; the nodes list names {len(members)} for when it leads"
        )
    return decision.plan(
        Action.NONE,
        ReadyReason.QUORUM_DEGRADED,
        waiting,
        record,
        survivor=survivor,
        due_in=None if record.survivor_restarted else patience - waited,
        wait_ends_at=None if record.survivor_restarted else since + timedelta(seconds=patience),
        then=None if record.survivor_restarted else THEN_RESTART_SURVIVOR,
    )
