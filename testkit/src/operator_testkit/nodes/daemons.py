"""How a cluster's daemons are started, and the record that lets another process start one again.

Every daemon of a slot (each node's containerd and kubelet, kube-proxy, the resizer) is started by
:func:`start_daemon`: in the slot's network namespace, in its cgroup (joined before it runs anything),
its output appended to its log, holding the slot's lock. What it was started with (argv, environment,
cgroup, log) is written to :data:`RECORD` in the slot's directory at that moment, so that a node
rebooted after a power cut (:mod:`.power`) gets exactly the daemons it had, whichever process reboots
it: the test that started the cluster, or a shell against a detached sandbox.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import threading
from dataclasses import asdict, dataclass
from pathlib import Path

from operator_testkit.nodes import host
from operator_testkit.nodes.plan import NodesPlan
from operator_testkit.servers import log_tail, spawn

__all__ = [
    "DEVICE_PLUGIN_RACE",
    "KUBELET_STARTS",
    "RECORD",
    "DaemonRecord",
    "lost_device_plugin_race",
    "recorded_daemons",
    "start_daemon",
]

RECORD = "daemons.json"
"""In the slot's directory: every daemon's :class:`DaemonRecord`, by name (readable by root only: the
environment is the starting process's)."""

DEVICE_PLUGIN_RACE = "device-plugins/kubelet.sock: bind: address already in use"
"""What a kubelet says when it lost the race for the machine-wide device-plugin socket: every kubelet
listens on /var/lib/kubelet/device-plugins/kubelet.sock whatever its root-dir, after removing what is
there, so two that start at the same moment (two test workers' nodes) can both remove and one bind."""

KUBELET_STARTS = 3
"""How often a kubelet that lost that race is started, as systemd's ``Restart=`` would."""


@dataclass(frozen=True)
class DaemonRecord:
    """One daemon as it was started: ``argv`` is run in the slot's namespace, in ``cgroup``."""

    name: str
    argv: tuple[str, ...]
    env: dict[str, str]
    cgroup: str
    log: Path


def lost_device_plugin_race(record: DaemonRecord) -> bool:
    """Whether this daemon is a kubelet that exited because another took the device-plugin socket."""
    return record.name.startswith("kubelet-") and DEVICE_PLUGIN_RACE in log_tail(record.log, 5)


def start_daemon(
    plan: NodesPlan, record: DaemonRecord, *, bound: bool, lock: int | None
) -> subprocess.Popen[bytes]:
    """Start ``record``'s daemon and write its record. ``bound``: it dies with this process (tests);
    ``lock``: a descriptor of the slot's lock that it inherits, so that the slot is held as long as
    any of its daemons lives (a killed test run frees it by dying)."""
    host.make_cgroups(record.cgroup)
    process = spawn(
        host.in_namespace(plan, *record.argv),
        record.log,
        bound=bound,
        env=record.env,
        pass_fds=() if lock is None else (lock,),
        preexec_fn=host.joining_cgroups(record.cgroup),
    )
    # Its children (containerd's shims, above all) are born in its cgroups, so they die with it.
    host.join_cgroups(process.pid, record.cgroup)
    recorded = recorded_daemons(plan)
    if recorded.get(record.name) != record:  # a rebooted node's daemons are recorded already
        _write(plan, {**recorded, record.name: record})
    return process


def recorded_daemons(plan: NodesPlan) -> dict[str, DaemonRecord]:
    """The slot's daemons as they were started, by name (none before the first start)."""
    path = plan.directory / RECORD
    with contextlib.suppress(FileNotFoundError):
        return {
            name: DaemonRecord(
                name, tuple(entry["argv"]), dict(entry["env"]), entry["cgroup"], Path(entry["log"])
            )
            for name, entry in json.loads(path.read_text()).items()
        }
    return {}


def _write(plan: NodesPlan, records: dict[str, DaemonRecord]) -> None:
    path = plan.directory / RECORD
    written = path.with_name(f".{RECORD}.{os.getpid()}.{threading.get_ident()}")  # one writer each
    text = json.dumps(
        {name: {**asdict(r), "argv": list(r.argv), "log": str(r.log)} for name, r in records.items()},
        indent=2,
    )
    # Created readable by root only, before anything is written: the environment may hold secrets.
    descriptor = os.open(written, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(descriptor, 0o600)  # should a killed writer have left the file with other permissions
    with os.fdopen(descriptor, "w") as out:
        out.write(text)
    written.replace(path)
