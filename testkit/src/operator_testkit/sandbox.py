"""``operator-suite-dev sandbox up|down``: the suite's main job on one machine.

``up`` starts a local control plane, the node agent (so pods really run), and
each operator that registers a sandbox entry (entry point group
``operator_suite.sandbox``), each as its own ServiceAccount; applies that
operator's sample manifests; and waits, printing progress, until every sample
custom object reports ``Ready=True``. Everything runs detached and is recorded
in ``DIR/sandbox.json``; ``down`` stops it all and checks that no process is
left behind. Nothing here knows a particular operator: the entries say which
console script, RBAC file and samples to use.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import sys
import time
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import yaml

from operator_core.errors import ControlPlaneError
from operator_testkit.binaries import find_hack_dir
from operator_testkit.controlplane import (
    ENDPOINT_CONTROLLERS,
    ControlPlane,
    ControlPlaneState,
    stop_recorded,
)
from operator_testkit.nodeagent.harness import processes_under, start_agent
from operator_testkit.operators import OperatorProcess, service_account_kubeconfig

__all__ = ["SandboxEntry", "sandbox_down", "sandbox_up"]

ENTRY_POINT_GROUP = "operator_suite.sandbox"
_READY_TIMEOUT = 300.0


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


def _entries() -> dict[str, SandboxEntry]:
    return {e.name: e.load() for e in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name)}


def _say(message: str) -> None:
    print(f"[sandbox] {message}", flush=True)


def _ready_condition(obj: dict[str, Any]) -> dict[str, Any]:
    for condition in (obj.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return dict(condition)
    return {}


def _wait_ready(plane: ControlPlane, objects: list[tuple[str, str, str]]) -> None:
    """Poll each custom object until Ready=True, printing each new Ready message."""
    deadline = time.monotonic() + _READY_TIMEOUT
    pending = list(objects)
    last: dict[tuple[str, str, str], str] = {}
    while pending:
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
        time.sleep(2)


def sandbox_up(directory: Path) -> int:
    directory = directory.resolve()
    if (directory / "sandbox.json").exists():
        _say(f"a sandbox is already recorded in {directory}")
        _say(f"stop it first: operator-suite-dev sandbox down --dir {directory}")
        return 1
    root = find_hack_dir().parent
    started = time.monotonic()
    _say("starting etcd, kube-apiserver, kube-controller-manager, kube-scheduler")
    plane = ControlPlane(
        directory / "controlplane", bind_to_parent=False, disabled_controllers=ENDPOINT_CONTROLLERS
    )
    plane.start()
    # DIR/kubeconfig, as for a bare control plane, so `operator-suite-dev kubectl --dir DIR` works on both.
    admin_kubeconfig = directory / "kubeconfig"
    shutil.copyfile(plane.kubeconfig, admin_kubeconfig)
    admin_kubeconfig.chmod(0o600)
    record: dict[str, Any] = {"controlplane": str(plane.directory), "operators": [], "agent": None}
    (directory / "sandbox.json").write_text(json.dumps(record))
    plane.kubectl("apply", "--server-side", "-f", str(root / "deploy" / "crds"))
    plane.kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
    _say("starting the node agent (3 nodes in zones a, b, c)")
    agent = start_agent(plane, directory / "nodeagent", detached=True)
    record["agent"] = {"pid": agent.process.pid, "dir": str(agent.state_dir)}
    (directory / "sandbox.json").write_text(json.dumps(record))
    objects: list[tuple[str, str, str]] = []
    for name, entry in _entries().items():
        _say(f"starting {entry.script} as its own ServiceAccount")
        home = directory / "operators" / name
        home.mkdir(parents=True, exist_ok=True)
        kubeconfig = service_account_kubeconfig(plane, root / entry.rbac, home / "kubeconfig")
        operator = OperatorProcess(entry.script, kubeconfig, home / "operator.log")
        operator.start()
        record["operators"].append({"name": name, "pid": operator.pid, "log": str(operator.log_path)})
        (directory / "sandbox.json").write_text(json.dumps(record))
        for sample in entry.samples:
            _say(f"applying {sample}")
            plane.kubectl("apply", "--server-side", "-n", "default", "-f", str(root / sample))
            for document in yaml.safe_load_all((root / sample).read_text()):
                if document and "." in document["apiVersion"].split("/")[0]:
                    objects.append((document["kind"].lower(), "default", document["metadata"]["name"]))
    _wait_ready(plane, objects)
    _say(f"ready in {time.monotonic() - started:.0f} s")
    print("\nUse it:")
    print(f"  export KUBECONFIG={admin_kubeconfig} PATH={plane.binaries.kubectl.parent}:$PATH")
    for entry in _entries().values():
        print(entry.usage)
    print(f"Stop it: operator-suite-dev sandbox down --dir {directory}", flush=True)
    return 0


def _terminate(pid: int, grace: float) -> None:
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.2)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)


def sandbox_down(directory: Path) -> int:
    directory = directory.resolve()
    path = directory / "sandbox.json"
    if not path.exists():
        _say(f"no sandbox recorded in {directory}")
        return 0
    record = json.loads(path.read_text())
    for operator in record.get("operators", []):
        _terminate(operator["pid"], 30)
    if record.get("agent"):
        _terminate(record["agent"]["pid"], 40)  # it stops its containers first
        for pid in processes_under(Path(record["agent"]["dir"])):
            os.kill(pid, signal.SIGKILL)
    controlplane = Path(record["controlplane"])
    if (controlplane / "state.json").exists():
        stop_recorded(ControlPlaneState.load(controlplane).components)
        (controlplane / "state.json").unlink()
    left = processes_under(directory)
    path.unlink()
    (directory / "kubeconfig").unlink(missing_ok=True)
    if left:
        print(f"[sandbox] processes left behind: {left}", file=sys.stderr)
        return 1
    _say(f"stopped everything recorded in {directory}")
    return 0
