"""What real nodes take from the machine, and how each is given back.

- **A slot** (:func:`acquire_slot`): a file lock under ``/run/operator-suite/slots/``, held by the
  nodes' own processes (they inherit its descriptor), so it frees itself when the last of them ends,
  however they end. A slot's record names the directory of its last holder, so the next holder sweeps
  what a killed run left (:func:`sweep_slot`).
- **A network namespace** per slot (:func:`create_network`), kept alive by a bind mount on a file of the
  slot's directory (no ``/run/netns`` entry), joined to the machine by a veth pair. Its FORWARD chain
  drops whatever a pod sends outside the slot's ranges, and it has no default route.
- **cgroups**: every process of the slot (daemons, shims, containers) runs under
  ``/operator-suite/slot<N>/`` in every v1 controller; :func:`kill_cgroup_tree` freezes, kills and
  removes that tree, so nothing outlives the nodes. :func:`kill_frozen` kills a part of it (one
  node's, for a power cut) the same way.
- **Host-wide settings** the kubelet changes (:data:`KUBELET_SYSCTLS`), the inotify instances the nodes
  need (:data:`INOTIFY_INSTANCES`), and the fixed paths the kubelet and containerd create
  (:data:`FIXED_PATHS`): the first slot taken records them, the last slot given back puts them back.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from operator_testkit.errors import ControlPlaneError
from operator_testkit.nodes.plan import RUN_DIR, SLOTS, NodesPlan, slot_cgroup, socket_directory

__all__ = [
    "FIXED_PATHS",
    "KUBELET_SYSCTLS",
    "Slot",
    "acquire_slot",
    "borrow_slot_lock",
    "command_lines",
    "create_network",
    "delete_network",
    "in_namespace",
    "kill_cgroup_tree",
    "kill_frozen",
    "leftovers",
    "make_cgroups",
    "mounts_under",
    "pids_in_cgroups",
    "remove_cgroups",
    "share_directory",
    "sweep_slot",
    "take_recorded_slot",
    "unmount_under",
]

CGROUP_ROOT = Path("/sys/fs/cgroup")
EGRESS_CHAIN = "OPERATOR-SUITE-EGRESS"
KUBELET_SYSCTLS = (
    "vm.overcommit_memory",
    "vm.panic_on_oom",
    "kernel.panic",
    "kernel.panic_on_oops",
    "kernel.keys.root_maxkeys",
    "kernel.keys.root_maxbytes",
)
"""What the kubelet sets on the whole machine at its start (its "kernel defaults")."""
INOTIFY_INSTANCES = "fs.inotify.max_user_instances"
INOTIFY_INSTANCES_NEEDED = 1024
"""Every kubelet and containerd watches files through inotify instances of their own (about 15 a node
here): Debian's 128 per user ran out with three clusters of three nodes ("too many open files", and a
containerd whose CRI plugin did not load). Raised while nodes run, as kind advises; put back after."""
MACHINE_SYSCTLS = (*KUBELET_SYSCTLS, INOTIFY_INSTANCES)
FIXED_PATHS = (
    Path("/var/lib/kubelet"),
    Path("/var/log/containers"),
    Path("/var/log/pods"),
    Path("/run/containerd"),
    Path("/var/lib/cni"),
    Path("/etc/cni"),
    Path("/run/netns"),
    Path("/opt/cni"),
)
"""Places the kubelet, containerd or the CNI plugins write whatever their configured directories are."""


def _run(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=60)
    if check and result.returncode != 0:
        raise ControlPlaneError(
            f"{' '.join(argv)} failed (exit {result.returncode}): {result.stderr.strip()}"
        )
    return result


def in_namespace(plan: NodesPlan, *argv: str) -> list[str]:
    """``argv`` run in the slot's network namespace (and only that: the mount namespace stays this one,
    so the kubelet's volume mounts and containerd's root filesystems are seen by both)."""
    return ["nsenter", f"--net={plan.netns_file}", "--", *argv]


# ---------------------------------------------------------------- slots


@dataclass
class Slot:
    """A slot held by this process: ``descriptor`` keeps the lock; hand it to the nodes' processes."""

    index: int
    descriptor: int

    def release(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.descriptor)


def _slot_lock(index: int) -> Path:
    return RUN_DIR / "slots" / f"{index}.lock"


def _slot_record(index: int) -> Path:
    return RUN_DIR / "slots" / f"{index}.json"


def _held_by_another(index: int) -> bool:
    path = _slot_lock(index)
    if not path.exists():
        return False
    with path.open("a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(handle, fcntl.LOCK_UN)
        return False


def acquire_slot(directory: Path) -> Slot:
    """The first free slot, swept of what a killed holder left and recorded as ``directory``'s; the
    machine's settings are recorded first when no other slot is held."""
    (RUN_DIR / "slots").mkdir(parents=True, exist_ok=True)
    with _machine_lock():
        for index in range(SLOTS):
            descriptor = os.open(_slot_lock(index), os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(descriptor)
                continue
            if not any(_held_by_another(other) for other in range(SLOTS) if other != index):
                _record_machine()
            _raise_inotify_instances()
            sweep_slot(index)
            _slot_record(index).write_text(json.dumps({"directory": str(directory), "pid": os.getpid()}))
            return Slot(index, descriptor)
    raise ControlPlaneError(
        f"all {SLOTS} slots for real nodes on this machine are taken (locks in {RUN_DIR / 'slots'}): "
        "stop a sandbox (make down) or wait for another test run"
    )


def give_back_slot(slot: Slot) -> None:
    """Release ``slot``; when it was the last one held, put the machine's settings and paths back."""
    with _machine_lock():
        _slot_record(slot.index).unlink(missing_ok=True)
        slot.release()
        if not any(_held_by_another(index) for index in range(SLOTS)):
            _restore_machine()


def _recorded_directory(index: int) -> Path | None:
    with contextlib.suppress(OSError, ValueError, KeyError):
        return Path(json.loads(_slot_record(index).read_text())["directory"])
    return None


def take_recorded_slot(index: int, directory: Path, cgroup: str) -> Slot | None:
    """Kill the daemons of the detached cluster in ``directory`` and take slot ``index`` from them, in
    one step under the machine lock; None when the slot's record names another cluster (this record is
    stale), whose daemons are left alone.

    The daemons hold the slot's lock. Killed outside the machine lock, they free the slot while its
    network still exists, and a cluster starting in between takes the slot and then loses its new link
    when this stop deletes the old one (seen: "network is unreachable" in the next cluster's pods)."""
    with _machine_lock():
        if _recorded_directory(index) not in (None, directory):
            return None
        kill_cgroup_tree(cgroup)  # the daemons, the shims and every container
        descriptor = os.open(_slot_lock(index), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(descriptor)
            raise ControlPlaneError(
                f"slot {index} is still locked after its cluster's processes were killed; "
                f"see which process holds {_slot_lock(index)} (fuser -v)"
            ) from None
        return Slot(index, descriptor)


_PIDFD_GETFD = 438
"""pidfd_getfd(2)'s number, the same on every architecture (Linux 5.6)."""


def borrow_slot_lock(index: int, holders: Iterable[int]) -> int | None:
    """A descriptor of slot ``index``'s lock, copied from the first of ``holders`` (pids) that has one
    (pidfd_getfd(2)): the very open file description, so the lock is held as long as any copy lives.
    What a daemon started again from another process (a node rebooted from a shell) inherits, as the
    first daemons did; None when no holder has it."""
    lock = str(_slot_lock(index))
    libc = ctypes.CDLL(None, use_errno=True)
    for pid in holders:
        with contextlib.suppress(OSError):
            for entry in Path(f"/proc/{pid}/fd").iterdir():
                if os.readlink(entry) != lock:
                    continue
                pidfd = os.pidfd_open(pid)
                try:
                    descriptor = int(libc.syscall(_PIDFD_GETFD, pidfd, int(entry.name), 0))
                finally:
                    os.close(pidfd)
                if descriptor >= 0:
                    return descriptor
    return None


@contextlib.contextmanager
def _machine_lock() -> Iterator[None]:
    RUN_DIR.mkdir(parents=True, exist_ok=True)
    with (RUN_DIR / "machine.lock").open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _sysctl_path(name: str) -> Path:
    return Path("/proc/sys") / name.replace(".", "/")


def _record_machine() -> None:
    record = RUN_DIR / "machine.json"
    if record.exists():
        return  # a run killed before it could restore: its record holds the values from before it
    values = {name: _sysctl_path(name).read_text().strip() for name in MACHINE_SYSCTLS}
    absent = [str(path) for path in FIXED_PATHS if not path.exists()]
    record.write_text(json.dumps({"sysctls": values, "absent": absent}, indent=2))


def _raise_inotify_instances() -> None:
    path = _sysctl_path(INOTIFY_INSTANCES)
    if int(path.read_text()) < INOTIFY_INSTANCES_NEEDED:
        path.write_text(str(INOTIFY_INSTANCES_NEEDED))


def _restore_machine() -> None:
    record = RUN_DIR / "machine.json"
    if not record.exists():
        return
    saved = json.loads(record.read_text())
    for name, value in saved["sysctls"].items():
        with contextlib.suppress(OSError):
            _sysctl_path(name).write_text(value)
    for absent in saved["absent"]:
        path = Path(absent)
        if path.exists() and not mounts_under(path):
            subprocess.run(["rm", "-rf", "--one-file-system", str(path)], check=False)
    record.unlink()


def sweep_slot(index: int) -> None:
    """Remove what an earlier holder of slot ``index`` left: processes, mounts, its link, cgroups."""
    kill_cgroup_tree(slot_cgroup(index))
    record = _slot_record(index)
    if record.exists():
        with contextlib.suppress(ValueError, KeyError):
            unmount_under(Path(json.loads(record.read_text())["directory"]))
    _run("ip", "link", "delete", f"osnodes{index}", check=False)
    _run("rm", "-rf", str(socket_directory(index)), check=False)


# ---------------------------------------------------------------- network


def create_network(plan: NodesPlan) -> None:
    """The slot's namespace, its link to the machine, its routes and its egress guard."""
    plan.directory.mkdir(parents=True, exist_ok=True)
    plan.netns_file.touch()
    _run("unshare", f"--net={plan.netns_file}", "true")

    def inside(*argv: str) -> None:
        _run(*in_namespace(plan, *argv))

    inside("ip", "link", "set", "lo", "up")
    inside("ip", "link", "add", plan.namespace_link, "type", "veth", "peer", "name", plan.machine_link,
           "netns", str(os.getpid()))  # fmt: skip
    prefix = plan.link.prefixlen
    inside("ip", "addr", "add", f"{plan.namespace_address}/{prefix}", "dev", plan.namespace_link)
    for node in plan.nodes:
        inside("ip", "addr", "add", f"{node.address}/32", "dev", plan.namespace_link)
    inside("ip", "link", "set", plan.namespace_link, "up")
    _run("ip", "addr", "add", f"{plan.api_address}/{prefix}", "dev", plan.machine_link)
    _run("ip", "link", "set", plan.machine_link, "up")
    for network in (plan.pod_range, plan.service_range):
        _run("ip", "route", "add", str(network), "via", str(plan.namespace_address), "dev", plan.machine_link)
    # Pods on one node reach pods on another through the namespace: it forwards, the machine need not.
    inside("sysctl", "-q", "-w", "net.ipv4.ip_forward=1")
    # In mangle's FORWARD, which runs after a Service's address is translated to a pod's and before the
    # filter table, whose FORWARD chain kube-proxy and the kubelet fill with rules of their own.
    guard = ("iptables", "-w", "-t", "mangle")
    inside(*guard, "-N", EGRESS_CHAIN)
    for network in plan.reachable:
        inside(*guard, "-A", EGRESS_CHAIN, "-d", str(network), "-j", "RETURN")
    inside(*guard, "-A", EGRESS_CHAIN, "-j", "DROP")
    inside(*guard, "-I", "FORWARD", "1", "-j", EGRESS_CHAIN)


def delete_network(plan: NodesPlan) -> None:
    """The link (its peer and the routes go with it) and the namespace (with every bridge and rule in it)."""
    _run("ip", "link", "delete", plan.machine_link, check=False)
    _run("rm", "-rf", str(plan.socket_directory), check=False)
    if plan.netns_file.exists():
        _run("umount", "-l", str(plan.netns_file), check=False)
        plan.netns_file.unlink(missing_ok=True)


# ---------------------------------------------------------------- cgroups


def _controllers() -> list[Path]:
    """The mounted cgroup hierarchies: v1's (cpu, memory, pids, freezer, name=systemd...) and, on a
    hybrid machine like this one, the v2 hierarchy beside them, where runc and the kubelet also write."""
    found = []
    for line in Path("/proc/self/mounts").read_text().splitlines():
        _, point, kind, *_ = line.split()
        if kind in ("cgroup", "cgroup2"):
            found.append(Path(point))
    return found


def make_cgroups(path: str) -> None:
    """``path`` (``/operator-suite/...``) in every v1 hierarchy: the kubelet expects its cgroupRoot there."""
    for controller in _controllers():
        (controller / path.lstrip("/")).mkdir(parents=True, exist_ok=True)


def joining_cgroups(path: str) -> Callable[[], None]:
    """What a child runs between fork and exec to join ``path`` in every hierarchy itself (the files
    are found beforehand: the child only writes): it is in its cgroups before it runs anything, so a
    parent killed just after the fork leaves no daemon outside them, holding the slot's lock."""
    files = [controller / path.lstrip("/") / "cgroup.procs" for controller in _controllers()]

    def join() -> None:
        for procs in files:
            with contextlib.suppress(OSError):
                procs.write_text(str(os.getpid()))

    return join


def join_cgroups(pid: int, path: str) -> None:
    """Move ``pid`` into ``path`` in every v1 hierarchy (its children follow it there)."""
    for controller in _controllers():
        with contextlib.suppress(OSError):
            (controller / path.lstrip("/") / "cgroup.procs").write_text(str(pid))


def _pids_in(tree: Path) -> set[int]:
    pids: set[int] = set()
    for procs in tree.rglob("cgroup.procs"):
        with contextlib.suppress(OSError):
            pids.update(int(line) for line in procs.read_text().split())
    return pids


def _trees(path: str) -> list[Path]:
    """``path`` in every hierarchy where it exists."""
    return [
        tree for tree in (controller / path.lstrip("/") for controller in _controllers()) if tree.exists()
    ]


def pids_in_cgroups(*paths: str) -> set[int]:
    """Every process in ``paths`` or below them, in any hierarchy (a process not yet moved into one
    hierarchy's cgroup is found in another's)."""
    return set().union(*(_pids_in(tree) for path in paths for tree in _trees(path)))


def command_lines(pids: set[int]) -> dict[int, tuple[str, ...]]:
    """The command line of each of ``pids`` that is still there (a zombie's is empty)."""
    found = {}
    for pid in pids:
        with contextlib.suppress(OSError):
            raw = Path(f"/proc/{pid}/cmdline").read_bytes()
            found[pid] = tuple(part.decode(errors="replace") for part in raw.split(b"\0")[:-1])
    return found


def _set_freezer(path: str, state: str, *, below: bool) -> None:
    root = CGROUP_ROOT / "freezer" / path.lstrip("/")
    for file in root.rglob("freezer.state") if below else [root / "freezer.state"]:
        with contextlib.suppress(OSError):
            file.write_text(state)


def kill_frozen(frozen: Sequence[str], victims: Callable[[], set[int]], timeout: float = 10.0) -> int:
    """Freeze the cgroups ``frozen`` (nothing in them forks any more), then SIGKILL every pid
    ``victims()`` names, again and again until it names none; how many were killed. Every freezer
    below ``frozen`` is thawed on the way (a frozen process cannot die) and at the end.

    ``victims`` reads what is alive each time: a process forked outside ``frozen`` between two looks
    (a daemon's child, say) is killed on the next."""
    for path in frozen:
        _set_freezer(path, "FROZEN", below=False)
    killed: set[int] = set()
    deadline = time.monotonic() + timeout
    try:
        while pids := victims():
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            killed |= pids
            # A frozen process cannot die: thaw the trees, and every container frozen on its own (a
            # test's freeze, ``ctr tasks pause``), whose state a thawed parent does not change.
            for path in frozen:
                _set_freezer(path, "THAWED", below=True)
            if time.monotonic() > deadline:
                raise ControlPlaneError(
                    f"processes {sorted(pids)} in cgroups {', '.join(frozen)} did not die in {timeout:.0f} s"
                )
            time.sleep(0.05)
    finally:
        for path in frozen:
            _set_freezer(path, "THAWED", below=True)
    return len(killed)


def remove_cgroups(path: str, *, keep_root: bool = False) -> None:
    """Remove the (empty) cgroups below ``path`` in every hierarchy, deepest first, and ``path`` itself
    unless ``keep_root``; one that a process still holds stays."""
    for tree in _trees(path):
        for directory in sorted((d for d in tree.rglob("*") if d.is_dir()), key=lambda d: -len(d.parts)):
            with contextlib.suppress(OSError):
                directory.rmdir()
        if not keep_root:
            with contextlib.suppress(OSError):
                tree.rmdir()


def kill_cgroup_tree(path: str, timeout: float = 10.0) -> None:
    """Freeze ``path``, kill every process in it (in every hierarchy), thaw, and remove its cgroups."""
    if not _trees(path):
        return
    kill_frozen([path], lambda: pids_in_cgroups(path), timeout)
    remove_cgroups(path)
    for controller in _controllers():
        with contextlib.suppress(OSError):
            (controller / "operator-suite").rmdir()  # only once no slot has anything left


# ---------------------------------------------------------------- mounts


def mounts_under(directory: Path) -> list[Path]:
    """Mount points inside ``directory`` (this mount namespace, which the nodes share), deepest first."""
    root = directory.resolve() if directory.exists() else directory
    found = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = Path(line.split()[4].encode().decode("unicode_escape"))
        if point == root or point.is_relative_to(root):
            found.append(point)
    return sorted(set(found), key=lambda p: -len(p.parts))


def share_directory(directory: Path) -> None:
    """Make ``directory`` a shared mount (a bind mount on itself): a mount made below it inside a pod
    with bidirectional propagation then reaches this mount namespace, and so the kubelet."""
    directory.mkdir(parents=True, exist_ok=True)
    _run("mount", "--bind", str(directory), str(directory))
    _run("mount", "--make-shared", str(directory))


def unmount_under(directory: Path) -> None:
    """Lazily unmount every mount inside ``directory`` (overlay roots, volumes, namespaces)."""
    for _ in range(3):
        points = mounts_under(directory)
        if not points:
            return
        for point in points:
            _run("umount", "-l", str(point), check=False)


def take_down(plan: NodesPlan) -> None:
    """What stays of a slot's nodes once their processes are dead: mounts, the link and the namespace,
    and the nodes' directories (their logs kept). For a stop in this process and one from a record."""
    unmount_under(plan.directory)
    delete_network(plan)
    forget_nodes(plan)


def forget_nodes(plan: NodesPlan) -> None:
    """Remove each stopped node's directory (its containerd's images and containers, its kubelet's
    state, its volumes: some 1.3 GB a node), keeping the logs: a test run starts many clusters, and
    the machine's disk is not theirs to fill. Only once nothing is mounted there any more."""
    if mounts_under(plan.directory):
        return
    for node in plan.nodes:
        _run("rm", "-rf", "--one-file-system", str(node.directory), check=False)


def leftovers(plan: NodesPlan) -> list[str]:
    """What a stopped slot left on the machine: processes, mounts, its link, cgroups (empty when clean)."""
    found = []
    path = plan.cgroup.lstrip("/")
    for controller in _controllers():
        if (controller / path).exists():
            found.append(f"cgroup {controller / path}")
    found.extend(f"mount {point}" for point in mounts_under(plan.directory))
    if plan.socket_directory.exists():
        found.append(f"directory {plan.socket_directory}")
    if Path(f"/sys/class/net/{plan.machine_link}").exists():
        found.append(f"link {plan.machine_link}")
    root = plan.directory.resolve()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if root.as_posix() in (entry / "cmdline").read_bytes().decode(errors="replace"):
                    found.append(f"process {entry.name}")
    return found
