"""A local cluster of real nodes: a control plane, and on each node a real containerd and kubelet,
with one kube-proxy and CoreDNS for the cluster, all in one slot of this machine (:mod:`.plan`).

:class:`LocalCluster` starts everything in order and stops it leaving nothing behind: its processes,
shims and containers all live in the slot's cgroups, which are killed as one; every mount is inside
its directory and unmounted; its network namespace and link are deleted; the machine's settings are
put back when no other slot is held (:mod:`.host`).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from operator_core.kube import Kube
from operator_testkit.binaries import ensure_binaries, say
from operator_testkit.controlplane import ControlPlane, ControlPlaneState, free_port, stop_recorded
from operator_testkit.errors import ControlPlaneError
from operator_testkit.nodes import host
from operator_testkit.nodes.configs import (
    cni_conflist,
    containerd_blobs,
    containerd_config,
    kube_proxy_config,
    kubelet_config,
    resolv_conf,
)
from operator_testkit.nodes.daemons import (
    KUBELET_STARTS,
    DaemonRecord,
    lost_device_plugin_race,
    start_daemon,
)
from operator_testkit.nodes.dns import coredns_manifests
from operator_testkit.nodes.faults import NodeFaults
from operator_testkit.nodes.images import ImageStore, NodeImage, base_node_images, load_images
from operator_testkit.nodes.plan import NodePlan, NodesPlan, nodes_plan
from operator_testkit.nodes.power import Answer, NodePower
from operator_testkit.nodes.storage import NAMESPACE as STORAGE_NAMESPACE
from operator_testkit.nodes.storage import storage_manifests
from operator_testkit.nodes.tools import NodeTools, ensure_node_tools
from operator_testkit.pki import issue_client_certificate
from operator_testkit.servers import log_tail

__all__ = ["LocalCluster", "recorded_faults", "recorded_power", "stop_recorded_cluster"]

_READY_TIMEOUT = 120.0
_STOP_GRACE = 10.0
NO_REGISTRY = "http://127.0.0.1:9"
"""Where the nodes' containerd sends every pull: the discard port of the nodes' own loopback."""
RECORD = "cluster.json"
"""In a cluster's directory while it runs: its slot and size, so :func:`stop_recorded_cluster` can
stop it from another process (a sandbox's ``down``)."""


@dataclass
class _Daemon:
    record: DaemonRecord
    process: subprocess.Popen[bytes]
    starts: int = 1

    @property
    def name(self) -> str:
        return self.record.name

    @property
    def log(self) -> Path:
        return self.record.log


@dataclass
class LocalCluster:
    """``count`` real nodes and their control plane under ``directory``.

    ``bound`` makes every process die with this one (tests); the sandbox's are not bound.
    ``extra_images`` are loaded into every node besides pause, CoreDNS and busybox.
    ``plane_class`` makes the control plane (a benchmark's raises its controllers' client limits), with
    ``disabled_controllers`` off in its controller manager.
    """

    directory: Path
    count: int = 3
    bound: bool = True
    extra_images: list[NodeImage] = field(default_factory=list)
    plane_class: type[ControlPlane] = ControlPlane
    disabled_controllers: tuple[str, ...] = ()
    control_plane: ControlPlane | None = None
    plan: NodesPlan | None = None
    tools: NodeTools | None = None
    _slot: host.Slot | None = None
    _daemons: list[_Daemon] = field(default_factory=list)

    # -- lifecycle

    def __enter__(self) -> LocalCluster:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        """Everything, in order; on a failure, whatever started is stopped and the error says which step."""
        self.directory = self.directory.resolve()
        self.directory.mkdir(parents=True, exist_ok=True)
        self.tools = ensure_node_tools()
        images = [*base_node_images(self.tools), *self.extra_images]
        self._slot = host.acquire_slot(self.directory)
        try:
            # Inside the try: a plan refused (a directory too long) still gives the slot back.
            self.plan = nodes_plan(self._slot.index, self.count, self.directory / "slot")
            record = {"slot": self._slot.index, "count": self.count}
            (self.directory / RECORD).write_text(json.dumps(record))
            started = time.monotonic()
            host.create_network(self.plan)
            host.make_cgroups(self.plan.daemons_cgroup)
            self.control_plane = self.plane_class(
                self.directory / "controlplane",
                bind_to_parent=self.bound,
                service_cidr=str(self.plan.service_range),
                bind_address=str(self.plan.api_address),
                disabled_controllers=self.disabled_controllers,
            )
            self.control_plane.start()
            (self.plan.directory / "resolv.conf").write_text(resolv_conf(self.plan))
            for node in self.plan.nodes:
                self._start_containerd(node)
            for node in self.plan.nodes:
                self._wait_for_socket(node)
            load_images(self._image_stores(), images)
            for node in self.plan.nodes:
                self._start_kubelet(node)
            self._start_kube_proxy()
            self._wait_for_nodes()
            self._start_addons()
            self._start_resizer()
            took = time.monotonic() - started
            say(f"{self.count} real nodes Ready in {took:.0f} s (slot {self.plan.slot})", "nodes")
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Stop everything and give the slot back; safe to call twice, and after a failed start."""
        for daemon in reversed(self._daemons):
            if daemon.process.poll() is None:
                daemon.process.terminate()
        for daemon in self._daemons:
            with contextlib.suppress(subprocess.TimeoutExpired):
                daemon.process.wait(timeout=_STOP_GRACE)
        if self.plan is not None:
            host.kill_cgroup_tree(self.plan.cgroup)
        for daemon in self._daemons:
            with contextlib.suppress(ProcessLookupError, OSError):
                daemon.process.kill()
            daemon.process.wait()
        self._daemons.clear()
        if self.control_plane is not None:
            self.control_plane.stop()
        if self.plan is not None:
            host.take_down(self.plan)
        if self._slot is not None:
            host.give_back_slot(self._slot)
            self._slot = None
        (self.directory / RECORD).unlink(missing_ok=True)

    def detach(self) -> None:
        """Leave the cluster running when this process ends (it must not be ``bound``); its daemons
        keep the slot's lock, and :func:`stop_recorded_cluster` stops it from any process."""
        assert not self.bound, "a bound cluster dies with this process"
        self._daemons.clear()
        if self._slot is not None:
            self._slot.release()  # this process's copy of the lock; the daemons hold theirs
            self._slot = None

    # -- what tests use

    @property
    def kubeconfig(self) -> Path:
        assert self.control_plane is not None
        return self.control_plane.kubeconfig

    def load(self, images: list[NodeImage]) -> None:
        """Load more images into every node (the suite's own, built from the checkout, say)."""
        assert self.plan is not None
        load_images(self._image_stores(), images)

    def faults(self, kube: Kube) -> NodeFaults:
        """Faults on demand on these nodes, through ``kube`` (an admin client of their control plane)."""
        assert self.plan is not None
        nodes = {node.name: node for node in self.plan.nodes}
        return NodeFaults(kube, lambda name: self._ctr(nodes[name]), tuple(nodes))

    # -- faults of whole nodes (:mod:`.power`): blocking, for a thread of an async test

    def power(self) -> NodePower:
        """Power cuts, reboots, isolation and drains of these nodes."""
        assert self.plan is not None
        assert self.control_plane is not None
        kubectl = (str(self.control_plane.binaries.kubectl), f"--kubeconfig={self.kubeconfig}")
        return NodePower(self.plan, kubectl, self._start_again)

    def power_cut(self, node: str) -> Answer:
        """SIGKILL the node's kubelet, containerd, shims and containers at once; the Node object is
        left to the node lifecycle controller (NotReady after its grace)."""
        answer = self.power().power_cut(node)
        for daemon in self._daemons:
            daemon.process.poll()  # reap the killed daemons
        return answer

    def reboot(self, node: str, timeout: float = _READY_TIMEOUT) -> Answer:
        """Start a cut node's containerd and kubelet as first started, and wait until it is Ready."""
        return self.power().reboot(node, timeout)

    def reboot_if_cut(self, node: str) -> Answer | None:
        """:meth:`reboot` a node still cut; one started again already (by a test, or an earlier try that
        got that far) is left as it is (None)."""
        return self.reboot(node) if self.power().is_cut(node) else None

    def isolate(self, node: str) -> Answer:
        """Cut the node's kubelet off from the API server; its containers keep running."""
        return self.power().isolate(node)

    def reconnect(self, node: str) -> Answer:
        return self.power().reconnect(node)

    def drain(self, node: str, timeout: float = 60.0, *, force: bool = False) -> Answer:
        """``kubectl drain``: whether it finished within ``timeout`` seconds, and what it said."""
        return self.power().drain(node, timeout, force=force)

    def uncordon(self, node: str) -> Answer:
        return self.power().uncordon(node)

    def in_namespace(self, *argv: str) -> list[str]:
        """``argv`` run in the nodes' network namespace (what a process on a node sees)."""
        assert self.plan is not None
        return host.in_namespace(self.plan, *argv)

    def ctr(self, node: str, *arguments: str) -> str:
        """``ctr`` against ``node``'s containerd (namespace k8s.io); its output."""
        assert self.plan is not None
        (plan,) = [n for n in self.plan.nodes if n.name == node]
        done = subprocess.run([*self._ctr(plan), "--namespace", "k8s.io", *arguments],
                              capture_output=True, text=True, check=True, timeout=60)  # fmt: skip
        return done.stdout

    # -- daemons

    def _record(
        self, name: str, argv: list[str], env: dict[str, str] | None = None, cgroup: str | None = None
    ) -> DaemonRecord:
        """How a daemon is started: ``env`` None is this process's environment, ``cgroup`` None the
        slot's daemons' (a node's own are :attr:`NodePlan.daemon_cgroup`)."""
        assert self.plan is not None
        return DaemonRecord(
            name,
            tuple(argv),
            dict(os.environ) if env is None else env,
            cgroup or self.plan.daemons_cgroup,
            self.plan.directory / "logs" / f"{name}.log",
        )

    def _spawn(self, record: DaemonRecord) -> _Daemon:
        assert self.plan is not None
        assert self._slot is not None
        process = start_daemon(self.plan, record, bound=self.bound, lock=self._slot.descriptor)
        daemon = _Daemon(record, process)
        self._daemons.append(daemon)
        return daemon

    def _start_again(self, record: DaemonRecord) -> subprocess.Popen[bytes]:
        """A daemon of a rebooted node, in the place of the one the power cut killed."""
        for daemon in [d for d in self._daemons if d.name == record.name]:
            if daemon.process.poll() is not None:
                self._daemons.remove(daemon)
        return self._spawn(record).process

    def _started_again(self, daemon: _Daemon) -> bool:
        """Start again a kubelet that exited because it lost the device-plugin socket's race
        (:data:`.daemons.DEVICE_PLUGIN_RACE`), up to :data:`KUBELET_STARTS` times; False for any
        other exit."""
        if daemon.starts >= KUBELET_STARTS or not lost_device_plugin_race(daemon.record):
            return False
        self._daemons.remove(daemon)
        self._spawn(daemon.record).starts = daemon.starts + 1
        return True

    def _ctr(self, node: NodePlan) -> list[str]:
        assert self.tools is not None
        return [str(self.tools.path("ctr")), "--address", str(node.sockets / "containerd.sock")]

    def _image_stores(self) -> list[ImageStore]:
        assert self.plan is not None
        return [ImageStore(self._ctr(node), containerd_blobs(node)) for node in self.plan.nodes]

    def _start_containerd(self, node: NodePlan) -> None:
        assert self.tools is not None
        config = node.directory / "containerd.toml"
        node.directory.mkdir(parents=True, exist_ok=True)
        node.sockets.mkdir(parents=True, exist_ok=True)
        config.write_text(containerd_config(node))
        cni = node.directory / "cni" / "net.d"
        cni.mkdir(parents=True, exist_ok=True)
        (cni / "10-operator-suite.conflist").write_text(json.dumps(cni_conflist(node), indent=2))
        env = {
            **os.environ,
            # An image a pod asks for that no node has is never pulled from anywhere: every registry is
            # reached through a proxy that is not there (the namespace's own loopback), so a pull fails
            # at once, with no name looked up and no packet sent off the machine.
            "HTTPS_PROXY": NO_REGISTRY,
            "HTTP_PROXY": NO_REGISTRY,
            "NO_PROXY": "",
            "PATH": f"{self.tools.bin}:{os.environ.get('PATH', '/usr/sbin:/usr/bin:/sbin:/bin')}",
        }
        argv = [str(self.tools.path("containerd")), "--config", str(config)]
        self._spawn(self._record(f"containerd-{node.name}", argv, env, node.daemon_cgroup))

    def _wait_for_socket(self, node: NodePlan) -> None:
        (daemon,) = [d for d in self._daemons if d.name == f"containerd-{node.name}"]
        socket = node.sockets / "containerd.sock"
        self._until(f"containerd of {node.name}", daemon, socket.exists, 30.0)

    def _kubeconfig(self, name: str, user: str, groups: tuple[str, ...]) -> Path:
        assert self.control_plane is not None
        assert self.control_plane.pki is not None
        assert self.plan is not None
        certificate, key = issue_client_certificate(
            self.control_plane.pki, self.plan.directory / "pki", user, groups
        )
        text = self.control_plane.kubeconfig_text({
            "client-certificate-data": base64.b64encode(certificate.read_bytes()).decode(),
            "client-key-data": base64.b64encode(key.read_bytes()).decode(),
        })  # fmt: skip
        path = self.plan.directory / f"{name}.kubeconfig"
        path.write_text(text)
        path.chmod(0o600)
        return path

    def _start_kubelet(self, node: NodePlan) -> None:
        host.share_directory(node.directory / "storage")
        assert self.tools is not None
        assert self.plan is not None
        assert self.control_plane is not None
        assert self.control_plane.pki is not None
        host.make_cgroups(node.cgroup_root)
        kubeconfig = self._kubeconfig(node.name, f"system:node:{node.name}", ("system:nodes",))
        config = node.directory / "kubelet.yaml"
        document = kubelet_config(node, self.plan, port=free_port(), ca_file=self.control_plane.pki.ca_cert)
        config.write_text(yaml.safe_dump(document, sort_keys=False))
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            raise ControlPlaneError("setpriv is missing: apt-get install util-linux")
        argv = [
            # Root with all its capabilities still, but a group of its own: what its sockets send can
            # be told from every other process's in the namespace, to isolate it (:mod:`.power`).
            setpriv, f"--regid={node.kubelet_group}", "--clear-groups", "--",
            str(self.tools.path("kubelet")),
            f"--config={config}",
            f"--kubeconfig={kubeconfig}",
            f"--hostname-override={node.name}",
            f"--node-ip={node.address}",
            f"--root-dir={node.directory / 'kubelet'}",
            f"--cert-dir={node.directory / 'kubelet-pki'}",
            f"--node-labels=topology.kubernetes.io/zone={node.zone}",
        ]  # fmt: skip
        self._spawn(self._record(f"kubelet-{node.name}", argv, None, node.daemon_cgroup))

    def _start_kube_proxy(self) -> None:
        assert self.tools is not None
        assert self.plan is not None
        kubeconfig = self._kubeconfig("kube-proxy", "system:kube-proxy", ())
        config = self.plan.directory / "kube-proxy.yaml"
        document = kube_proxy_config(
            self.plan, kubeconfig=kubeconfig, metrics_port=free_port(), healthz_port=free_port()
        )
        config.write_text(yaml.safe_dump(document, sort_keys=False))
        self._spawn(self._record("kube-proxy", [str(self.tools.path("kube-proxy")), f"--config={config}"]))

    def _start_addons(self) -> None:
        """CoreDNS and the volume provisioner, applied together and waited for together."""
        assert self.plan is not None
        assert self.control_plane is not None
        path = self.plan.directory / "addons.yaml"
        path.write_text(yaml.safe_dump_all([*coredns_manifests(self.plan), *storage_manifests(self.plan)]))
        self.control_plane.kubectl("apply", "--server-side", "-f", str(path))
        for namespace, deployment in (
            ("kube-system", "coredns"),
            (STORAGE_NAMESPACE, "local-path-provisioner"),
        ):
            self.control_plane.kubectl(
                "-n",
                namespace,
                "rollout",
                "status",
                f"deployment/{deployment}",
                f"--timeout={_READY_TIMEOUT:.0f}s",
            )

    def _start_resizer(self) -> None:
        """The size-limited volumes grown when their claims ask for more (:mod:`.resizer`)."""
        assert self.control_plane is not None
        argv = [sys.executable, "-m", "operator_testkit.nodes.resizer", str(self.control_plane.kubeconfig)]
        self._spawn(self._record("resizer", argv))

    # -- waiting

    def _until(self, what: str, daemon: _Daemon, ready: Callable[[], bool], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if daemon.process.poll() is not None:
                raise ControlPlaneError(
                    f"{daemon.name} exited with code {daemon.process.returncode} while starting; "
                    f"last lines of {daemon.log}:\n{log_tail(daemon.log)}"
                )
            if ready():
                return
            time.sleep(0.1)
        raise ControlPlaneError(
            f"{what} was not ready in {timeout:.0f} s; last lines of {daemon.log}:\n{log_tail(daemon.log)}"
        )

    def _wait_for_nodes(self) -> None:
        assert self.control_plane is not None
        assert self.plan is not None
        names = {node.name for node in self.plan.nodes}
        deadline = time.monotonic() + _READY_TIMEOUT
        ready: set[str] = set()
        while time.monotonic() < deadline:
            for daemon in list(self._daemons):
                if daemon.process.poll() is not None and not self._started_again(daemon):
                    raise ControlPlaneError(
                        f"{daemon.name} exited with code {daemon.process.returncode}; "
                        f"last lines of {daemon.log}:\n{log_tail(daemon.log)}"
                    )
            listed: dict[str, Any] = json.loads(self.control_plane.kubectl("get", "nodes", "-o", "json"))
            ready = {
                item["metadata"]["name"]
                for item in listed["items"]
                if any(
                    c["type"] == "Ready" and c["status"] == "True"
                    for c in item["status"].get("conditions", [])
                )
            }
            if names <= ready:
                return
            time.sleep(0.3)
        kubelets = [
            d
            for d in self._daemons
            if d.name.startswith("kubelet-") and d.name.removeprefix("kubelet-") not in ready
        ]
        tails = "\n".join(f"--- {d.log}\n{log_tail(d.log, 15)}" for d in kubelets)
        raise ControlPlaneError(
            f"nodes {sorted(names - ready)} were not Ready in {_READY_TIMEOUT:.0f} s:\n{tails}"
        )


def stop_recorded_cluster(directory: Path) -> bool:
    """Stop the detached cluster recorded in ``directory`` (:meth:`LocalCluster.detach`), leaving
    nothing behind; False if none is recorded there."""
    directory = directory.resolve()
    path = directory / RECORD
    if not path.exists():
        return False
    record = json.loads(path.read_text())
    plan = nodes_plan(record["slot"], record["count"], directory / "slot")
    slot = host.take_recorded_slot(plan.slot, directory, plan.cgroup)
    plane = directory / "controlplane"
    if (plane / "state.json").exists():
        stop_recorded(ControlPlaneState.load(plane).components)
        (plane / "state.json").unlink()
    if slot is None:
        # Another cluster holds the slot now: its link and namespace are not this one's to delete.
        host.unmount_under(plan.directory)
        host.forget_nodes(plan)
    else:
        host.take_down(plan)
        host.give_back_slot(slot)
    path.unlink()
    return True


def _recorded_plan(directory: Path) -> NodesPlan:
    """The plan of the running cluster recorded in ``directory``; ControlPlaneError if none runs."""
    path = directory / RECORD
    if not path.exists():
        raise ControlPlaneError(f"no cluster of real nodes is recorded in {directory} ({RECORD})")
    record = json.loads(path.read_text())
    return nodes_plan(record["slot"], record["count"], directory / "slot")


def recorded_faults(directory: Path, kube: Kube) -> NodeFaults:
    """Faults on the running cluster recorded in ``directory`` (a sandbox's, from a shell), through
    ``kube``, an admin client of its control plane. Raises :class:`ControlPlaneError` if none runs."""
    plan = _recorded_plan(directory.resolve())
    ctr = ensure_node_tools().path("ctr")
    sockets = {node.name: node.sockets / "containerd.sock" for node in plan.nodes}
    return NodeFaults(kube, lambda name: [str(ctr), "--address", str(sockets[name])], tuple(sockets))


def recorded_power(directory: Path) -> NodePower:
    """Faults of whole nodes of the running cluster recorded in ``directory`` (a sandbox's, from a
    shell). A rebooted node's daemons are not bound to this process, and hold the slot's lock as the
    others do (a copy of a running daemon's). Raises :class:`ControlPlaneError` if none runs."""
    directory = directory.resolve()
    plan = _recorded_plan(directory)
    kubectl = (str(ensure_binaries().kubectl), f"--kubeconfig={directory / 'controlplane' / 'kubeconfig'}")

    def start(record: DaemonRecord) -> subprocess.Popen[bytes]:
        lock = host.borrow_slot_lock(plan.slot, host.pids_in_cgroups(plan.daemons_cgroup))
        try:
            return start_daemon(plan, record, bound=False, lock=lock)
        finally:
            if lock is not None:
                os.close(lock)

    return NodePower(plan, kubectl, start)
