"""A chaos soak of a TypesenseCluster: a seeded random schedule of faults, one or two at a time, under
a steady write and read load, on real nodes, against the local control plane and the operator;
then every acknowledged write looked for on every node (bench/chaos.py, and a shortened run in CI).

The planning (:func:`plan`) and the judging (:func:`judge_actions`, :func:`lost_writes`) are pure and
table-tested; :class:`Soak` applies the faults and measures. A run is replayable: the seed gives the
schedule, and both are in its result.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import random
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

import httpx

from operator_core import errors
from operator_core.clock import micro_time
from operator_testkit.assertions import condition
from operator_testkit.controlplane import ControlPlane
from operator_testkit.drivers.typesense import RAFT_MEMBER, TypesenseCluster, Writer, ready_condition
from operator_testkit.nodes.cluster import LocalCluster
from operator_testkit.nodes.faults import FaultError, NodeFaults, TargetGone
from operator_testkit.nodes.storage import SIZE_LIMITED_CLASS
from operator_testkit.operators import OperatorProcess

__all__ = [
    "CONTROL_FAULTS",
    "DESTRUCTIVE_REASONS",
    "KUBE_NODE_FAULTS",
    "NODE_FAULTS",
    "Judgement",
    "Sample",
    "Soak",
    "SteadyCluster",
    "Step",
    "fault_kind",
    "gap_target",
    "judge_actions",
    "lost_writes",
    "plan",
    "score_by_fault",
]

NODE_FAULTS = (
    "kill-leader",
    "kill-follower",
    "kill-majority",
    "freeze-leader",
    "freeze-follower",
    "freeze-majority",
    "delete-pod",
    "delete-all-pods",
    "orphan-statefulset",
    "disk-full",
)
"""Faults of the Typesense nodes: their processes, pods, StatefulSet or disk."""
KUBE_NODE_FAULTS = (
    "power-cut-leader",
    "power-cut-follower",
    "isolate-leader",
    "isolate-follower",
    "drain-leader",
    "drain-follower",
)
"""Faults of the Kubernetes node a member runs on (the cluster spread one member per node): its power
cut (kubelet, containerd, shims and containers killed at once; ended by the node's reboot), its kubelet
cut off from the API server (its containers run on; ended by reconnecting it), and ``kubectl drain``
(ended by ``uncordon``: the evicted member is pinned to the node by its local volume meanwhile)."""
KUBE_NODE_HOLD_SECONDS = (10.0, 70.0)
"""How long a fault of a Kubernetes node lasts, drawn in: past the node lifecycle controller's grace
(50 s) at times, so that the node is NotReady and tainted unreachable for a while, and the cluster's
status must name it."""
HANDED_OVER_GAP_TARGET_SECONDS = 2.0
"""The longest write gap of a drain, of the leader's node too: the leader hands over before its pod
stops (docs/typesense-quorum.md), and a follower's eviction touches no leader."""
CONTROL_FAULTS = ("kill-operator", "restart-apiserver", "roll")
"""Faults of what runs the nodes, and a change of spec (a roll) in the middle of the rest."""
DESTRUCTIVE_REASONS = ("QuorumDowngraded", "QuorumMemberFenced", "QuorumSurvivorRestarted")
"""The operator's Events that announce an action that can lose data if it is wrong."""
PAIR_CHANCE = 0.4
HOLD_SECONDS = (3.0, 12.0)
"""How long a fault lasts (a freeze, the operator or the API server down, the disk full), drawn in."""
GAP_TARGET_SECONDS = 20.0
"""The longest write gap a single fault may cause: one election (5-6 s) and one read of the nodes
file (every 10 s) by typesense-server 0.24.1, with room for the pod's kubelet to report."""
NO_LEADER_GAP_TARGET_SECONDS = 2.0
"""The longest write gap of a single fault that touches no leader: raft has nothing to do, so a write
is held up for no longer than a couple of the writer's attempts."""
SNAPSHOT_INTERVAL_SECONDS = 60
"""How often the soak's nodes take a raft snapshot (typesense-server's default is 3600 s). A node that
starts replays every write since its last snapshot once it has a leader, and accepts no write until
fewer than 500 are left (its healthy-write-lag): after 25 minutes of the soak's load with the
default, all pods deleted had their first accepted write 4 to 6 s after the election, not at it.
Every 60 s keeps the replay under 500 writes."""
KUBELET_WATCH_SETTLE_SECONDS = 60.0
"""How long after the API server answers again a step may not begin. A kubelet whose watches failed
over the outage watches again only after client-go's backoff (up to 30 s, doubled by its jitter), and
meanwhile acts on no pod deleted: in seed 2088441472, all pods deleted 4 s after such a restart were
stopped by their kubelets 38 s later, a second fault (Kubernetes', not the operator's) on the first."""
COUNTED_FROM_HEAL = ("freeze-majority",)
"""Single faults that leave no majority for as long as they hold (3 to 12 s): no raft takes a write
then, so their target bounds the write gap from the moment the fault ends (the thaw) on; the gap from
the fault's start is reported beside it."""
ROLE_FAULTS = ("delete-pod", "disk-full")
"""Faults of one pod drawn at random: whether it was the leader's decides their target."""


@dataclass(frozen=True)
class Step:
    """One step of a schedule: these faults at once, each lasting ``hold_seconds`` where it can end."""

    number: int
    faults: tuple[str, ...]
    hold_seconds: float


def plan(
    seed: int, steps: int, replicas: int = 3, only: Sequence[str] = (), *, kube_nodes: bool = False
) -> list[Step]:
    """A schedule of ``steps`` steps (pure: the seed decides it). Each step is a fault of the nodes,
    alone or (with :data:`PAIR_CHANCE`) with one of :data:`CONTROL_FAULTS`; "kill-majority" and
    "freeze-majority" need more than one node, so a 1-node cluster gets neither. ``kube_nodes``: the
    faults of the Kubernetes nodes (:data:`KUBE_NODE_FAULTS`, held for :data:`KUBE_NODE_HOLD_SECONDS`)
    are in the mix too; without them a seed gives the schedule it always gave. ``only``: these
    faults alone, never paired (a run that looks into one kind of fault)."""
    chooser = random.Random(seed)  # noqa: S311 - a replayable schedule, not a secret
    mix = (*NODE_FAULTS, *KUBE_NODE_FAULTS) if kube_nodes else NODE_FAULTS
    faults_drawn = [f for f in (only or mix) if replicas > 1 or not f.endswith("-majority")]
    pair_chance = 0.0 if only else PAIR_CHANCE
    schedule = []
    for number in range(1, steps + 1):
        faults = [chooser.choice(faults_drawn)]
        if chooser.random() < pair_chance:
            faults.append(chooser.choice(CONTROL_FAULTS))
        held = KUBE_NODE_HOLD_SECONDS if faults[0] in KUBE_NODE_FAULTS else HOLD_SECONDS
        hold = round(chooser.uniform(*held), 1)
        schedule.append(Step(number, tuple(faults), hold))
    return schedule


@dataclass(frozen=True)
class Sample:
    """What every node answered at one moment (``time.time()``): pod → raft state, or None."""

    at: float
    states: Mapping[str, str | None]
    outside: frozenset[str] = frozenset()
    """Pods whose address the leader's raft configuration does not name (a downgrade's survivor leads
    alone until it grows the configuration): a FOLLOWER among them follows nobody that counts."""


def majority_healthy(sample: Sample, replicas: int) -> bool:
    """One leader, and a raft majority of the desired nodes in its raft (itself, or a follower that its
    configuration names)."""
    states = list(sample.states.values())
    members = sum(
        1 for pod, state in sample.states.items() if state in RAFT_MEMBER and pod not in sample.outside
    )
    return states.count("LEADER") == 1 and members >= replicas // 2 + 1


@dataclass(frozen=True)
class Judgement:
    at: float
    reason: str
    message: str
    justified: bool
    evidence: str


def judge_actions(
    actions: Sequence[tuple[float, str, str]], samples: Sequence[Sample], replicas: int, window: float = 3.0
) -> list[Judgement]:
    """Each destructive action (when, Event reason, message) judged against the nodes' states seen
    before it: unjustified when every sample of the ``window`` seconds before it (at least one) saw a
    healthy majority, so that the operator acted while the cluster did not need it. A sample shortly
    before the action may differ from what the operator saw (its probes take time, raft may elect in
    between): one sample without a healthy majority in the window is enough to justify it."""
    judged = []
    for at, reason, message in actions:
        before = [s for s in samples if at - window <= s.at <= at]
        healthy = [majority_healthy(s, replicas) for s in before]
        justified = not before or not all(healthy)
        seen = ", ".join(_seen(before[-1])) if before else ""
        evidence = f"last seen before it: {seen}" if seen else "no sample in the window"
        judged.append(Judgement(at, reason, message, justified, evidence))
    return judged


def _seen(sample: Sample) -> list[str]:
    return [
        f"{pod}={state or 'silent'}{' (outside the leader configuration)' if pod in sample.outside else ''}"
        for pod, state in sorted(sample.states.items())
    ]


def fault_kind(faults: Sequence[str], roles: Sequence[str | None] = ()) -> str:
    """What a step did, as its score groups it: its faults joined by "+", each of
    :data:`ROLE_FAULTS` with the role of the pod it touched ("disk-full (leader)")."""
    named = []
    for index, fault in enumerate(faults):
        role = roles[index] if index < len(roles) else None
        named.append(f"{fault} ({role})" if fault in ROLE_FAULTS and role else fault)
    return "+".join(named)


def gap_target(kind: str) -> float | None:
    """The longest write gap a step of ``kind`` may cause: :data:`NO_LEADER_GAP_TARGET_SECONDS` for a
    single fault that touches no leader (the StatefulSet orphaned; a follower killed, frozen, deleted,
    its disk filled or its node's power cut, drained or cut off) or leaves it running (its kubelet cut
    off from the API server), :data:`HANDED_OVER_GAP_TARGET_SECONDS` for a drain of the leader's node,
    :data:`GAP_TARGET_SECONDS` for any other single fault, and none for two faults at once (a fault of
    the control plane with one of the nodes has no bound of its own)."""
    if "+" in kind:
        return None
    if kind == "drain-leader":
        return HANDED_OVER_GAP_TARGET_SECONDS
    if kind == "orphan-statefulset" or kind.endswith("-follower") or kind.endswith("(follower)"):
        return NO_LEADER_GAP_TARGET_SECONDS
    if kind == "isolate-leader":
        return NO_LEADER_GAP_TARGET_SECONDS
    return GAP_TARGET_SECONDS


def score_by_fault(steps: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per fault kind (:func:`fault_kind`): how many steps, the longest write gap and the longest time
    to a whole cluster, against the kind's target (:func:`gap_target`), and the steps that missed it.
    A kind of :data:`COUNTED_FROM_HEAL` is held to its target from the fault's end."""
    scored: dict[str, dict[str, Any]] = {}
    for step in steps:
        kind = str(step["kind"])
        target = gap_target(kind)
        entry = scored.setdefault(
            kind,
            {
                "steps": 0,
                "longest_write_gap_seconds": 0.0,
                "longest_seconds_to_whole": 0.0,
                "target_write_gap_seconds": target,
                "missed_by_steps": [],
            },
        )
        gap, whole = step.get("longest_write_gap_seconds") or 0.0, step.get("seconds_to_whole")
        entry["steps"] += 1
        entry["longest_write_gap_seconds"] = max(entry["longest_write_gap_seconds"], gap)
        if kind in COUNTED_FROM_HEAL:
            gap = step.get("write_gap_after_heal_seconds", gap) or 0.0
            longest = max(entry.get("longest_write_gap_after_heal_seconds", 0.0), gap)
            entry["longest_write_gap_after_heal_seconds"] = longest
        if whole is None or entry["longest_seconds_to_whole"] is None:
            entry["longest_seconds_to_whole"] = None
        else:
            entry["longest_seconds_to_whole"] = max(entry["longest_seconds_to_whole"], whole)
        if target is not None and gap > target:
            entry["missed_by_steps"].append(step["step"])
    return dict(sorted(scored.items()))


def lost_writes(acknowledged: Sequence[str], held: Mapping[str, set[str]]) -> dict[str, list[str]]:
    """For each node, the acknowledged ids it does not hold (only nodes missing some)."""
    return {
        node: missing
        for node, ids in held.items()
        if (missing := [document for document in acknowledged if document not in ids])
    }


async def _nothing() -> None:
    return None


class SteadyCluster(TypesenseCluster):
    """A cluster whose load keeps going while the API server is away (a chaos step restarts it): the
    nodes' addresses are those last seen, and its Ready condition unknown, until it answers again."""

    _last_ips: dict[str, str] | None = None

    async def pod_ips(self) -> dict[str, str]:
        try:
            self._last_ips = await super().pod_ips()
        except errors.KubeError:
            if self._last_ips is None:
                raise
        return dict(self._last_ips)

    async def is_whole(self, replicas: int) -> bool:
        """Ready, with every member healthy as the operator last saw them (its Ready message counts
        them), and no roll under way (Progressing not True): a node in the raft but still catching up
        (a restarted one replaying its log), or a roll's next restart, would make a fault on another
        node a second fault, not a single one."""
        try:
            cluster = await self.get()
        except errors.KubeError:
            return False
        ready = ready_condition(cluster)
        healthy = f"{replicas}/{replicas} members healthy"
        rolling = (condition(cluster, "Progressing") or {}).get("status") == "True"
        return (
            ready.get("status") == "True" and str(ready.get("message", "")).endswith(healthy) and not rolling
        )


@dataclass
class _Loop:
    """Something done every :attr:`interval` seconds in the background, until stopped."""

    cluster: TypesenseCluster
    interval: float = 0.5
    _stop: asyncio.Event = field(default_factory=asyncio.Event)
    _task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        while not self._stop.is_set():
            await self.once()
            await asyncio.sleep(self.interval)

    async def once(self) -> None:
        raise NotImplementedError

    async def stop(self) -> None:
        self._stop.set()
        if self._task is not None:
            await self._task


@dataclass
class _Reader(_Loop):
    """A steady read load: a search through a node every quarter second, counted."""

    interval: float = 0.25
    ok: int = 0
    failures: Counter[str] = field(default_factory=Counter)
    """Failed searches by cause: the HTTP status, or the exception's class."""

    @property
    def failed(self) -> int:
        return sum(self.failures.values())

    async def once(self) -> None:
        ips = list((await self.cluster.pod_ips()).values())
        if not ips:
            return
        try:
            answer = await self.cluster.http.get(
                f"http://{random.choice(ips)}:8108/collections/books/documents/search",  # noqa: S311
                params={"q": "*", "query_by": "title", "per_page": "1"},
                headers=self.cluster.headers,
            )
        except httpx.HTTPError as error:
            self.failures[type(error).__name__] += 1
            return
        if answer.status_code == 200:
            self.ok += 1
        else:
            self.failures[f"HTTP {answer.status_code}"] += 1


@dataclass
class _Observer(_Loop):
    """Every node's raft state every half second, for judging the operator's actions afterwards."""

    samples: list[Sample] = field(default_factory=list)

    async def once(self) -> None:
        ips = await self.cluster.pod_ips()  # once for both: a list of pods every half second is enough
        states = await self.cluster.states(ips)
        answered = {pod: (state if state != "unreachable" else None) for pod, state in states.items()}
        leaders = [pod for pod, state in answered.items() if state == "LEADER"]
        outside = (
            await self.cluster.outside_configuration(leaders[0], ips) if len(leaders) == 1 else frozenset()
        )
        self.samples.append(Sample(time.time(), answered, outside))

    def latest(self) -> Sample | None:
        return self.samples[-1] if self.samples else None


@dataclass
class Soak:
    """One soak run: the rig's parts, the cluster, and what was measured."""

    cluster: SteadyCluster
    faults: NodeFaults
    plane: ControlPlane
    operator: OperatorProcess
    replicas: int
    nodes: LocalCluster | None = None
    """The real nodes the cluster runs on: given, the schedule has faults of whole Kubernetes nodes
    too (:data:`KUBE_NODE_FAULTS`), and the cluster is spread one member per node."""
    recover_within: float = 240.0
    storage: dict[str, Any] = field(
        default_factory=lambda: {"size": "256Mi", "storageClassName": SIZE_LIMITED_CLASS}
    )
    """The nodes' volumes: size-limited, so that a disk can be filled."""
    server_configuration: dict[str, str] = field(
        default_factory=lambda: {"TYPESENSE_SNAPSHOT_INTERVAL_SECONDS": str(SNAPSHOT_INTERVAL_SECONDS)}
    )
    """The cluster's additionalServerConfiguration, as a user who reads docs/typesense.md sets it."""
    results: list[dict[str, Any]] = field(default_factory=list)
    unhealed: list[str] = field(default_factory=list)
    """Faults the soak could not end (it says so rather than blame the operator for what followed)."""
    unapplied: list[str] = field(default_factory=list)
    """Faults that could not be started (a container that did not run for 10 s)."""
    ready_timeline: list[tuple[float, str]] = field(default_factory=list)
    """The step's Ready conditions as they changed: (seconds since the fault, "reason: message")."""
    _api_server_back: float | None = None
    """When a step's restart of the API server last ended (monotonic)."""
    _touched: list[str] = field(default_factory=list)
    """The role ("leader", "follower") of the pod the fault being applied chose, where it chose one."""

    @property
    def statefulset(self) -> str:
        return f"{self.cluster.name}-sts"

    async def create(self) -> None:
        """The cluster, with size-limited volumes (so that a disk can be filled), Ready, with its
        collection."""
        configuration = f"{self.cluster.name}-server-configuration"
        await self.cluster.kube.apply(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": configuration, "namespace": self.cluster.namespace},
                "data": self.server_configuration,
            }
        )
        spread = {"topologySpreadConstraints": self.cluster.one_member_per_node} if self.nodes else {}
        await self.cluster.create(
            replicas=self.replicas,
            storage=self.storage,
            additionalServerConfiguration={"name": configuration},
            **spread,
        )
        await self.cluster.wait_ready(timeout=300)
        await self.cluster.create_collection()

    async def run(self, seed: int, seconds: float, only: Sequence[str] = ()) -> dict[str, Any]:
        """Steps of :func:`plan` (of ``only`` those node faults, if given) until ``seconds`` have
        passed; each waits for the cluster to be whole again before the next. Returns the run's result
        (JSON-ready)."""
        writer, reader, observer = Writer(self.cluster), _Reader(self.cluster), _Observer(self.cluster)
        writer.start("chaos")
        reader.start()
        observer.start()
        started_wall, started = time.time(), time.monotonic()
        schedule = plan(
            seed, steps=1000, replicas=self.replicas, only=only, kube_nodes=self.nodes is not None
        )
        done: list[Step] = []
        unrecovered: str | None = None
        aborted: str | None = None
        try:
            await writer.warmed_up()
            for step in schedule:
                if time.monotonic() - started > seconds:
                    break
                if self._api_server_back is not None:  # the kubelets' watches back (see the constant)
                    settled = self._api_server_back + KUBELET_WATCH_SETTLE_SECONDS
                    await asyncio.sleep(settled - time.monotonic())
                done.append(step)
                try:
                    outcome = await self._step(step, writer, observer)
                except (FaultError, errors.KubeError, httpx.HTTPError) as error:
                    # The run's measurements so far are kept: the result says where and why it stopped.
                    aborted = f"step {step.number} ({'+'.join(step.faults)}): {type(error).__name__}: {error}"
                    break
                self.results.append(outcome)
                if not outcome["recovered"]:
                    unrecovered = f"step {step.number} ({'+'.join(step.faults)}) did not recover"
                    break
                await asyncio.sleep(2)  # a calm moment between faults
        finally:
            await writer.stop()
            await reader.stop()
        try:
            if unrecovered is None:  # a roll the last step started may still be going on
                await self._settled()
                await self._recovered(time.monotonic(), observer)
            await asyncio.sleep(5)  # followers apply what was committed last
        finally:
            await observer.stop()
        held, unread = await self._held_everywhere(writer.acknowledged)
        lost = lost_writes(writer.acknowledged, held)
        actions = await self._destructive_actions(started_wall)
        judged = judge_actions(actions, observer.samples, self.replicas)
        by_fault = score_by_fault(self.results)
        return {
            "seed": seed,
            "replicas": self.replicas,
            "seconds": round(time.monotonic() - started, 1),
            "schedule": [asdict(step) for step in done],
            "steps": self.results,
            "acknowledged_writes": len(writer.acknowledged),
            # None when some node could not be read: nothing is proven then.
            "acknowledged_lost": None if unread else max((len(ids) for ids in lost.values()), default=0),
            "lost_by_node": {node: ids[:20] for node, ids in lost.items()},
            "nodes_not_read": unread,
            "longest_write_gap_seconds": round(writer.longest_gap(started), 1),
            "failed_writes": writer.failed(started),
            "reads": {"ok": reader.ok, "failed": reader.failed, "failures": dict(reader.failures)},
            "destructive_actions": [{**asdict(j), "at": round(j.at - started_wall, 1)} for j in judged],
            "unjustified_destructive_actions": sum(1 for j in judged if not j.justified),
            "unrecovered": unrecovered,
            "unhealed_faults": self.unhealed,
            "unapplied_faults": self.unapplied,
            "aborted": aborted,
            "by_fault": by_fault,
            "write_gap_targets_missed": {
                kind: entry["missed_by_steps"] for kind, entry in by_fault.items() if entry["missed_by_steps"]
            },
        }

    # -- one step

    async def _step(self, step: Step, writer: Writer, observer: _Observer) -> dict[str, Any]:
        fault_at = time.monotonic()
        wall = time.time()
        healing, roles = [], []
        for fault in step.faults:
            self._touched = []
            healing.append(await self._apply(fault, step))
            roles.append(self._touched[0] if self._touched else None)
        # A sample of the faulted state at once: the operator may act on a kubelet's report within half
        # a second, before the observer's next round, and its action is judged by what was seen before.
        await observer.once()
        await asyncio.gather(*(heal() for heal in healing))
        healed_at = time.monotonic()
        recovered, ready_after = await self._recovered(fault_at, observer, writer)
        first_write = writer.first_ack_after(fault_at)
        events = await self.cluster.timeline(wall)
        stuck = {} if recovered else await self._stuck(observer)
        return {
            "step": step.number,
            "faults": list(step.faults),
            "kind": fault_kind(step.faults, roles),
            "hold_seconds": step.hold_seconds,
            # The moment of the fault, to find the step in the logs (--logs) by their timestamps.
            "started_at": micro_time(wall),
            "recovered": recovered,
            "seconds_to_whole": None if ready_after is None else round(ready_after, 1),
            "seconds_to_first_accepted_write": None if first_write is None else round(first_write, 1),
            "longest_write_gap_seconds": round(writer.longest_gap(fault_at), 1),
            "write_gap_after_heal_seconds": round(writer.longest_gap(healed_at), 1),
            "events": [e for e in events if e["reason"] not in ("Updated", "Created")][:20],
            "ready_timeline": self.ready_timeline[:16],
            **stuck,
        }

    async def _stuck(self, observer: _Observer) -> dict[str, Any]:
        """What an unrecovered step left: every node's last raft state, and the cluster's quorum
        record and Ready condition, so that the failure can be read from the result alone."""
        latest = observer.latest()
        status: dict[str, Any] = {}
        with contextlib.suppress(errors.KubeError):
            status = (await self.cluster.get()).get("status") or {}
        return {
            "stuck_states": dict(latest.states) if latest else {},
            "stuck_quorum": status.get("quorum"),
            "stuck_ready": next((c for c in status.get("conditions", []) if c.get("type") == "Ready"), None),
        }

    async def _recovered(
        self, since: float, observer: _Observer, writer: Writer | None = None
    ) -> tuple[bool, float | None]:
        """Whether the cluster is whole again (Ready with every member healthy, no roll under way,
        every desired node in the raft, one leader, and a write accepted) within
        :attr:`recover_within`, and after how long. Only what was seen after ``since`` counts: a
        sample taken just before a fault would call the cluster whole at once."""
        deadline = since + self.recover_within
        since_wall = time.time() - (time.monotonic() - since)
        self.ready_timeline = []
        while time.monotonic() < deadline:
            await self._note_ready(since)
            sample = observer.latest()
            whole = (
                sample is not None
                and sample.at > max(since_wall + 1, time.time() - 2)
                and (writer is None or writer.first_ack_after(since) is not None)
                and len(sample.states) == self.replicas
                and all(state in RAFT_MEMBER for state in sample.states.values())
                and list(sample.states.values()).count("LEADER") == 1
            )
            if whole and await self.cluster.is_whole(self.replicas):
                return True, time.monotonic() - since
            await asyncio.sleep(0.5)
        return False, None

    async def _note_ready(self, since: float) -> None:
        """The cluster's Ready condition, noted when its reason or message changed: what the operator
        decided and waited for, second by second, in the step's result (the operator logs no decision
        of its own; they are its conditions and Events)."""
        # Bounded: while a step restarts the API server, the client waits for it.
        with contextlib.suppress(errors.KubeError, httpx.HTTPError, TimeoutError):
            async with asyncio.timeout(2):
                ready = condition(await self.cluster.get(), "Ready") or {}
            said = f"{ready.get('reason')}: {ready.get('message')}"[:240]
            if not self.ready_timeline or self.ready_timeline[-1][1] != said:
                self.ready_timeline.append((round(time.monotonic() - since, 1), said))

    async def _settled(self, within: float = 300.0) -> None:
        """Until no roll is under way (the Progressing condition is not True), or ``within`` passed."""
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            with contextlib.suppress(errors.KubeError):
                if (condition(await self.cluster.get(), "Progressing") or {}).get("status") != "True":
                    return
            await asyncio.sleep(1)

    async def _pods_by_role(self) -> tuple[str | None, list[str]]:
        states = await self.cluster.states()
        leader = next((pod for pod, state in states.items() if state == "LEADER"), None)
        return leader, sorted(pod for pod in states if pod != leader)

    async def _heal(self, call: Callable[[], Awaitable[object]], step: Step, within: float = 60.0) -> None:
        """End a fault, trying again while it cannot be ended (freeing a disk asks the API server, which a
        step may be restarting); a pod gone meanwhile (fenced, re-made) needs no healing. A fault that
        could not be ended is named in the step's result: what follows it is no recovery failure."""
        deadline = time.monotonic() + within
        while True:
            try:
                await call()
                return
            except (FaultError, errors.Unavailable) as error:
                # Unavailable: the API server is away (a step restarts it); the fault ends once it is back.
                if isinstance(error, TargetGone):
                    return
                if time.monotonic() > deadline:
                    self.unhealed.append(f"step {step.number}: {error}")
                    return
            await asyncio.sleep(1)

    async def _on_container(
        self, act: Callable[[str, str, str], Awaitable[object]], namespace: str, pod: str, what: str
    ) -> bool:
        """``act`` on the pod's Typesense container, tried again for up to 10 s while the container is
        between two runs (killed a moment before, its kubelet starting it again); a container that
        never runs meanwhile is left alone, and the fault named in the result as not applied."""
        deadline = time.monotonic() + 10
        while True:
            try:
                await act(namespace, pod, "typesense")
                return True
            except FaultError as error:
                if time.monotonic() > deadline or not isinstance(error, TargetGone):
                    self.unapplied.append(f"{what} on {pod}: {error}")
                    return False
            await asyncio.sleep(1)

    async def _apply(self, fault: str, step: Step) -> Any:
        """Start one fault; returns the coroutine function that ends it after the step's hold (a no-op
        for a fault nothing ends: a killed process restarts by itself, a deleted pod is made again)."""
        namespace, hold = self.cluster.namespace, step.hold_seconds
        leader, followers = await self._pods_by_role()
        pods = sorted(await self.cluster.pod_ips())
        chooser = random.Random(step.number)  # noqa: S311 - which pod, not a secret
        majority = ([leader] if leader else []) + followers
        majority = majority[: self.replicas // 2 + 1]

        target = {"leader": [leader] if leader else [], "follower": followers[:1], "majority": majority}
        if fault in KUBE_NODE_FAULTS:
            return await self._apply_to_kube_node(fault, target, step)
        kind, _, whom = fault.partition("-")
        if kind in ("kill", "freeze") and whom in target:
            act = self.faults.kill if kind == "kill" else self.faults.freeze
            chosen = [
                pod
                for pod in target[whom]
                if pod and await self._on_container(act, namespace, pod, f"step {step.number}: {fault}")
            ]
            if kind == "kill":
                return _nothing
            return self._held(
                step, *(functools.partial(self.faults.thaw, namespace, pod, "typesense") for pod in chosen)
            )
        if fault == "delete-pod" and pods:
            pod = chooser.choice(pods)
            self._touched.append("leader" if pod == leader else "follower")
            await self.cluster.kube.delete("v1", "Pod", pod, namespace)
            return _nothing
        if fault == "delete-all-pods":
            for pod in pods:
                await self.cluster.kube.delete("v1", "Pod", pod, namespace)
            return _nothing
        if fault == "orphan-statefulset":
            await self.cluster.kube.delete(
                "apps/v1", "StatefulSet", self.statefulset, namespace, propagation="Orphan"
            )
            return _nothing
        if fault == "disk-full" and pods:
            pod = chooser.choice(pods)
            self._touched.append("leader" if pod == leader else "follower")
            claim = f"data-{pod}"
            await self.faults.fill_volume(namespace, claim)
            return self._held(step, functools.partial(self.faults.free_volume, namespace, claim))
        if fault == "kill-operator":
            self.operator.kill()

            async def start_operator() -> None:
                await asyncio.sleep(hold)
                await asyncio.to_thread(self.operator.start)

            return start_operator
        if fault == "restart-apiserver":
            # Blocking: it stops the API server, waits, starts it, and returns once it answers.
            restart = asyncio.create_task(asyncio.to_thread(self.plane.restart_apiserver, min(hold, 8.0)))

            async def answered() -> None:
                await restart
                self._api_server_back = time.monotonic()

            return answered
        if fault == "roll":
            patch = {"spec": {"podAnnotations": {"chaos.operator-suite.io/step": str(step.number)}}}
            await self.cluster.kube.patch(
                "ts.opentelekomcloud.com/v1alpha1", "TypesenseCluster", self.cluster.name, namespace, patch
            )
            return _nothing
        return _nothing

    async def _apply_to_kube_node(
        self, fault: str, target: Mapping[str, list[str]], step: Step
    ) -> Callable[[], Awaitable[None]]:
        """Start a fault of the Kubernetes node that runs the leader's or a follower's member; returns
        what ends it after the step's hold (the node rebooted, reconnected or uncordoned)."""
        assert self.nodes is not None
        nodes = self.nodes
        action, _, whom = fault.rpartition("-")
        pod = next(iter(target[whom]), None)
        node = await self.cluster.node_of(pod) if pod else None
        if pod is None or node is None:
            self.unapplied.append(f"step {step.number}: {fault}: no {whom} on a node")
            return _nothing
        self._touched.append(whom)
        if action == "power-cut":
            await asyncio.to_thread(nodes.power_cut, node)
            end: Callable[[], object] = functools.partial(nodes.reboot_if_cut, node)
        elif action == "isolate":
            await asyncio.to_thread(nodes.isolate, node)
            end = functools.partial(nodes.reconnect, node)
        else:
            # Begun in the background: the drain's evictions wait for the member's graceful stop, and
            # the step's fault begins at the cordon, not when the last pod is gone.
            draining = asyncio.create_task(asyncio.to_thread(nodes.drain, node, 120.0))

            async def uncordon() -> None:
                with contextlib.suppress(FaultError):
                    await draining
                await asyncio.to_thread(nodes.uncordon, node)

            return self._held(step, uncordon, within=180.0)
        # A reboot waits for the node to be Ready again, which takes longer than a thaw.
        return self._held(step, lambda: asyncio.to_thread(end), within=180.0)

    def _held(
        self, step: Step, *ends: Callable[[], Awaitable[object]], within: float = 60.0
    ) -> Callable[[], Awaitable[None]]:
        """What ends a fault: after the step's hold, each of ``ends`` (see :meth:`_heal`)."""

        async def after_the_hold() -> None:
            await asyncio.sleep(step.hold_seconds)
            for end in ends:
                await self._heal(end, step, within)

        return after_the_hold

    # -- the end

    async def _held_everywhere(
        self, acknowledged: Sequence[str], within: float = 120.0
    ) -> tuple[dict[str, set[str]], list[str]]:
        """Every node's document ids (its export of the collection), and the nodes that gave none within
        ``within`` seconds (a node still restarting, for a roll that outlived the last step, answers
        503 "Not Ready or Lagging" meanwhile).

        A node whose export lacks acknowledged ids is read again until it holds them all or ``within``
        ends: a node restarted moments before replays its log into its index in batches, and its
        export answers 200 meanwhile with what it has indexed so far (seen in a soak: a follower
        restarted 10 s before the end still had 1,363 committed writes queued for its index)."""
        wanted = set(acknowledged)
        held: dict[str, set[str]] = {}
        complete: set[str] = set()
        deadline = time.monotonic() + within
        pods = await self.cluster.pod_ips()
        while len(complete) < len(pods) and time.monotonic() < deadline:
            for pod, ip in pods.items():
                if pod in complete:
                    continue
                with contextlib.suppress(httpx.HTTPError, ValueError, KeyError):
                    answer = await self.cluster.http.get(
                        f"http://{ip}:8108/collections/books/documents/export",
                        headers=self.cluster.headers,
                        timeout=60,
                    )
                    if answer.status_code == 200:
                        held[pod] = {
                            json.loads(line)["id"] for line in answer.text.splitlines() if line.strip()
                        }
                        if wanted <= held[pod]:
                            complete.add(pod)
            if len(complete) < len(pods):
                await asyncio.sleep(2)
                pods = await self.cluster.pod_ips()
        return held, sorted(set(pods) - set(held))

    async def _destructive_actions(self, since: float) -> list[tuple[float, str, str]]:
        found = []
        for event in await self.cluster.kube.list("v1", "Event", self.cluster.namespace):
            if event.get("reason") not in DESTRUCTIVE_REASONS or not event.get("eventTime"):
                continue
            at = datetime.fromisoformat(event["eventTime"].replace("Z", "+00:00")).timestamp()
            if at >= since:
                found.append((at, str(event["reason"]), str(event.get("message") or "")[:300]))
        return sorted(found)
