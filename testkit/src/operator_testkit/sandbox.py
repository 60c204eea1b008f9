"""``operator-suite-dev sandbox up|down``: the suite's main job on one machine.

``up`` starts a local cluster of three real nodes (:mod:`.nodes`: a control plane, a kubelet,
containerd and runc on each node, kube-proxy, CoreDNS and a volume provisioner), loads the images
the samples' pods run, installs each operator that registers a sandbox entry (entry point group
``operator_suite.sandbox``) with ``helm install`` from the suite's image built from this checkout, as
users install it; applies that operator's samples and what its entry prepares (the S3 server and
the scheduled backup of the Typesense sample, say); and waits, printing progress, until every sample
custom object reports ``Ready=True`` and what the entries await has happened. Nothing here knows a
particular operator: the entries say which chart, images and samples to use.

Everything runs detached, and ``up`` records it as it starts it: ``DIR/sandbox.json`` is written
before anything starts, the cluster records its slot in ``DIR/cluster/cluster.json`` as soon as it
has one, and every process ``up`` starts carries :data:`MARKER` in its environment, so ``down``
finds even one whose pid was never recorded (``up`` killed mid-start). ``down`` stops it all (the
nodes' daemons and containers as one cgroup tree) and checks that nothing is left: no process,
mount, link, network namespace or cgroup.

``up`` fails loudly and leaves nothing behind: when a sample's pod cannot start (its image is not
on the nodes, its configuration names a missing Secret: :mod:`.pod_failures`) it says which pod and
why within seconds, instead of waiting out its time-out; on any failure, Ctrl-C, SIGTERM or SIGHUP it
stops everything it started (the logs stay in DIR) before it exits.

One sandbox runs per machine, so that a second ``make run`` says where the first one runs instead of
starting another: ``up`` takes a lock file (:data:`DEFAULT_LOCK`, or ``--lock``) that names its
directory. Its nodes take a slot of the machine like any test run's (:mod:`.nodes.host`), so ``make
test`` can run beside it.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from pathlib import Path
from types import FrameType
from typing import Any

import yaml

from operator_testkit.binaries import find_hack_dir
from operator_testkit.charts import install_chart
from operator_testkit.controlplane import ControlPlane
from operator_testkit.errors import ControlPlaneError
from operator_testkit.image import image_of_sources
from operator_testkit.nodes import host
from operator_testkit.nodes.cluster import RECORD as CLUSTER_RECORD
from operator_testkit.nodes.cluster import LocalCluster, stop_recorded_cluster
from operator_testkit.nodes.images import NodeImage, nginx_image, typesense_image
from operator_testkit.nodes.plan import nodes_plan
from operator_testkit.nodes.storage import STORAGE_CLASSES
from operator_testkit.pod_failures import WaitingKey, stuck_containers, waiting_since
from operator_testkit.sandbox_lock import (
    DEFAULT_LOCK,
    MARKER,
    alive,
    complain,
    refuse_another,
    release_lock,
    sandbox_processes,
    say,
    take_lock,
)

__all__ = [
    "DEFAULT_LOCK",
    "MARKER",
    "SAMPLES_NAMESPACE",
    "Awaited",
    "Prepared",
    "SandboxEntry",
    "SandboxOptions",
    "SandboxSite",
    "images_ahead",
    "sandbox_down",
    "sandbox_images",
    "sandbox_processes",
    "sandbox_up",
    "storage_class_names",
    "unknown_storage_classes",
]

ENTRY_POINT_GROUP = "operator_suite.sandbox"
WITHOUT_IMAGES = "OPERATOR_SUITE_SANDBOX_WITHOUT_IMAGES"
"""Names of images (comma-separated) ``up`` does not load onto the nodes: what a user sees whose
cluster lacks an image its samples ask for (a test of ``up``'s failure report sets it)."""
SAMPLES_NAMESPACE = "default"
_READY_TIMEOUT = 300.0
_POLL_SECONDS = 2.0
_LEFTOVER_GRACE = 10.0
_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@dataclass(frozen=True)
class SandboxSite:
    """Where an entry prepares what its operator needs."""

    plane: ControlPlane
    home: Path
    """The operator's own directory in the sandbox's."""
    address: str
    """This machine's address as the nodes' pods reach it: a server for them listens there."""


@dataclass(frozen=True)
class Awaited:
    """Something an entry's samples make by themselves that ``up`` waits for (a scheduled backup's
    first backup, say): the first object of ``resource`` matching ``selector`` whose
    ``status.phase`` is ``done``; one whose phase is ``failed`` fails ``up``, with its message."""

    what: str
    resource: str
    selector: str
    done: str = "Completed"
    failed: str = "Failed"
    timeout: float = 180.0


@dataclass(frozen=True)
class Prepared:
    """What an entry made ready for its operator."""

    env: Mapping[str, str] = field(default_factory=dict)
    """Settings for the operator's container (the chart's ``env``)."""
    manifests: tuple[dict[str, Any], ...] = ()
    """Applied in the samples' namespace after the samples; custom objects among them are waited for
    until Ready too."""
    awaited: tuple[Awaited, ...] = ()
    notes: tuple[str, ...] = ()
    """Lines printed once everything is Ready."""


@dataclass(frozen=True)
class SandboxEntry:
    """What the sandbox runs for one operator; paths are relative to the repository root."""

    chart: str
    """The operator's chart under ``charts/``, installed with the suite's image."""
    samples: tuple[str, ...]
    """Manifests to apply; every custom object among them is waited for until Ready. May be empty:
    the operator then only runs."""
    usage: str = ""
    """Lines printed once everything is Ready: how to use what the samples made."""
    images: Callable[[], list[NodeImage]] | None = None
    """Images the samples' pods run, besides Typesense's and nginx's, which every sandbox loads."""
    prepare: Callable[[SandboxSite], Prepared] | None = None
    """What the operator needs before it is installed (CRDs it reads, a release source, an S3
    server). Processes it starts carry the sandbox's marker, so ``down`` stops them."""
    journey: Callable[[Path, bool], int] | None = None
    """``operator-suite-dev sandbox journey``: the operator's whole user journey, walked step by step
    in the given directory on clusters of its own (paused before the end when asked); its exit code.
    Everything it starts stops when it returns."""


@dataclass(frozen=True)
class SandboxOptions:
    """Where a sandbox takes its lock (tests give their own)."""

    lock: Path = DEFAULT_LOCK


@dataclass
class _Record:
    """``DIR/sandbox.json``: what ``up`` has started so far, saved after every step."""

    directory: Path
    lock: str
    cluster: str
    operators: list[dict[str, Any]] = field(default_factory=list)

    @property
    def path(self) -> Path:
        return self.directory / "sandbox.json"

    def save(self) -> None:
        data = {"lock": self.lock, "cluster": self.cluster, "operators": self.operators}
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


# ---------------------------------------------------------------- pure decisions


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


def unknown_storage_classes(documents: Iterable[Any]) -> list[str]:
    """The StorageClasses the documents name that the nodes do not provide (pure): a claim of one would
    wait for ever, so ``up`` refuses before it starts anything."""
    return sorted(storage_class_names(documents) - set(STORAGE_CLASSES))


def _ready_condition(obj: Mapping[str, Any]) -> dict[str, Any]:
    for condition in (obj.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return dict(condition)
    return {}


def _wait_gone(pids: Iterable[int], grace: float) -> list[int]:
    deadline = time.monotonic() + grace
    left = [pid for pid in pids if alive(pid)]
    while left and time.monotonic() < deadline:
        time.sleep(0.2)
        for pid in left:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)  # ours, when ``up`` cleans up after itself
        left = [pid for pid in left if alive(pid)]
    return left


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
    if (directory / "sandbox.json").exists():
        complain(f"a sandbox is already recorded in {directory}")
        complain(f"stop it first: operator-suite-dev sandbox down --dir {directory}")
        return 1
    root = find_hack_dir().parent
    entries = _entries()
    samples = {sample: _documents(root / sample) for entry in entries.values() for sample in entry.samples}
    unknown = unknown_storage_classes(d for documents in samples.values() for d in documents)
    if unknown:
        complain(f"the samples name StorageClasses the nodes do not provide: {', '.join(unknown)}")
        complain(f"(they provide {', '.join(STORAGE_CLASSES)})")
        return 1
    directory.mkdir(parents=True, exist_ok=True)
    running = take_lock(options.lock, directory)
    if running is not None:
        refuse_another(running, options.lock)
        return 1
    _set_aside_last_run(directory)
    record = _Record(directory, str(options.lock), str(directory / "cluster"))
    record.save()
    with _marked(directory), _interruptible():
        try:
            _start(record, root, entries, samples)
            return 0
        except _Interrupted as interrupted:
            complain(f"{interrupted}: stopping everything this sandbox started")
            code = 128 + interrupted.number
        except Exception as error:  # every failure ends the same way: say why, stop it all
            _ignore_signals()
            complain(f"sandbox up failed: {error}")
            complain("stopping everything this sandbox started")
            code = 1
        # Signals stay ignored from here on: a second Ctrl-C must not cut the clean-up short.
        sandbox_down(directory, options.lock)
    complain(f"its logs are kept in {directory}: cluster/slot/logs/ (the nodes), cluster/controlplane/logs/")
    return code


LAST_RUN = ("cluster", "operators")
"""What a sandbox brought down leaves in its directory: the cluster's state and logs, the operators'."""


def _set_aside_last_run(directory: Path) -> None:
    """Every ``up`` starts afresh: a sandbox brought down (``make down``, then ``make run`` again) left its
    cluster's data (a helm release of the same name, a published stack), which the new one would
    trip on. The last run's parts go to ``previous/``, one run back, for their logs."""
    parts = [directory / name for name in LAST_RUN if (directory / name).exists()]
    if not parts:
        return
    previous = directory / "previous"
    shutil.rmtree(previous, ignore_errors=True)
    previous.mkdir()
    for part in parts:
        part.rename(previous / part.name)
    say(f"the last run's state and logs are set aside in {previous}")


def images_ahead(root: Path, entries: Mapping[str, SandboxEntry]) -> list[NodeImage]:
    """The nodes' images, none of which needs a Go program but the suite's: Typesense's, nginx's, the
    entries' own (Monocle's engine and stand-in), then the suite's (built from this checkout). ``make
    run`` builds them while the Go programs compile (``sandbox images``): Debian's packages and Maven's
    jars come over the network while the compiler holds the cores; ``up`` finds them built. The suite's
    comes last: its helm is built after the control plane (it shares its Go build), so it waits for that
    build, and the others need not."""
    images = [typesense_image(), nginx_image()]
    for entry in entries.values():
        images.extend(entry.images() if entry.images is not None else [])
    say("building the suite's image from this checkout (once per change of the sources)")
    suite = image_of_sources(root)
    return [NodeImage(suite.name, (suite.name,)), *images]


def sandbox_images() -> int:
    """``sandbox images``: :func:`images_ahead`, built or found."""
    for image in images_ahead(find_hack_dir().parent, _entries()):
        print(image.built, flush=True)
    return 0


def _images(entries: Mapping[str, SandboxEntry], root: Path) -> list[NodeImage]:
    """The images the nodes get (:func:`images_ahead`), less those :data:`WITHOUT_IMAGES` names."""
    images = images_ahead(root, entries)
    left_out = {name.strip() for name in os.environ.get(WITHOUT_IMAGES, "").split(",") if name.strip()}
    kept = [image for image in images if not left_out & set(image.names)]
    for image in images:
        if image not in kept:
            say(f"not loading {', '.join(image.names)} (${WITHOUT_IMAGES})")
    for image in kept:
        for line in image.loaded_as:
            say(f"image: {line}")
    return kept


def _start(
    record: _Record,
    root: Path,
    entries: Mapping[str, SandboxEntry],
    samples: Mapping[str, list[dict[str, Any]]],
) -> None:
    directory = record.directory
    started = time.monotonic()
    images = _images(entries, root)
    say("starting 3 real nodes (kubelet, containerd, runc) and their control plane")
    cluster = LocalCluster(Path(record.cluster), bound=False, extra_images=images)
    try:
        cluster.start()
    finally:
        cluster.detach()  # from here on only down stops it, whatever happens to this process
    assert cluster.control_plane is not None
    assert cluster.plan is not None
    plane = cluster.control_plane
    # DIR/kubeconfig, as for a bare control plane, so `operator-suite-dev kubectl --dir DIR` works on both.
    admin_kubeconfig = directory / "kubeconfig"
    shutil.copyfile(plane.kubeconfig, admin_kubeconfig)
    admin_kubeconfig.chmod(0o600)
    say(plane.kubectl("get", "nodes", "-o", "wide").rstrip())
    repository, tag = images[0].names[0].rsplit(":", 1)
    objects: list[tuple[str, str, str]] = []
    awaited: list[Awaited] = []
    notes: list[str] = []
    for name, entry in entries.items():
        home = directory / "operators" / name
        home.mkdir(parents=True, exist_ok=True)
        site = SandboxSite(plane, home, str(cluster.plan.api_address))
        prepared = entry.prepare(site) if entry.prepare is not None else Prepared()
        values = {
            "image": {"repository": repository, "tag": tag},
            "env": [{"name": key, "value": value} for key, value in prepared.env.items()],
            # One replica each, as on a laptop: the sandbox's three operators and their samples share
            # two cores. The charts' default of two replicas is tested in tests/e2e/nodes/test_in_cluster.py.
            "replicas": 1,
        }
        (home / "values.json").write_text(json.dumps(values, indent=2))  # JSON is YAML
        namespace = f"{name}-system"
        say(f"helm install {entry.chart} charts/{entry.chart} -n {namespace} (the suite's image)")
        install_chart(
            directory / "helm", plane.kubeconfig, entry.chart, entry.chart, namespace,
            ["-f", str(home / "values.json")],
        )  # fmt: skip
        record.operators.append({"name": name, "release": entry.chart, "namespace": namespace})
        record.save()
        for sample in entry.samples:
            say(f"applying {sample}")
            plane.kubectl("apply", "--server-side", "-n", SAMPLES_NAMESPACE, "-f", str(root / sample))
            objects.extend(_custom_objects(samples[sample]))
        if prepared.manifests:
            path = home / "prepared.yaml"
            path.write_text(yaml.safe_dump_all(list(prepared.manifests)))
            say(f"applying {path.relative_to(directory)}")
            plane.kubectl("apply", "--server-side", "-n", SAMPLES_NAMESPACE, "-f", str(path))
            objects.extend(_custom_objects(prepared.manifests))
        awaited.extend(prepared.awaited)
        notes.extend(prepared.notes)
    _wait_ready(plane, objects)
    for wanted in awaited:
        _wait_for(plane, wanted)
    say(f"ready in {time.monotonic() - started:.0f} s")
    print("\nUse it:")
    print(f"  export KUBECONFIG={admin_kubeconfig} PATH={plane.binaries.kubectl.parent}:$PATH")
    for entry in entries.values():
        print(entry.usage)
    for note in notes:
        print(note)
    print(f"Stop it: operator-suite-dev sandbox down --dir {directory}", flush=True)


def _documents(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def _custom_objects(documents: Iterable[Mapping[str, Any]]) -> list[tuple[str, str, str]]:
    """(kind.group, namespace, name) of each custom object among ``documents``."""
    found = []
    for document in documents:
        group = document["apiVersion"].split("/")[0]
        if "." in group:  # kind.group: a bare kind may also name a category
            found.append(
                (f"{document['kind'].lower()}.{group}", SAMPLES_NAMESPACE, document["metadata"]["name"])
            )
    return found


def _stuck_pods(plane: ControlPlane, since: dict[WaitingKey, float]) -> dict[WaitingKey, float]:
    """Raise at once when a pod of the samples cannot start (:func:`.pod_failures.stuck_containers`);
    else the updated times each waiting container began to wait."""
    pods = json.loads(plane.kubectl("get", "pods", "-n", SAMPLES_NAMESPACE, "-o", "json"))["items"]
    since = waiting_since(pods, since, time.monotonic())
    stuck = stuck_containers(pods, since, time.monotonic())
    if stuck:
        raise ControlPlaneError("a sample's pod cannot start:\n  " + "\n  ".join(s.describe() for s in stuck))
    return since


def _wait_ready(plane: ControlPlane, objects: list[tuple[str, str, str]]) -> None:
    """Poll each custom object until Ready=True, printing each new Ready message."""
    deadline = time.monotonic() + _READY_TIMEOUT
    pending = list(objects)
    last: dict[tuple[str, str, str], str] = {}
    since: dict[WaitingKey, float] = {}
    while pending:
        since = _stuck_pods(plane, since)
        if time.monotonic() > deadline:
            raise ControlPlaneError(f"not Ready after {_READY_TIMEOUT:.0f} s: {pending}")
        for item in list(pending):
            kind, namespace, name = item
            obj = json.loads(plane.kubectl("get", kind, name, "-n", namespace, "-o", "json"))
            ready = _ready_condition(obj)
            status, reason = ready.get("status", "?"), ready.get("reason", "")
            line = f"{kind}/{name}: Ready={status} {reason} {ready.get('message', '')}"
            if last.get(item) != line:
                say(line.strip())
                last[item] = line
            if ready.get("status") == "True":
                pending.remove(item)
        if pending:
            time.sleep(_POLL_SECONDS)


def _wait_for(plane: ControlPlane, wanted: Awaited) -> None:
    """Until an object of ``wanted`` is done. One that failed is said, and the wait goes on for another
    (a schedule that fires while its cluster still starts makes a backup that fails, then one that
    completes); on the time-out, the failures are the reason given."""
    say(f"waiting for {wanted.what}")
    deadline = time.monotonic() + wanted.timeout
    since: dict[WaitingKey, float] = {}
    failures: dict[str, str] = {}
    while True:
        since = _stuck_pods(plane, since)
        found = plane.kubectl(
            "get", wanted.resource, "-n", SAMPLES_NAMESPACE, "-l", wanted.selector, "-o", "json"
        )
        for item in json.loads(found)["items"]:
            status = item.get("status") or {}
            name = item["metadata"]["name"]
            if status.get("phase") == wanted.done:
                say(f"{wanted.resource.split('.')[0]}/{name}: {wanted.done}")
                return
            if status.get("phase") == wanted.failed and name not in failures:
                failures[name] = _ready_condition(item).get("message", "")
                kind = wanted.resource.split(".")[0]
                say(f"{kind}/{name}: {wanted.failed}: {failures[name]}; waiting for another")
        if time.monotonic() > deadline:
            why = "; ".join(f"{name}: {message}" for name, message in failures.items()) or "none ended"
            raise ControlPlaneError(f"{wanted.what}: not {wanted.done} after {wanted.timeout:.0f} s ({why})")
        time.sleep(_POLL_SECONDS)


# ---------------------------------------------------------------- down


def sandbox_down(directory: Path, lock: Path | None = None) -> int:
    """Stop everything of the sandbox in ``directory``, recorded or not; 1 if anything is left."""
    directory = directory.resolve()
    path = directory / "sandbox.json"
    record: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {}
    lock = Path(record["lock"]) if record.get("lock") else (lock or DEFAULT_LOCK)
    cluster = Path(record.get("cluster") or directory / "cluster")
    plan = None
    if (cluster / CLUSTER_RECORD).exists():
        recorded = json.loads((cluster / CLUSTER_RECORD).read_text())
        plan = nodes_plan(recorded["slot"], recorded["count"], cluster.resolve() / "slot")
    if not record and plan is None and not sandbox_processes(directory):
        release_lock(lock, directory)
        say(f"no sandbox recorded in {directory}, and none of its processes runs")
        return 0
    # The nodes (their daemons, shims and containers, one cgroup tree), then the control plane.
    stop_recorded_cluster(cluster)
    # What was started but not recorded (up stopped mid-start), and the servers entries started.
    _stop_leftovers(directory)
    left = [f"process {pid}" for pid in sandbox_processes(directory)]
    left.extend(host.leftovers(plan) if plan is not None else [])
    path.unlink(missing_ok=True)
    (directory / "kubeconfig").unlink(missing_ok=True)
    release_lock(lock, directory)
    if left:
        complain(f"left behind: {', '.join(left)}")
        return 1
    say(f"stopped everything of the sandbox in {directory}")
    return 0
