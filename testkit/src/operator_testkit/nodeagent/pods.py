"""One worker per pod: what the kubelet does for a pod bound to one of the agent's nodes.

A :class:`PodWorker` takes a pod from binding to removal:

1. gets a fresh loopback address from the agent, and prepares the pod directory,
   its volumes (waiting for PersistentVolumeClaims to be bound) and its hosts file;
2. runs the init containers one after another, then starts every container through
   the runner registry; each :class:`ContainerRun` restarts its container as
   ``restartPolicy`` says, with a doubling back-off, and runs its probes; a container
   that cannot start waits with a reason and a message (:mod:`.failures`), posts a
   Warning Event and logs a line, once per new failure, and is retried;
3. writes the pod status whenever it changes (and only then);
4. keeps ConfigMap, Secret and downward-API volumes in sync with their sources, and
   projected ServiceAccount tokens fresh (asked of the API server's TokenRequest, bound
   to the pod, renewed after 80 % of their lifetime, as the kubelet does);
5. on deletion: SIGTERM to every container, SIGKILL after the grace period, a final
   (terminal) status, then removes the pod object, as the kubelet does.

Each container's output goes to ``STATE/logs/{ns}_{pod}_{uid}/{container}/{restart}.log``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any, Protocol

import httpx

from operator_core import errors
from operator_core.events import EventRecorder, EventType
from operator_core.kube import Kube
from operator_core.secrets import REDACTED, register_secret, scrub
from operator_testkit.nodeagent.env import (
    ConfigError,
    PodFacts,
    ResolvedEnv,
    expand,
    master_service_env,
    resolve_env,
    service_links,
)
from operator_testkit.nodeagent.failures import waiting_for
from operator_testkit.nodeagent.hosts import build_hosts, write_in_place
from operator_testkit.nodeagent.probes import ProbeSpec, ProbeTracker, probe_once
from operator_testkit.nodeagent.processes import ContainerProcess, run_to_exit
from operator_testkit.nodeagent.runners import Launch, LaunchContext, Runner, runner_for
from operator_testkit.nodeagent.status import ContainerSnapshot, pod_status, timestamp
from operator_testkit.nodeagent.volumes import (
    Mount,
    TokenRequest,
    give_to_group,
    is_file_volume,
    mount_table,
    sync_files,
    token_requests,
    translate,
    translate_all,
    volume_files,
)

__all__ = ["STAND_IN_ANNOTATION", "AgentReason", "PodServices", "PodWorker"]

log = logging.getLogger(__name__)

STAND_IN_ANNOTATION = "nodeagent.operator-suite.io/stand-in"
BASE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# The kubelet starts its crash-loop back-off at 10 s and caps it at 5 min; tests want faster feedback.
BACKOFF_START, BACKOFF_MAX, BACKOFF_RESET_AFTER = 1.0, 30.0, 60.0
VOLUME_SYNC_SECONDS = 3.0
RETRY_SECONDS = 2.0
_TERMINATION_MESSAGE_BYTES = 4096  # the kubelet keeps no more of a termination log
TOKEN_RENEW_AFTER = 0.8  # of a token's lifetime, as the kubelet does

Manifest = dict[str, Any]


class AgentReason(StrEnum):
    """The Event reasons the agent posts (the kubelet's, plus StandIn)."""

    STARTED = "Started"
    STAND_IN = "StandIn"
    KILLING = "Killing"
    UNHEALTHY = "Unhealthy"
    BACK_OFF = "BackOff"
    FAILED = "Failed"


class PodServices(Protocol):
    """What a worker needs from the agent."""

    kube: Kube
    events: EventRecorder
    http: httpx.AsyncClient
    state_dir: Path

    @property
    def runners(self) -> Sequence[tuple[str, Runner]]: ...

    def allocate_ip(self, uid: str, wanted: str | None) -> str: ...

    def release_ip(self, uid: str) -> None: ...

    def host_ip(self, node_name: str) -> str: ...

    def cluster_names(self) -> tuple[list[Manifest], list[Manifest]]: ...


def _now() -> datetime:
    return datetime.now(UTC)


def _redactor(secret_values: set[str]) -> Callable[[str], str]:
    values = sorted((v for v in secret_values if v), key=len, reverse=True)

    def redact(text: str) -> str:
        for value in values:
            text = text.replace(value, REDACTED)
        return text

    return redact


def runs_to_completion(pod: Mapping[str, Any]) -> bool:
    """A Job's pod, or any pod whose restartPolicy lets containers finish for good."""
    owners = pod.get("metadata", {}).get("ownerReferences") or []
    policy = pod.get("spec", {}).get("restartPolicy", "Always")
    return policy != "Always" or any(owner.get("kind") == "Job" for owner in owners)


@dataclass
class _Run:
    """The runtime state of a container that the status reports."""

    state: str = "waiting"
    reason: str = "ContainerCreating"
    message: str = ""
    started_at: datetime | None = None
    finished_at: datetime | None = None
    exit_code: int | None = None
    ready: bool = False
    started: bool = False
    will_restart: bool = False
    container_id: str = ""
    last_state: Manifest | None = None


class ContainerRun:
    """One container of a pod: launches, restarts, probes."""

    def __init__(self, worker: PodWorker, spec: Manifest, *, init: bool) -> None:
        self.worker = worker
        self.spec = spec
        self.name: str = spec["name"]
        self.init = init
        self.restart_count = 0
        self.run = _Run()
        self.process: ContainerProcess | None = None
        self.launch: Launch | None = None
        self._last_failure = ""
        self.held: asyncio.Event | None = None
        """Set while a fault holds the container down: it is not restarted until :meth:`release`."""

    def hold_down(self) -> None:
        """Keep the container down after its process ends, as a dead machine would, until released."""
        if self.held is None:
            self.held = asyncio.Event()

    def release(self) -> None:
        if self.held is not None:
            self.held.set()

    @property
    def restart_policy(self) -> str:
        policy = str(self.worker.pod["spec"].get("restartPolicy", "Always"))
        if self.init:
            return "Never" if policy == "Never" else "OnFailure"
        return policy

    def snapshot(self) -> ContainerSnapshot:
        r = self.run
        return ContainerSnapshot(
            name=self.name,
            image=str(self.spec.get("image", "")),
            state=r.state,
            reason=r.reason,
            message=r.message,
            started_at=r.started_at,
            finished_at=r.finished_at,
            exit_code=r.exit_code,
            restart_count=self.restart_count,
            ready=r.ready,
            started=r.started,
            will_restart=r.will_restart,
            container_id=r.container_id,
            last_state=r.last_state,
        )

    def log_path(self) -> Path:
        return self.worker.log_dir / self.name / f"{self.restart_count}.log"

    async def supervise(self) -> None:
        """Run the container until it is finished for good or the pod terminates."""
        backoff = BACKOFF_START
        worker = self.worker
        while not worker.terminating.is_set():
            try:
                self.launch = await worker.build_launch(self)
                if worker.terminating.is_set():
                    return
                await self._start(self.launch)
            except Exception as error:  # every failure to start is the container's waiting reason
                await self._cannot_start(error)
                if await worker.sleep(RETRY_SECONDS):
                    return
                continue
            self._last_failure = ""
            assert self.process is not None
            if worker.terminating.is_set():  # deleted while it was starting
                await self.process.stop(worker.grace_period())
            probes = asyncio.create_task(self._probe(self.process), name=f"probes {self.name}")
            code = await self.process.wait()
            probes.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await probes
            ran_for = (_now() - (self.run.started_at or _now())).total_seconds()
            restart = not worker.terminating.is_set() and (
                self.restart_policy == "Always" or (self.restart_policy == "OnFailure" and code != 0)
            )
            self._terminated(code, restart)
            worker.changed()
            if not restart:
                return
            if self.held is not None:
                self.run.state, self.run.reason = "waiting", "HeldDown"
                self.run.message = (
                    f"{self.name} is held down by a fault; `operator-suite-dev agent up` releases it"
                )
                worker.changed()
                if await worker.wait_or_terminate(self.held):
                    return
                self.held = None
                backoff = BACKOFF_START
            backoff = BACKOFF_START if ran_for > BACKOFF_RESET_AFTER else backoff
            note = f"Back-off {backoff:.0f}s restarting {self.name}"
            await worker.event("Warning", AgentReason.BACK_OFF, note)
            self.run.state, self.run.reason = "waiting", "CrashLoopBackOff"
            self.run.message = f"back-off {backoff:.0f}s restarting failed container {self.name}"
            worker.changed()
            if await worker.sleep(backoff):
                return
            backoff = min(backoff * 2, BACKOFF_MAX)
            self.restart_count += 1

    async def _cannot_start(self, error: Exception) -> None:
        """Waiting, with the reason and message; a Warning Event and a log line when the failure is new."""
        waiting = waiting_for(error, self.name)
        message = scrub(waiting.message)
        self.run.state, self.run.reason, self.run.message = "waiting", str(waiting.reason), message
        self.worker.changed()
        if message == self._last_failure:
            return
        self._last_failure = message
        log.warning(
            "pod %s: container %s cannot start: %s: %s",
            self.worker.key,
            self.name,
            waiting.reason,
            message,
            exc_info=None if waiting.expected else error,
        )
        await self.worker.event("Warning", AgentReason.FAILED, f"Error: {waiting.reason}: {message}")

    async def _start(self, launch: Launch) -> None:
        worker = self.worker
        log.info("pod %s: starting %s: %s", worker.key, self.name, launch.description)
        self.process = await ContainerProcess.start(
            launch.argv,
            env=launch.env,
            cwd=worker.working_dir(self),
            hosts_file=worker.hosts_file,
            log_path=self.log_path(),
            mounts=launch.mounts,
            hostname=worker.hostname,
            root=launch.root,
        )
        self.run = _Run(
            state="running",
            reason="",
            started_at=_now(),
            started="startupProbe" not in self.spec,
            container_id=f"nodeagent://{worker.uid[:8]}-{self.name}-{self.process.pid}",
            last_state=self.run.last_state,
        )
        self.run.ready = self.run.started and "readinessProbe" not in self.spec and not self.init
        worker.changed()
        note = f"Started container {self.name}"
        if launch.stand_in:
            note += f" as a STAND-IN for image {self.spec.get('image')} (not the real program)"
        await worker.event("Normal", AgentReason.STARTED, note)

    def _termination_message(self, code: int) -> str:
        """What the kubelet reports as ``terminated.message``: the termination log the container wrote
        (4096 bytes at most), or with ``FallbackToLogsOnError`` the end of its log when it failed
        without writing one."""
        written = ""
        log = self.launch.termination_log if self.launch is not None else None
        if log is not None:
            with contextlib.suppress(OSError):
                written = log.read_bytes()[:_TERMINATION_MESSAGE_BYTES].decode(errors="replace")
        if written or code == 0 or self.spec.get("terminationMessagePolicy") != "FallbackToLogsOnError":
            return written
        with contextlib.suppress(OSError):
            lines = self.log_path().read_bytes().decode(errors="replace").splitlines()[-80:]
            return "\n".join(lines)[-2048:]
        return ""

    def _terminated(self, code: int, restart: bool) -> None:
        finished = _now()
        reason = "Completed" if code == 0 else "Error"
        self.run.state, self.run.reason, self.run.exit_code = "terminated", reason, code
        self.run.finished_at, self.run.ready, self.run.will_restart = finished, False, restart
        self.run.message = self._termination_message(code)
        if restart:
            # lastState is the previous termination; a container finished for good shows it as state.
            self.run.last_state = {
                "terminated": {
                    "exitCode": code,
                    "reason": reason,
                    "startedAt": timestamp(self.run.started_at or finished),
                    "finishedAt": timestamp(finished),
                    "containerID": self.run.container_id,
                }
            }

    # -- probes

    async def _probe(self, process: ContainerProcess) -> None:
        """Startup probe first (if any), then readiness and liveness side by side."""
        if self.init:
            return
        startup = self.spec.get("startupProbe")
        if startup and not await self._probe_loop("startup", startup, process):
            return
        self.run.started = True
        self.run.ready = "readinessProbe" not in self.spec
        self.worker.changed()
        loops = [
            self._probe_loop(kind, self.spec[f"{kind}Probe"], process)
            for kind in ("readiness", "liveness")
            if f"{kind}Probe" in self.spec
        ]
        if loops:
            await asyncio.gather(*loops)

    async def _probe_loop(self, kind: str, probe: Manifest, process: ContainerProcess) -> bool:
        """Probe until cancelled; a startup probe returns True once it passes. False: container killed."""
        spec = ProbeSpec.of(probe)
        tracker = ProbeTracker(spec, passing=kind != "readiness")
        await asyncio.sleep(spec.initial_delay)
        while True:
            ok = await probe_once(
                probe,
                container=self.spec,
                pod_ip=self.worker.ip or "127.0.0.1",
                http=self.worker.services.http,
                run_exec=self._exec,
            )
            passing = tracker.observe(ok)
            if kind == "startup" and ok and passing:
                return True
            if kind == "readiness" and passing != self.run.ready:
                self.run.ready = passing
                self.worker.changed()
            if kind != "readiness" and not passing:
                # Liveness and startup probes start passing; failureThreshold failures in a row kill.
                note = f"{kind.capitalize()} probe failed {tracker.failures} times for {self.name}"
                await self.worker.event("Warning", AgentReason.UNHEALTHY, note)
                note = f"Container {self.name} failed its {kind} probe, will be restarted"
                await self.worker.event("Normal", AgentReason.KILLING, note)
                await process.stop(self.worker.grace_period())
                return False
            await asyncio.sleep(spec.period)

    async def _exec(self, command: Sequence[str], limit: float) -> int:
        """An exec probe: the command runs locally in the container's context (stand-ins always pass)."""
        launch = self.launch
        if launch is None or launch.stand_in:
            return 0
        mounts = self.worker.mounts(self.spec)
        return await run_to_exit(
            translate_all(command, mounts),
            env=launch.env,
            cwd=self.worker.working_dir(self),
            hosts_file=self.worker.hosts_file,
            limit=limit,
            mounts=launch.mounts,
            hostname=self.worker.hostname,
            root=launch.root,
        )

    async def stop(self, grace: float) -> None:
        if self.process is not None and self.process.returncode is None:
            await self.worker.event("Normal", AgentReason.KILLING, f"Stopping container {self.name}")
            await self.process.stop(grace)


class PodWorker:
    """Runs one pod; the agent feeds it the latest pod manifest with :meth:`update`."""

    def __init__(self, services: PodServices, pod: Manifest) -> None:
        self.services = services
        self.pod = pod
        metadata = pod["metadata"]
        self.uid: str = metadata["uid"]
        self.namespace: str = metadata["namespace"]
        self.name: str = metadata["name"]
        self.key = f"{self.namespace}/{self.name}"
        self.directory = services.state_dir / "pods" / self.uid
        self.log_dir = services.state_dir / "logs" / f"{self.namespace}_{self.name}_{self.uid}"
        self.hosts_file = self.directory / "hosts"
        self.ip: str | None = None
        self.volume_dirs: dict[str, Path] = {}
        self.init_runs = [ContainerRun(self, c, init=True) for c in pod["spec"].get("initContainers") or []]
        self.runs = [ContainerRun(self, c, init=False) for c in pod["spec"].get("containers") or []]
        self.terminating = asyncio.Event()
        self.gone = False  # the pod object vanished: no more API writes
        self.finished = False
        self._changed = asyncio.Event()
        self._written: Manifest | None = None
        self._start_time = _now()
        self._stand_ins: set[str] = set()
        self._tokens: dict[TokenRequest, tuple[bytes, float]] = {}  # token, when to renew it
        self._helpers: list[asyncio.Task[None]] = []
        self._supervisors: asyncio.Future[Any] | None = None
        self.task: asyncio.Task[None] | None = None

    # -- called by the agent

    def update(self, pod: Manifest) -> None:
        before = self.pod["metadata"].get("deletionGracePeriodSeconds")
        self.pod = pod
        if pod["metadata"].get("deletionTimestamp"):
            self.terminating.set()
        after = pod["metadata"].get("deletionGracePeriodSeconds")
        if before is not None and after is not None and after < before:
            # A second delete with a shorter grace (a kubelet honours it): kill at the new deadline.
            self._helpers.append(asyncio.create_task(self._kill_after(float(after))))

    async def _kill_after(self, grace: float) -> None:
        await asyncio.sleep(grace)
        for run in [*self.init_runs, *self.runs]:
            if run.process is not None and run.process.returncode is None:
                run.process.signal(signal.SIGKILL)

    def vanish(self) -> None:
        """The pod object is gone (force-deleted, or deleted after it finished): stop at once."""
        self.gone = True
        self.terminating.set()

    def changed(self) -> None:
        self._changed.set()

    async def stop(self, grace: float) -> None:
        """The agent is shutting down: stop the containers, write nothing more to the API."""
        self.gone = True
        await self._stop_containers(grace)

    def container_run(self, name: str | None) -> ContainerRun:
        """A container by name (init containers too); the first container when ``name`` is None."""
        runs = [*self.runs, *self.init_runs]
        if name is None and self.runs:
            return self.runs[0]
        for run in runs:
            if run.name == name:
                return run
        raise LookupError(f"pod {self.key} has no container {name!r}")

    async def crash(self, limit: float = 10.0) -> None:
        """A power cut: SIGKILL every container at once, restart nothing, write nothing more.

        Returns once the processes are gone (or after ``limit`` seconds), so that a
        re-created pod never runs beside its predecessor on the same volume.
        """
        self.gone = True
        self.terminating.set()
        processes = [r.process for r in [*self.init_runs, *self.runs] if r.process is not None]
        for process in processes:
            process.signal(signal.SIGKILL)
        deadline = asyncio.get_running_loop().time() + limit
        while any(p.returncode is None for p in processes):
            if asyncio.get_running_loop().time() > deadline:
                log.warning("pod %s: processes outlived SIGKILL for %.0f s", self.key, limit)
                return
            await asyncio.sleep(0.05)

    # -- helpers for container runs

    async def wait_or_terminate(self, event: asyncio.Event) -> bool:
        """Wait for ``event`` or the pod's termination; returns whether it is terminating."""
        waiters = [asyncio.ensure_future(event.wait()), asyncio.ensure_future(self.terminating.wait())]
        try:
            await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in waiters:
                waiter.cancel()
        return self.terminating.is_set()

    async def sleep(self, seconds: float) -> bool:
        """Sleep, waking early when the pod terminates; returns whether it is terminating."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.terminating.wait(), seconds)
        return self.terminating.is_set()

    def grace_period(self) -> float:
        metadata, spec = self.pod["metadata"], self.pod["spec"]
        grace = metadata.get("deletionGracePeriodSeconds")
        if grace is None:
            grace = spec.get("terminationGracePeriodSeconds", 30)
        return float(grace)

    async def event(self, event_type: EventType, reason: AgentReason, note: str) -> None:
        if self.gone:
            return
        regarding = {**self.pod, "apiVersion": "v1", "kind": "Pod"}
        try:
            await self.services.events.emit(regarding, event_type, reason, note)
        except Exception as error:  # an Event is best effort, as in the kubelet
            log.debug("pod %s: event not posted: %s", self.key, error)

    def mounts(self, container: Manifest) -> list[Mount]:
        return mount_table(container, self.volume_dirs)

    def working_dir(self, run: ContainerRun) -> Path:
        """The container's workingDir when it lies in a volume, else the pod's directory."""
        wanted = run.spec.get("workingDir")
        if wanted:
            translated = Path(translate(str(wanted), self.mounts(run.spec)))
            if translated.is_dir() and translated.is_relative_to(self.services.state_dir):
                return translated
        directory: Path = self.directory
        return directory

    async def _namespace_objects(self, kind: str, names: set[str]) -> dict[str, Manifest]:
        found = {}
        for name in sorted(names):
            obj = await self.services.kube.get("v1", kind, name, self.namespace)
            if obj is not None:
                found[name] = obj
        return found

    async def build_launch(self, run: ContainerRun) -> Launch:
        """Resolve env, command and mounts of one container and ask its runner for a launch."""
        container = run.spec
        config_map_names, secret_names = _env_references(container)
        config_maps = await self._namespace_objects("ConfigMap", config_map_names)
        secrets = await self._namespace_objects("Secret", secret_names)
        facts = self.facts
        resolved: ResolvedEnv = resolve_env(self.pod, container, facts, config_maps, secrets)
        for value in resolved.secret_values:
            register_secret(value)
        services, _ = self.services.cluster_names()
        env = {
            "PATH": BASE_PATH,
            "HOSTNAME": self.hostname,
            "HOME": "/root",
            **master_service_env(services),
            **resolved.values,
        }
        context = LaunchContext(
            container=container,
            pod_ip=facts.pod_ip,
            command=[expand(str(c), resolved.values) for c in container.get("command") or []],
            args=[expand(str(a), resolved.values) for a in container.get("args") or []],
            env=env,
            mounts=self.mounts(container),
            runs_to_completion=run.init or runs_to_completion(self.pod),
            redact=_redactor(resolved.secret_values),
            scratch=self.directory / "runners" / run.name,
            pod=self.pod,
            kubelet_env={
                "HOSTNAME": self.hostname,
                **service_links(services, self.namespace, self.pod["spec"].get("enableServiceLinks", True)),
            },
            container_env=resolved.values,
        )
        runner = runner_for(str(container.get("image", "")), self.services.runners)
        if getattr(runner, "blocking", False):  # an image unpacked at its first launch takes seconds
            launch = await asyncio.to_thread(runner.launch, context)
        else:
            launch = runner.launch(context)
        if launch.stand_in and run.name not in self._stand_ins:
            self._stand_ins.add(run.name)
            await self._mark_stand_ins()
        return launch

    async def _mark_stand_ins(self) -> None:
        names = ",".join(sorted(self._stand_ins))
        patch = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": self.name,
                "namespace": self.namespace,
                "annotations": {STAND_IN_ANNOTATION: names},
            },
        }
        with contextlib.suppress(Exception):
            await self.services.kube.apply(patch)
        await self.event(
            "Warning",
            AgentReason.STAND_IN,
            f"containers {names} run a node-agent stand-in, not their image's program",
        )

    @property
    def hostname(self) -> str:
        return str(self.pod["spec"].get("hostname") or self.name)

    @property
    def host_ip(self) -> str:
        return self.services.host_ip(self.pod["spec"]["nodeName"])

    @property
    def facts(self) -> PodFacts:
        assert self.ip is not None, "the pod has no address yet"
        return PodFacts(pod_ip=self.ip, host_ip=self.host_ip, node_name=self.pod["spec"]["nodeName"])

    # -- the pod's life

    async def run(self) -> None:
        try:
            await self._live()
        except asyncio.CancelledError:
            await self._stop_containers(0)
            raise
        except Exception:
            log.exception("pod %s: worker failed", self.key)
            await self._stop_containers(0)
        finally:
            for helper in self._helpers:
                helper.cancel()
            self.services.release_ip(self.uid)
            self.finished = True

    async def _live(self) -> None:
        previous_ip = (self.pod.get("status") or {}).get("podIP")
        self.ip = self.services.allocate_ip(self.uid, previous_ip)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.refresh_hosts()
        self._helpers.append(asyncio.create_task(self._status_loop(), name=f"status {self.key}"))
        await self._write_status()
        while not await self._prepare_volumes():
            if await self.sleep(RETRY_SECONDS):
                break
        self._helpers.append(asyncio.create_task(self._volume_loop(), name=f"volumes {self.key}"))
        initialized = True
        for init in self.init_runs:
            if self.terminating.is_set():
                break
            await init.supervise()
            if init.run.exit_code != 0:
                initialized = False
                break
        if initialized and not self.terminating.is_set():
            supervisors = [asyncio.create_task(r.supervise(), name=f"{self.key} {r.name}") for r in self.runs]
            waiter = asyncio.create_task(self.terminating.wait())
            everything: asyncio.Future[Any] = asyncio.gather(*supervisors)
            self._supervisors = everything
            await asyncio.wait([waiter, everything], return_when=asyncio.FIRST_COMPLETED)
            waiter.cancel()
            if everything.done() and not everything.cancelled() and everything.exception() is not None:
                # A supervisor that failed must not leave its pod silent in ContainerCreating.
                log.error("pod %s: a container supervisor failed", self.key, exc_info=everything.exception())
            if not self.terminating.is_set():
                await self._write_status()  # every container has finished for good: a terminal phase
        await self.terminating.wait()
        await self._stop_containers(0 if self.gone else self.grace_period())
        if self._supervisors is not None:  # let each supervisor record its container's exit
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._supervisors, RETRY_SECONDS)
        if not self.gone:
            await self._finish()

    async def _stop_containers(self, grace: float) -> None:
        self.terminating.set()
        await asyncio.gather(*(r.stop(grace) for r in [*self.init_runs, *self.runs]))

    async def _finish(self) -> None:
        """After the containers stopped: the terminal status, then remove the pod, as the kubelet does.

        The kubelet writes the terminal phase first too, so controllers see how the pod ended.
        """
        for run in [*self.init_runs, *self.runs]:
            if run.run.state != "terminated":
                run.run = _Run(
                    state="terminated", reason="Error", exit_code=137, finished_at=_now(),
                    started_at=run.run.started_at, container_id=run.run.container_id,
                    last_state=run.run.last_state,
                )  # fmt: skip
            run.run.will_restart = False
        try:
            await self._write_status()
            await self.services.kube.delete("v1", "Pod", self.name, self.namespace, grace_period=0)
        except Exception as error:  # the agent sees the pod again and retries
            log.warning("pod %s: could not finish deletion: %s", self.key, error)

    # -- status

    def _status(self) -> Manifest:
        return pod_status(
            previous=self._written or self.pod.get("status") or {},
            pod_ip=self.ip,
            host_ip=self.host_ip,
            start_time=self._start_time,
            now=_now(),
            init_containers=[r.snapshot() for r in self.init_runs],
            containers=[r.snapshot() for r in self.runs],
        )

    async def _write_status(self) -> None:
        if self.gone:
            return
        status = self._status()
        if status == self._written:
            return
        await self.services.kube.patch_status("v1", "Pod", self.name, self.namespace, status)
        self._written = status

    async def _status_loop(self) -> None:
        while True:
            await self._changed.wait()
            await asyncio.sleep(0.2)  # gather a burst of changes into one write
            self._changed.clear()
            try:
                await self._write_status()
            except Exception as error:  # written again at the next change
                log.warning("pod %s: status not written: %s", self.key, error)
                self._changed.set()
                await asyncio.sleep(RETRY_SECONDS)

    # -- volumes and names

    async def _prepare_volumes(self) -> bool:
        """Make every volume's directory; False while a claim is not bound or a source is missing."""
        fs_group = (self.pod["spec"].get("securityContext") or {}).get("fsGroup")
        try:
            for volume in self.pod["spec"].get("volumes") or []:
                name = volume["name"]
                if "persistentVolumeClaim" in volume:
                    self.volume_dirs[name] = await self._claim_directory(volume["persistentVolumeClaim"])
                else:
                    self.volume_dirs[name] = self.directory / "volumes" / name
                self.volume_dirs[name].mkdir(parents=True, exist_ok=True)
                if "emptyDir" in volume:  # as the kubelet makes it: any user of the pod may write there
                    self.volume_dirs[name].chmod(0o777)
                elif "persistentVolumeClaim" in volume and fs_group is not None:
                    await asyncio.to_thread(give_to_group, self.volume_dirs[name], int(fs_group))
            await self._sync_file_volumes()
        except ConfigError as error:
            for run in self.runs:
                run.run.message = str(error)
            self.changed()
            log.info("pod %s: waiting: %s", self.key, error)
            return False
        return True

    async def _claim_directory(self, source: Manifest) -> Path:
        claim_name = source["claimName"]
        claim = await self.services.kube.get("v1", "PersistentVolumeClaim", claim_name, self.namespace)
        if claim is None or (claim.get("status") or {}).get("phase") != "Bound":
            raise ConfigError(f'persistentvolumeclaim "{claim_name}" is not bound yet')
        volume = await self.services.kube.get("v1", "PersistentVolume", claim["spec"]["volumeName"])
        host_path = ((volume or {}).get("spec") or {}).get("hostPath", {}).get("path")
        if host_path and Path(host_path).is_relative_to(self.services.state_dir):
            return Path(str(host_path))
        # A volume the agent did not provision: keep its data under the state directory all the same.
        return self.services.state_dir / "volumes" / "foreign" / str(claim["spec"]["volumeName"])

    async def _sync_file_volumes(self) -> None:
        volumes = [v for v in self.pod["spec"].get("volumes") or [] if is_file_volume(v)]
        if not volumes:
            return
        config_map_names: set[str] = set()
        secret_names: set[str] = set()
        for volume in volumes:
            for kind, name in _volume_references(volume):
                (secret_names if kind == "secret" else config_map_names).add(name)
        config_maps = await self._namespace_objects("ConfigMap", config_map_names)
        secrets = await self._namespace_objects("Secret", secret_names)
        tokens = await self._service_account_tokens(token_requests(volumes))
        for volume in volumes:
            files = volume_files(volume, config_maps, secrets, pod=self.pod, facts=self.facts, tokens=tokens)
            directory = self.volume_dirs[volume["name"]]
            if files is not None and await asyncio.to_thread(sync_files, directory, files):
                log.info("pod %s: volume %s updated", self.key, volume["name"])

    async def _service_account_tokens(self, wanted: set[TokenRequest]) -> dict[TokenRequest, bytes]:
        """A token for each request, bound to this pod: kept until 80 % of its lifetime, then renewed."""
        account = str(self.pod["spec"].get("serviceAccountName") or "default")
        now = time.monotonic()
        for request in wanted:
            if request in self._tokens and now < self._tokens[request][1]:
                continue
            body = {
                "apiVersion": "authentication.k8s.io/v1",
                "kind": "TokenRequest",
                "spec": {
                    "audiences": [request.audience] if request.audience else [],
                    "expirationSeconds": request.expiration_seconds,
                    "boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": self.name, "uid": self.uid},
                },
            }
            try:
                answer = await self.services.kube.create_subresource(
                    "v1", "ServiceAccount", account, self.namespace, "token", body
                )
            except errors.NotFound as error:
                raise ConfigError(f'serviceaccount "{account}" not found') from error
            token = str(answer["status"]["token"])
            register_secret(token)
            lifetime = float(answer["spec"].get("expirationSeconds") or request.expiration_seconds)
            self._tokens[request] = (token.encode(), now + TOKEN_RENEW_AFTER * lifetime)
        return {request: self._tokens[request][0] for request in wanted}

    async def _volume_loop(self) -> None:
        while True:
            await asyncio.sleep(VOLUME_SYNC_SECONDS)
            try:
                await self._sync_file_volumes()
            except Exception as error:  # kept as is until the next pass succeeds
                log.info("pod %s: volume sync: %s", self.key, error)

    def refresh_hosts(self) -> None:
        if self.ip is None or not self.directory.exists():
            return
        services, slices = self.services.cluster_names()
        text = build_hosts(
            namespace=self.namespace,
            hostname=self.hostname,
            subdomain=self.pod["spec"].get("subdomain"),
            pod_ip=self.ip,
            services=services,
            endpoint_slices=slices,
        )
        write_in_place(self.hosts_file, text)


def _env_references(container: Mapping[str, Any]) -> tuple[set[str], set[str]]:
    """The ConfigMaps and Secrets a container's env refers to."""
    config_maps: set[str] = set()
    secrets: set[str] = set()
    for source in container.get("envFrom") or []:
        if "configMapRef" in source:
            config_maps.add(source["configMapRef"]["name"])
        if "secretRef" in source:
            secrets.add(source["secretRef"]["name"])
    for variable in container.get("env") or []:
        value_from = variable.get("valueFrom") or {}
        if "configMapKeyRef" in value_from:
            config_maps.add(value_from["configMapKeyRef"]["name"])
        if "secretKeyRef" in value_from:
            secrets.add(value_from["secretKeyRef"]["name"])
    return config_maps, secrets


def _volume_references(volume: Mapping[str, Any]) -> list[tuple[str, str]]:
    references = []
    if "configMap" in volume:
        references.append(("configmap", volume["configMap"]["name"]))
    if "secret" in volume:
        references.append(("secret", volume["secret"]["secretName"]))
    for source in (volume.get("projected") or {}).get("sources") or []:
        if "configMap" in source:
            references.append(("configmap", source["configMap"]["name"]))
        if "secret" in source:
            references.append(("secret", source["secret"]["name"]))
    return references
