"""Faults of a whole node, through the mechanisms a machine really has: its power, its network
cable, its administrator. A fault that cannot be made (no such node, a reboot of a node that runs)
raises :class:`~.faults.FaultError` with why.

=============================  ====================================================================
fault                          how
=============================  ====================================================================
``power_cut``                  SIGKILL at once, with the cgroup freezer holding them still, the node's
                               kubelet, its containerd, that containerd's shims (their ``-address`` is
                               its socket) and every process of its pods (its ``cgroupRoot`` tree).
                               The Node object is not touched: it goes NotReady when the node
                               lifecycle controller's grace runs out. Its volumes, containerd's root
                               and state, and its mounts stay as they were
``reboot``                     only after a power cut: the node's containerd, then its kubelet,
                               started again exactly as first (argv, environment, namespace, cgroups:
                               :mod:`.daemons`' record); waits for containerd's socket to answer and
                               the Node to be Ready. The kubelet starts the pods' containers again
                               itself, their volumes kept
``isolate`` / ``reconnect``    the kubelet cut off from the API server, its containers running and
                               talking to each other: iptables in the slot's namespace drops what the
                               kubelet's sockets send to the API server (matched by the group id it
                               alone runs with) and what the API server sends to the kubelet's port
``drain`` / ``uncordon``       ``kubectl drain --ignore-daemonsets --delete-emptydir-data`` (a drain
                               a PodDisruptionBudget holds past its timeout is an answer, not an
                               error), ``kubectl uncordon``
=============================  ====================================================================

A power cut is not a kill of the slot (:func:`.host.kill_cgroup_tree`): the node's cgroups below its
``cgroupRoot`` go, as they would with the machine, but ``cgroupRoot`` itself and the daemons' cgroup
stay, since the kubelet needs them when it starts again. What a fault leaves (a node still cut, its
rules) goes with the cluster: its processes with the slot's cgroups, its rules with its namespace.

Mounts stay through a power cut (volumes, containers' root filesystems, the pods' network namespaces
kept under containerd's state): this machine does not lose them, and the kubelet and containerd find
and clean them up on their start as they do after a crash of their own.
"""

from __future__ import annotations

import datetime
import json
import re
import socket
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from operator_testkit.nodes import host
from operator_testkit.nodes.daemons import (
    KUBELET_STARTS,
    DaemonRecord,
    lost_device_plugin_race,
    recorded_daemons,
)
from operator_testkit.nodes.faults import FaultError
from operator_testkit.nodes.plan import NodePlan, NodesPlan
from operator_testkit.servers import log_tail

__all__ = [
    "NodePower",
    "drain_answer",
    "heartbeat",
    "isolation_rules",
    "power_cut_victims",
    "ready_since",
]

Answer = dict[str, Any]
Start = Callable[[DaemonRecord], "subprocess.Popen[bytes]"]

_SOCKET_TIMEOUT = 30.0
_READY_TIMEOUT = 120.0
_KUBECTL_TIMEOUT = 60.0
_HELPER_WAIT_SECONDS = 2.0
"""How long a drain refused for a storage helper pod waits before it runs again."""


# ---------------------------------------------------------------- decisions (pure)


def _under(path: str, directory: Path) -> bool:
    return path == str(directory) or path.startswith(f"{directory}/")


def _names_node(node: NodePlan, argv: Sequence[str]) -> bool:
    """Whether a command line is one of the node's daemons or works for them: the kubelet and containerd
    (and a runc they run) name files in the node's directory; a shim names its containerd's socket."""
    socket_path = str(node.sockets / "containerd.sock")
    for index, argument in enumerate(argv):
        value = argument.split("=", 1)[1] if argument.startswith("-") and "=" in argument else argument
        if _under(value, node.directory):
            return True
        if argument == "-address" and argv[index + 1 : index + 2] == [socket_path]:
            return True
    return False


def power_cut_victims(
    node: NodePlan, daemons: Mapping[int, Sequence[str]], in_node_cgroups: Iterable[int]
) -> set[int]:
    """The pids a power cut of ``node`` kills: every process in the node's own cgroups (its daemons',
    its pods'), and every process of the slot's daemons (``daemons``: pid to command line) that is
    one of the node's, wherever it runs (in a sandbox started before each node's daemons had a cgroup
    of their own, say). kube-proxy, the resizer and the other nodes' daemons stay."""
    return set(in_node_cgroups) | {pid for pid, argv in daemons.items() if _names_node(node, list(argv))}


def isolation_rules(plan: NodesPlan, node: NodePlan, kubelet_port: int) -> list[list[str]]:
    """The iptables rules (a chain, then the rule) that cut ``node``'s kubelet off from the API server,
    in the slot's namespace.

    The kubelet is the only process with its group id (:attr:`NodePlan.kubelet_group`, given by
    ``setpriv`` at its start), and an ``owner`` match sees the group of the socket's opener: what it
    sends to the API server is dropped, on connections open already too (a rule of the filter table
    sees every packet, not just a connection's first), while its pods' traffic (forwarded, never
    OUTPUT), kube-proxy's and the other kubelets' pass. What the API server sends to the kubelet's
    port (logs, exec) is dropped on the way in: the owner of an incoming packet is not known yet.
    DROP, not REJECT: a cable pulled answers nothing, and the kubelet finds out by its own timeouts."""
    comment = ["-m", "comment", "--comment", f"operator-suite: {node.name} isolated"]
    api = f"{plan.api_address}/32"
    return [
        ["OUTPUT", "-d", api, "-m", "owner", "--gid-owner", str(node.kubelet_group), *comment, "-j", "DROP"],
        ["INPUT", "-s", api, "-d", f"{node.address}/32", "-p", "tcp", "--dport", str(kubelet_port),
         *comment, "-j", "DROP"],
    ]  # fmt: skip


def drain_answer(node: str, returncode: int, stdout: str, stderr: str) -> Answer:
    """What ``kubectl drain`` did: drained or not, and what it said. A drain that began (the node is
    cordoned) and did not finish, because a PodDisruptionBudget held an eviction past the timeout or
    a pod could not be evicted, is an answer; one that could not begin (no such node, no API server)
    is a :class:`FaultError`."""
    output = (stdout + stderr).strip()
    if returncode == 0:
        return {"node": node, "drained": True, "output": output}
    if "cordoned" in stdout:
        return {"node": node, "drained": False, "output": output}
    raise FaultError(f"kubectl drain {node} failed (exit {returncode}): {stderr.strip() or stdout.strip()}")


_BARE_PODS = re.compile(r"declare no controller \(use --force to override\): ([^\n]+)")
_POD = re.compile(r"[\w.-]+/[\w.-]+")
"""namespace/name, as kubectl names a pod (what follows the list, ", continuing command...", is none)."""
_STORAGE_HELPER = re.compile(r"local-path-storage/helper-pod-[\w.-]+")


def held_by_storage_helpers_only(output: str) -> bool:
    """Whether a drain that did not finish was refused only for local-path-provisioner's helper pods:
    bare pods that make or remove one claim's directory and are gone within seconds (a claim deleted
    elsewhere in the cluster just then). kubectl refuses any bare pod before it evicts anything, so the
    drain is simply run again, as an administrator would, once they are gone."""
    pods = [pod for line in _BARE_PODS.findall(output) for pod in _POD.findall(line)]
    return bool(pods) and all(_STORAGE_HELPER.fullmatch(pod) for pod in pods)


def _timestamp(value: str) -> datetime.datetime:
    return datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))


def heartbeat(node: Mapping[str, Any]) -> datetime.datetime | None:
    """When the node's kubelet last said how it is (its Ready condition's heartbeat): only a kubelet
    writes it; the node lifecycle controller that marks a silent node Unknown keeps it."""
    for condition in (node.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready" and condition.get("lastHeartbeatTime"):
            return _timestamp(condition["lastHeartbeatTime"])
    return None


def ready_since(node: Mapping[str, Any], after: datetime.datetime | None = None) -> bool:
    """Whether the Node object says Ready, from a heartbeat later than ``after`` when given: a Node
    whose kubelet was just killed still says Ready, from before, until its grace runs out."""
    for condition in (node.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            beat = heartbeat(node)
            return condition.get("status") == "True" and (
                after is None or (beat is not None and beat > after)
            )
    return False


# ---------------------------------------------------------------- on the machine


def _answers(path: Path) -> bool:
    """Whether a unix socket is listened on (after a power cut the file is there, and nobody behind it)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
        try:
            client.connect(str(path))
        except OSError:
            return False
        return True


@dataclass(frozen=True)
class NodePower:
    """Faults of whole nodes of one running cluster of real nodes. ``kubectl`` is the kubectl command
    with the cluster's admin kubeconfig; ``start`` starts a daemon from its record (bound to the test
    that runs the cluster, or on its own for a sandbox)."""

    plan: NodesPlan
    kubectl: tuple[str, ...]
    start: Start

    def node(self, name: str) -> NodePlan:
        for node in self.plan.nodes:
            if node.name == name:
                return node
        names = ", ".join(node.name for node in self.plan.nodes)
        raise FaultError(f"{name} is not a node of this cluster ({names})")

    # -- power

    def _running(self, node: NodePlan) -> set[int]:
        daemons = host.command_lines(host.pids_in_cgroups(self.plan.daemons_cgroup))
        return power_cut_victims(node, daemons, host.pids_in_cgroups(node.daemon_cgroup, node.cgroup_root))

    def is_cut(self, name: str) -> bool:
        """Whether nothing of the node runs: its kubelet, containerd, shims or containers."""
        return not self._running(self.node(name))

    def power_cut(self, name: str) -> Answer:
        node = self.node(name)
        if not self._running(node):
            raise FaultError(f"{name} is cut already (none of its processes runs): reboot it")
        started = time.monotonic()
        killed = host.kill_frozen([node.daemon_cgroup, node.cgroup_root], lambda: self._running(node))
        # The kubelet's cgroups go with the power; its cgroupRoot stays, for the kubelet to start in.
        host.remove_cgroups(node.cgroup_root, keep_root=True)
        return {
            "node": name,
            "powered": False,
            "killed": killed,
            "took": round(time.monotonic() - started, 3),
        }

    def reboot(self, name: str, timeout: float = _READY_TIMEOUT) -> Answer:
        """Start the node's containerd and kubelet again, and wait for the Node to be Ready (not while
        it is isolated: it cannot be until it is reconnected)."""
        node = self.node(name)
        running = self._running(node)
        if running:
            raise FaultError(
                f"{name} is not cut: {len(running)} of its processes run (pids {sorted(running)[:5]}); "
                "power-cut it first"
            )
        records = recorded_daemons(self.plan)
        try:
            containerd, kubelet = records[f"containerd-{name}"], records[f"kubelet-{name}"]
        except KeyError:
            raise FaultError(
                f"{name}'s daemons are not recorded in {self.plan.directory}: a cluster started by an "
                "older test kit cannot be rebooted"
            ) from None
        before = self._heartbeat(name)
        started = time.monotonic()
        host.make_cgroups(node.cgroup_root)  # as at the first start, should anything have removed it
        process = self.start(containerd)
        self._until(f"{name}'s containerd to answer", containerd, process,
                    lambda: _answers(node.sockets / "containerd.sock"), _SOCKET_TIMEOUT)  # fmt: skip
        answered = time.monotonic() - started
        process = self.start(kubelet)
        answer: Answer = {"node": name, "powered": True, "containerd_answered": round(answered, 3)}
        if self.is_isolated(name):
            return {**answer, "ready": False, "isolated": True}
        starts = 1
        deadline = started + timeout
        while not self._ready(name, before):
            if process.poll() is not None:
                if not lost_device_plugin_race(kubelet) or starts >= KUBELET_STARTS:
                    raise FaultError(
                        f"{name}'s kubelet exited with code {process.returncode} after the reboot; "
                        f"last lines of {kubelet.log}:\n{log_tail(kubelet.log, 15)}"
                    )
                process, starts = self.start(kubelet), starts + 1
            if time.monotonic() > deadline:
                raise FaultError(
                    f"{name} was not Ready {timeout:.0f} s after its reboot; last lines of "
                    f"{kubelet.log}:\n{log_tail(kubelet.log, 15)}"
                )
            time.sleep(0.5)
        return {**answer, "ready": True, "ready_after": round(time.monotonic() - started, 3)}

    def _until(
        self, what: str, record: DaemonRecord, process: subprocess.Popen[bytes],
        ready: Callable[[], bool], timeout: float,
    ) -> None:  # fmt: skip
        deadline = time.monotonic() + timeout
        while not ready():
            if process.poll() is not None:
                raise FaultError(
                    f"{record.name} exited with code {process.returncode} while waiting for {what}; "
                    f"last lines of {record.log}:\n{log_tail(record.log, 15)}"
                )
            if time.monotonic() > deadline:
                raise FaultError(
                    f"waited {timeout:.0f} s for {what}; "
                    f"last lines of {record.log}:\n{log_tail(record.log, 15)}"
                )
            time.sleep(0.1)

    def _node_object(self, name: str) -> dict[str, Any] | None:
        done = self._kubectl("get", "node", name, "-o", "json", check=False)
        return json.loads(done.stdout) if done.returncode == 0 else None

    def _heartbeat(self, name: str) -> datetime.datetime | None:
        found = self._node_object(name)
        return heartbeat(found) if found is not None else None

    def _ready(self, name: str, after: datetime.datetime | None) -> bool:
        found = self._node_object(name)
        return found is not None and ready_since(found, after)

    # -- network

    def _isolation_rules(self, node: NodePlan) -> list[list[str]]:
        config = yaml.safe_load((node.directory / "kubelet.yaml").read_text())
        return isolation_rules(self.plan, node, int(config["port"]))

    def _iptables(self, *arguments: str) -> subprocess.CompletedProcess[str]:
        command = host.in_namespace(self.plan, "iptables", "-w", *arguments)
        return subprocess.run(command, capture_output=True, text=True, check=False, timeout=_KUBECTL_TIMEOUT)

    def is_isolated(self, name: str) -> bool:
        rules = self._isolation_rules(self.node(name))
        return all(self._iptables("-C", *rule).returncode == 0 for rule in rules)

    def isolate(self, name: str) -> Answer:
        for rule in self._isolation_rules(self.node(name)):
            if self._iptables("-C", *rule).returncode != 0:
                chain, *spec = rule
                done = self._iptables("-I", chain, "1", *spec)
                if done.returncode != 0:
                    raise FaultError(f"iptables -I {' '.join(rule)} for {name}: {done.stderr.strip()}")
        return {"node": name, "isolated": True}

    def reconnect(self, name: str) -> Answer:
        for rule in self._isolation_rules(self.node(name)):
            while self._iptables("-C", *rule).returncode == 0:
                self._iptables("-D", *rule)
        return {"node": name, "isolated": False}

    # -- the administrator

    def _kubectl(
        self, *arguments: str, check: bool = True, timeout: float = _KUBECTL_TIMEOUT
    ) -> subprocess.CompletedProcess[str]:
        try:
            done = subprocess.run(
                [*self.kubectl, *arguments], capture_output=True, text=True, check=False, timeout=timeout
            )
        except subprocess.TimeoutExpired:
            raise FaultError(f"kubectl {' '.join(arguments)} did not end in {timeout:.0f} s") from None
        if check and done.returncode != 0:
            raise FaultError(f"kubectl {' '.join(arguments)} failed: {done.stderr.strip()}")
        return done

    def drain(self, name: str, timeout: float = 60.0, *, force: bool = False) -> Answer:
        """Cordon the node and evict its pods (not DaemonSets', emptyDir data lost), for ``timeout``
        seconds at most; ``force`` also deletes pods no controller makes again."""
        self.node(name)
        started = time.monotonic()
        while True:
            left = max(1.0, timeout - (time.monotonic() - started))
            arguments = [
                "drain",
                name,
                "--ignore-daemonsets",
                "--delete-emptydir-data",
                f"--timeout={left:.0f}s",
            ]
            done = self._kubectl(
                *arguments, *(["--force"] if force else []), check=False, timeout=left + _KUBECTL_TIMEOUT
            )
            answer = drain_answer(name, done.returncode, done.stdout, done.stderr)
            final = answer["drained"] or not held_by_storage_helpers_only(answer["output"])
            if final or time.monotonic() - started + _HELPER_WAIT_SECONDS >= timeout:
                return {**answer, "took": round(time.monotonic() - started, 3)}
            time.sleep(_HELPER_WAIT_SECONDS)

    def uncordon(self, name: str) -> Answer:
        self.node(name)
        self._kubectl("uncordon", name)
        return {"node": name, "cordoned": False}
