"""``operator-suite-dev sandbox up|down``: the suite's main job on one machine.

``up`` starts a local control plane, the StorageClasses the samples name, the node agent (so pods
really run), and each operator that registers a sandbox entry (entry point group
``operator_suite.sandbox``), each as its own ServiceAccount; applies that operator's sample
manifests; and waits, printing progress, until every sample custom object reports ``Ready=True``.
Nothing here knows a particular operator: the entries say which console script, RBAC file and
samples to use.

Everything runs detached, and ``up`` records it as it starts it: ``DIR/sandbox.json`` is written
before anything starts and gains each process as it starts, and every process ``up`` starts carries
:data:`MARKER` in its environment, so ``down`` finds even one whose pid was never recorded (``up``
killed mid-start). ``down`` stops it all and checks that nothing is left.

``up`` fails loudly and leaves nothing behind: when a sample's pod cannot start (its program is
missing, its config is invalid, see :mod:`.nodeagent.failures`) it says which pod and why within
seconds, instead of waiting out its time-out; on any failure, Ctrl-C, SIGTERM or SIGHUP it stops
everything it started (the logs stay in DIR) before it exits.

One sandbox runs per machine: two would hand out the same pod and Service addresses. ``up`` takes
a lock file (:data:`DEFAULT_LOCK`, or ``--lock``) that names its directory, and refuses at once
while the sandbox named there runs. Its pod and Service ranges (:data:`SANDBOX_POD_CIDR`,
:data:`SANDBOX_SERVICE_CIDR`) are apart from those of the test suite's workers, so ``make test``
can run beside it.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import shutil
import signal
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from pathlib import Path
from types import FrameType
from typing import Any

import yaml

from operator_testkit.binaries import find_hack_dir
from operator_testkit.controlplane import (
    ENDPOINT_CONTROLLERS,
    ControlPlane,
    ControlPlaneState,
    stop_recorded,
)
from operator_testkit.errors import ControlPlaneError
from operator_testkit.nodeagent.failures import WaitingKey, stuck_containers, waiting_since
from operator_testkit.nodeagent.harness import processes_under, start_agent
from operator_testkit.nodeagent.storage import PROVISIONER
from operator_testkit.operators import OperatorProcess, service_account_kubeconfig

__all__ = [
    "DEFAULT_LOCK",
    "MARKER",
    "SANDBOX_POD_CIDR",
    "SANDBOX_SERVICE_CIDR",
    "SandboxEntry",
    "SandboxOptions",
    "loopback_range",
    "sandbox_down",
    "sandbox_processes",
    "sandbox_up",
    "storage_class",
    "storage_class_names",
]

ENTRY_POINT_GROUP = "operator_suite.sandbox"
MARKER = "OPERATOR_SUITE_SANDBOX_DIR"
"""Set to the sandbox's directory in the environment of every process ``up`` starts."""
DEFAULT_LOCK = Path(os.environ.get("OPERATOR_SUITE_SANDBOX_LOCK", "/run/operator-suite/sandbox.lock"))
# The test suite's workers take eighths of 127.50-52/16 (pods) and 127.100-102/16 (Services).
SANDBOX_POD_CIDR = "127.60.0.0/16"
SANDBOX_SERVICE_CIDR = "127.110.0.0/16"
SAMPLES_NAMESPACE = "default"
_READY_TIMEOUT = 300.0
_POLL_SECONDS = 2.0
_OPERATOR_GRACE, _AGENT_GRACE, _LEFTOVER_GRACE = 30.0, 40.0, 10.0  # the agent stops its containers first
_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@dataclass(frozen=True)
class SandboxEntry:
    """What the sandbox runs for one operator; paths are relative to the repository root."""

    script: str
    rbac: str
    samples: tuple[str, ...]
    """Manifests to apply; every custom object among them is waited for until Ready. May be empty:
    the operator then only runs (for operators whose workloads the node agent cannot run)."""
    usage: str = ""
    """Lines printed once everything is Ready: how to use what the samples made."""
    storage_classes: tuple[str, ...] = ()
    """StorageClasses the operator's objects name when their spec does not (its defaults); those
    the samples name are found in them."""
    prepare: Callable[[ControlPlane, Path], Mapping[str, str]] | None = None
    """What the operator needs before it starts (CRDs it reads, a release source), made in the given
    directory; returns variables for the operator's environment. Processes it starts carry the
    sandbox's marker, so ``down`` stops them."""
    journey: Callable[[Path, bool], int] | None = None
    """``operator-suite-dev sandbox journey``: the operator's whole user journey, walked step by step
    in the given directory on control planes of its own (paused before the end when asked); its
    exit code. Everything it starts stops when it returns."""


@dataclass(frozen=True)
class SandboxOptions:
    """Where a sandbox takes its addresses and its lock (tests give their own)."""

    pod_cidr: str = SANDBOX_POD_CIDR
    service_cidr: str = SANDBOX_SERVICE_CIDR
    lock: Path = DEFAULT_LOCK


@dataclass
class _Record:
    """``DIR/sandbox.json``: what ``up`` has started so far, saved after every step."""

    directory: Path
    lock: str
    controlplane: str
    agent: dict[str, Any] | None = None
    operators: list[dict[str, Any]] = field(default_factory=list)

    @property
    def path(self) -> Path:
        return self.directory / "sandbox.json"

    def save(self) -> None:
        data = {
            "lock": self.lock,
            "controlplane": self.controlplane,
            "agent": self.agent,
            "operators": self.operators,
        }
        temporary = self.path.with_name(".sandbox.json.tmp")
        temporary.write_text(json.dumps(data, indent=2))
        os.replace(temporary, self.path)


class _Interrupted(BaseException):
    """A signal asked ``up`` to stop; BaseException, so no ``except Exception`` on the way swallows it."""

    def __init__(self, number: int) -> None:
        super().__init__(signal.Signals(number).name)
        self.number = number


def journey_entries() -> dict[str, SandboxEntry]:
    """The operators whose sandbox entry has a journey, by entry name."""
    return {name: entry for name, entry in _entries().items() if entry.journey is not None}


def _entries() -> dict[str, SandboxEntry]:
    return {e.name: e.load() for e in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name)}


def _say(message: str) -> None:
    print(f"[sandbox] {message}", flush=True)


def _complain(message: str) -> None:
    print(f"[sandbox] {message}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------- pure decisions


def loopback_range(text: str) -> str:
    """``text`` as a network, if it lies in 127.0.0.0/8: no sandbox address leads off this machine (pure)."""
    try:
        network = ipaddress.IPv4Network(text)
    except ValueError as error:
        raise ValueError(f"{text!r} is not an IPv4 network: {error}") from error
    if not network.subnet_of(ipaddress.IPv4Network("127.0.0.0/8")):
        raise ValueError(
            f"{text} is not a loopback range (127.0.0.0/8): its traffic would leave this machine"
        )
    return str(network)


def storage_class_names(documents: Iterable[Any]) -> set[str]:
    """Every ``storageClassName`` a manifest names, at any depth (pure)."""
    names: set[str] = set()
    for document in documents:
        if isinstance(document, Mapping):
            for key, value in document.items():
                if key == "storageClassName" and isinstance(value, str) and value:
                    names.add(value)
                else:
                    names |= storage_class_names([value])
        elif isinstance(document, list):
            names |= storage_class_names(document)
    return names


def storage_class(name: str) -> dict[str, Any]:
    """A StorageClass the node agent provisions (pure).

    Its provisioner is the agent's, an external one to the controller manager, which then waits
    (a Normal ExternalProvisioning Event) instead of failing (a ProvisioningFailed Warning for a
    class that does not exist) while the agent binds a volume to the claim.
    """
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name, "labels": {"app.kubernetes.io/managed-by": "operator-suite-sandbox"}},
        "provisioner": PROVISIONER,
        "reclaimPolicy": "Delete",
        "volumeBindingMode": "Immediate",
    }


def _ready_condition(obj: Mapping[str, Any]) -> dict[str, Any]:
    for condition in (obj.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return dict(condition)
    return {}


# ---------------------------------------------------------------- the sandbox's processes


def _environment(pid: int) -> list[bytes]:
    try:
        return Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return []


def _carries_marker(pid: int, directory: Path) -> bool:
    return f"{MARKER}={directory}".encode() in _environment(pid)


def _has_terminal(pid: int) -> bool:
    """Whether the process has a controlling terminal: a person's shell has one, a container never."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return False
    return fields[4] != "0"  # tty_nr


def sandbox_processes(directory: Path) -> list[int]:
    """Every live process of the sandbox in ``directory``, but this one.

    Those ``up`` started carry :data:`MARKER`; the containers (whose environment is their own) run
    inside the agent's directory. A shell someone opened there has a terminal, and is left alone.
    """
    directory = directory.resolve()
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and _carries_marker(int(entry.name), directory):
            found.add(int(entry.name))
    found |= {pid for pid in processes_under(directory / "nodeagent") if not _has_terminal(pid)}
    found.discard(os.getpid())
    return sorted(pid for pid in found if _alive(pid))


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _wait_gone(pids: Iterable[int], grace: float) -> list[int]:
    deadline = time.monotonic() + grace
    left = [pid for pid in pids if _alive(pid)]
    while left and time.monotonic() < deadline:
        time.sleep(0.2)
        for pid in left:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)  # ours, when ``up`` cleans up after itself
        left = [pid for pid in left if _alive(pid)]
    return left


def _terminate(pid: int, grace: float) -> None:
    """SIGTERM a recorded process's group, SIGKILL it after ``grace`` seconds."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGTERM)
    if _wait_gone([pid], grace):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
        _wait_gone([pid], 5)


def _stop_leftovers(directory: Path) -> None:
    """SIGTERM every process of the sandbox still there, then SIGKILL what outlives the grace."""
    pids = sandbox_processes(directory)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    for pid in _wait_gone(pids, _LEFTOVER_GRACE):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    _wait_gone(pids, 5)


# ---------------------------------------------------------------- one sandbox per machine


def _lock_holder(lock: Path) -> tuple[Path, int] | None:
    try:
        data = json.loads(lock.read_text())
        return Path(data["dir"]), int(data["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _holder_runs(directory: Path, pid: int) -> bool:
    """Whether the sandbox named by a lock still runs: its ``up`` is at work, or any process of it lives."""
    try:
        up_running = b"sandbox" in Path(f"/proc/{pid}/cmdline").read_bytes() and _alive(pid)
    except OSError:
        up_running = False
    return up_running or bool(sandbox_processes(directory))


def _take_lock(lock: Path, directory: Path) -> Path | None:
    """Take the machine's sandbox lock for ``directory``; the running sandbox's directory if another holds it.

    The lock is created whole (written aside, then linked into place, which fails if it exists);
    a lock whose sandbox no longer runs is stale and taken over.
    """
    lock.parent.mkdir(parents=True, exist_ok=True)
    mine = lock.with_name(f".{lock.name}.{os.getpid()}")
    mine.write_text(json.dumps({"dir": str(directory), "pid": os.getpid()}))
    try:
        for _ in range(3):
            try:
                os.link(mine, lock)
                return None
            except FileExistsError:
                holder = _lock_holder(lock)
                if holder is not None and holder[0] != directory and _holder_runs(*holder):
                    return holder[0]
                if holder is not None:
                    _say(f"taking over the lock {lock} of a sandbox that no longer runs ({holder[0]})")
                lock.unlink(missing_ok=True)
        raise ControlPlaneError(f"could not take the sandbox lock {lock}")
    finally:
        mine.unlink(missing_ok=True)


def _release_lock(lock: Path, directory: Path) -> None:
    holder = _lock_holder(lock)
    if holder is not None and holder[0] == directory:
        lock.unlink(missing_ok=True)


# ---------------------------------------------------------------- signals and environment


@contextlib.contextmanager
def _marked(directory: Path) -> Iterator[None]:
    """Every process started inside carries the sandbox's marker."""
    before = os.environ.get(MARKER)
    os.environ[MARKER] = str(directory)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(MARKER, None)
        else:
            os.environ[MARKER] = before


@contextlib.contextmanager
def _interruptible() -> Iterator[None]:
    """The first SIGINT, SIGTERM or SIGHUP raises :class:`_Interrupted`; any later one is ignored
    until this ends, so that cleaning up is never cut short. The handlers before are restored."""

    def interrupt(number: int, _: FrameType | None) -> None:
        _ignore_signals()
        raise _Interrupted(number)

    before = {sig: signal.getsignal(sig) for sig in _SIGNALS}
    for sig in _SIGNALS:
        signal.signal(sig, interrupt)
    try:
        yield
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)


def _ignore_signals() -> None:
    for sig in _SIGNALS:
        signal.signal(sig, signal.SIG_IGN)


# ---------------------------------------------------------------- up


def sandbox_up(directory: Path, options: SandboxOptions | None = None) -> int:
    """Start the sandbox in ``directory``; 0 once every sample is Ready, else why not, with nothing left."""
    options = options or SandboxOptions()
    directory = directory.resolve()
    try:
        loopback_range(options.pod_cidr)
        loopback_range(options.service_cidr)
    except ValueError as error:
        _complain(str(error))
        return 1
    if (directory / "sandbox.json").exists():
        _complain(f"a sandbox is already recorded in {directory}")
        _complain(f"stop it first: operator-suite-dev sandbox down --dir {directory}")
        return 1
    directory.mkdir(parents=True, exist_ok=True)
    running = _take_lock(options.lock, directory)
    if running is not None:
        _complain(f"another sandbox runs on this machine, from {running} (lock {options.lock});")
        _complain("a second one would take the same pod and Service addresses.")
        _complain(f"stop it first: operator-suite-dev sandbox down --dir {running}")
        return 1
    record = _Record(directory, str(options.lock), str(directory / "controlplane"))
    record.save()
    with _marked(directory), _interruptible():
        try:
            _start(record, options)
            return 0
        except _Interrupted as interrupted:
            _complain(f"{interrupted}: stopping everything this sandbox started")
            code = 128 + interrupted.number
        except Exception as error:  # every failure ends the same way: say why, stop it all
            _ignore_signals()
            _complain(f"sandbox up failed: {error}")
            _complain("stopping everything this sandbox started")
            code = 1
        # Signals stay ignored from here on: a second Ctrl-C must not cut the clean-up short.
        sandbox_down(directory, options.lock)
    _complain(
        f"its logs are kept in {directory}: nodeagent/agent.log, operators/*/operator.log, controlplane/logs/"
    )
    return code


def _start(record: _Record, options: SandboxOptions) -> None:
    directory = record.directory
    root = find_hack_dir().parent
    started = time.monotonic()
    entries = _entries()
    _say("starting etcd, kube-apiserver, kube-controller-manager, kube-scheduler")
    plane = ControlPlane(
        Path(record.controlplane),
        bind_to_parent=False,
        service_cidr=options.service_cidr,
        disabled_controllers=ENDPOINT_CONTROLLERS,
    )
    plane.start()
    # DIR/kubeconfig, as for a bare control plane, so `operator-suite-dev kubectl --dir DIR` works on both.
    admin_kubeconfig = directory / "kubeconfig"
    shutil.copyfile(plane.kubeconfig, admin_kubeconfig)
    admin_kubeconfig.chmod(0o600)
    plane.kubectl("apply", "--server-side", "-f", str(root / "deploy" / "crds"))
    plane.kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
    samples = {sample: _documents(root / sample) for entry in entries.values() for sample in entry.samples}
    classes = storage_class_names(d for documents in samples.values() for d in documents)
    classes |= {name for entry in entries.values() for name in entry.storage_classes}
    if classes:
        _say(f"creating the StorageClasses the samples name: {', '.join(sorted(classes))}")
        manifest = directory / "storageclasses.yaml"
        manifest.write_text(yaml.safe_dump_all([storage_class(name) for name in sorted(classes)]))
        plane.kubectl("apply", "--server-side", "-f", str(manifest))
    _say(f"starting the node agent (3 nodes in zones a, b, c; pods on {options.pod_cidr})")
    agent = start_agent(plane, directory / "nodeagent", "--pod-cidr", options.pod_cidr, detached=True)
    record.agent = {"pid": agent.process.pid, "dir": str(agent.state_dir)}
    record.save()
    objects: list[tuple[str, str, str]] = []
    for name, entry in entries.items():
        _say(f"starting {entry.script} as its own ServiceAccount")
        home = directory / "operators" / name
        home.mkdir(parents=True, exist_ok=True)
        kubeconfig = service_account_kubeconfig(plane, root / entry.rbac, home / "kubeconfig")
        environment = {**os.environ, **entry.prepare(plane, home)} if entry.prepare is not None else None
        operator = OperatorProcess(entry.script, kubeconfig, home / "operator.log", environment=environment)
        operator.start()
        record.operators.append({"name": name, "pid": operator.pid, "log": str(operator.log_path)})
        record.save()
        for sample in entry.samples:
            _say(f"applying {sample}")
            plane.kubectl("apply", "--server-side", "-n", SAMPLES_NAMESPACE, "-f", str(root / sample))
            for document in samples[sample]:
                group = document["apiVersion"].split("/")[0]
                if "." in group:
                    # kind.group: a bare kind may also name a category
                    resource = f"{document['kind'].lower()}.{group}"
                    objects.append((resource, SAMPLES_NAMESPACE, document["metadata"]["name"]))
    _wait_ready(plane, objects)
    _say(f"ready in {time.monotonic() - started:.0f} s")
    print("\nUse it:")
    print(f"  export KUBECONFIG={admin_kubeconfig} PATH={plane.binaries.kubectl.parent}:$PATH")
    for entry in entries.values():
        print(entry.usage)
    print(f"Stop it: operator-suite-dev sandbox down --dir {directory}", flush=True)


def _documents(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def _wait_ready(plane: ControlPlane, objects: list[tuple[str, str, str]]) -> None:
    """Poll each custom object until Ready=True, printing each new Ready message.

    Fails at once when a pod of the samples cannot start (:func:`.failures.stuck_containers`).
    """
    deadline = time.monotonic() + _READY_TIMEOUT
    pending = list(objects)
    last: dict[tuple[str, str, str], str] = {}
    since: dict[WaitingKey, float] = {}
    while pending:
        pods = json.loads(plane.kubectl("get", "pods", "-n", SAMPLES_NAMESPACE, "-o", "json"))["items"]
        since = waiting_since(pods, since, time.monotonic())
        stuck = stuck_containers(pods, since, time.monotonic())
        if stuck:
            raise ControlPlaneError(
                "a sample's pod cannot start:\n  " + "\n  ".join(s.describe() for s in stuck)
            )
        if time.monotonic() > deadline:
            raise ControlPlaneError(f"not Ready after {_READY_TIMEOUT:.0f} s: {pending}")
        for item in list(pending):
            kind, namespace, name = item
            obj = json.loads(plane.kubectl("get", kind, name, "-n", namespace, "-o", "json"))
            ready = _ready_condition(obj)
            status, reason = ready.get("status", "?"), ready.get("reason", "")
            line = f"{kind}/{name}: Ready={status} {reason} {ready.get('message', '')}"
            if last.get(item) != line:
                _say(line.strip())
                last[item] = line
            if ready.get("status") == "True":
                pending.remove(item)
        if pending:
            time.sleep(_POLL_SECONDS)


# ---------------------------------------------------------------- down


def sandbox_down(directory: Path, lock: Path | None = None) -> int:
    """Stop everything of the sandbox in ``directory``, recorded or not; 1 if anything is left."""
    directory = directory.resolve()
    path = directory / "sandbox.json"
    record: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {}
    lock = Path(record["lock"]) if record.get("lock") else (lock or DEFAULT_LOCK)
    if not record and not sandbox_processes(directory):
        _release_lock(lock, directory)
        _say(f"no sandbox recorded in {directory}, and none of its processes runs")
        return 0
    for operator in record.get("operators") or []:
        if _carries_marker(operator["pid"], directory):
            _terminate(operator["pid"], _OPERATOR_GRACE)
    agent = record.get("agent")
    if agent and _carries_marker(agent["pid"], directory):
        _terminate(agent["pid"], _AGENT_GRACE)
    controlplane = Path(record.get("controlplane") or directory / "controlplane")
    if (controlplane / "state.json").exists():
        stop_recorded(ControlPlaneState.load(controlplane).components)
        (controlplane / "state.json").unlink()
    # What was started but not yet recorded (up stopped mid-start), and containers the agent left.
    _stop_leftovers(directory)
    left = sandbox_processes(directory)
    path.unlink(missing_ok=True)
    (directory / "kubeconfig").unlink(missing_ok=True)
    _release_lock(lock, directory)
    if left:
        _complain(f"processes left behind: {left}")
        return 1
    _say(f"stopped everything of the sandbox in {directory}")
    return 0
