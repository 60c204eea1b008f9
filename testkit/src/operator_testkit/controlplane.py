"""A real, local Kubernetes control plane: etcd, kube-apiserver, kube-controller-manager, kube-scheduler.

Started the way controller-runtime's envtest starts one for Go operators, plus
the controller manager and scheduler, so garbage collection, workload
controllers, service-account tokens and scheduling are all real. Every
component listens on a free loopback port, so several control planes can run
side by side (later tests use a second one as a "workload cluster").

The API server runs with RBAC (and Node) authorization and a service-account
issuer, so TokenRequest works and a test can act as a ServiceAccount instead
of as admin.

Teardown leaves no process behind: each component runs in its own process
group, is stopped with SIGTERM then SIGKILL, and, when bound to its parent
(the default in tests), is killed by the kernel if the parent dies first.
A detached control plane (``operator-suite-dev controlplane up``) records its
processes in ``state.json`` so ``down`` can stop them later.
"""

from __future__ import annotations

import base64
import contextlib
import ipaddress
import json
import os
import random
import signal
import socket
import ssl
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Self

import httpx
import yaml

from operator_core.settings import from_env
from operator_testkit.binaries import Binaries, ensure_binaries
from operator_testkit.errors import ControlPlaneError
from operator_testkit.pki import Pki, create_pki, issue_client_certificate
from operator_testkit.servers import spawn
from operator_testkit.settings import ControlPlaneSettings

__all__ = [
    "DEFAULT_SERVICE_CIDR",
    "ControlPlane",
    "ControlPlaneState",
    "free_port",
    "running_components",
    "stop_recorded",
]

# Services get loopback ClusterIPs, so nothing on this machine ever sends traffic to a
# private or public address because of a Service; the API server accepts a 127/8 range.
# Give a second, concurrent control plane another range if both have service proxies.
DEFAULT_SERVICE_CIDR = "127.100.0.0/16"

UNUSED_BY_THE_TESTS = (
    # Quotas: its monitor watches every resource the API serves (every CRD too) for nothing here.
    "resourcequota-controller",
    "horizontal-pod-autoscaler-controller",
    "replicationcontroller-controller",
    "endpointslice-mirroring-controller",
    "ttl-controller",
    "clusterrole-aggregation-controller",
    "certificatesigningrequest-approving-controller",
    "certificatesigningrequest-cleaner-controller",
    "certificatesigningrequest-signing-controller",
    "podcertificaterequest-cleaner-controller",
    "kube-apiserver-serving-clustertrustbundle-publisher-controller",
    "legacy-serviceaccount-token-cleaner-controller",
    "storage-version-migrator-controller",
    "storageversion-garbage-collector-controller",
    "validatingadmissionpolicy-status-controller",
    "resourceclaim-controller",
    "device-taint-eviction-controller",
    "volumeattributesclass-protection-controller",
)
"""kube-controller-manager's controllers that no test (and nothing the operators make) relies on: each
one off is watches and periodic work the API server of every worker's control planes is spared. The
sandbox keeps them all, as a user's cluster has them."""
_STOP_GRACE_SECONDS = 10.0
LEASE_RENEW_DEADLINE_SECONDS = 10.0
"""Leader election's default renew deadline: a control-plane component that cannot renew its lease
for this long gives up and exits (its kubelet starts it again)."""


# Below Linux's ephemeral range (32768-60999 by default): the kernel never gives these ports to outgoing
# connections, so a port found free here stays free until the component binds it. A port the kernel
# picked (bind to 0) could be handed to any client connection in between; that once made etcd fail
# with "address already in use" while other tests ran.
_PORT_RANGE = (20000, 32000)
_PORT_TRIES = 200


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now, outside the kernel's ephemeral range."""
    picker = random.SystemRandom()
    for _ in range(_PORT_TRIES):
        port = picker.randint(*_PORT_RANGE)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
        return port
    raise ControlPlaneError(f"no free port in {_PORT_RANGE[0]}-{_PORT_RANGE[1]} after {_PORT_TRIES} tries")


def _base64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


@dataclass
class _Component:
    name: str
    pid: int
    log: str


@dataclass
class ControlPlaneState:
    """What ``state.json`` records, so another process can find and stop a detached control plane."""

    directory: str
    api_url: str
    etcd_url: str
    kubeconfig: str
    components: list[_Component] = field(default_factory=list)

    def save(self) -> None:
        Path(self.directory, "state.json").write_text(json.dumps(asdict(self), indent=2))

    @classmethod
    def load(cls, directory: Path) -> ControlPlaneState:
        raw = json.loads((directory / "state.json").read_text())
        raw["components"] = [_Component(**c) for c in raw.get("components", [])]
        return cls(**raw)


def _is_alive(pid: int, name: str) -> bool:
    """Whether ``pid`` is still the process we started (not a recycled pid)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return name.encode() in cmdline.split(b"\0", 1)[0]


def _signal_group(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, sig)


def running_components(state: ControlPlaneState) -> list[_Component]:
    """The recorded components that are still running."""
    return [c for c in state.components if _is_alive(c.pid, c.name)]


def stop_recorded(components: list[_Component], grace: float = _STOP_GRACE_SECONDS) -> None:
    """Stop components one by one, newest first: SIGTERM the group, wait, then SIGKILL what is left.

    One at a time, because the API server shuts down slowly when etcd is already gone.
    """
    for component in reversed(components):
        if _is_alive(component.pid, component.name):
            _signal_group(component.pid, signal.SIGTERM)
            deadline = time.monotonic() + grace
            while _is_alive(component.pid, component.name) and time.monotonic() < deadline:
                _reap(component.pid)
                time.sleep(0.05)
        _signal_group(component.pid, signal.SIGKILL)  # the component, if still there, and anything it left
        _reap(component.pid)


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


class ControlPlane:
    """One local control plane in its own directory. Use as a context manager, or start()/stop()."""

    def __init__(
        self,
        directory: Path,
        *,
        binaries: Binaries | None = None,
        settings: ControlPlaneSettings | None = None,
        bind_to_parent: bool = True,
        service_cidr: str = DEFAULT_SERVICE_CIDR,
        disabled_controllers: tuple[str, ...] = (),
        bind_address: str = "127.0.0.1",
    ) -> None:
        """``bind_address`` is where the API server listens: loopback, or, for real nodes, the machine's
        end of their link, which their pods reach too (:mod:`operator_testkit.nodes`)."""
        self.directory = directory.resolve()
        self.settings = settings or from_env(ControlPlaneSettings)
        self._binaries = binaries
        self.bind_to_parent = bind_to_parent
        self.service_cidr = ipaddress.ip_network(service_cidr)
        self.disabled_controllers = disabled_controllers
        self.bind_address = bind_address
        self._processes: list[subprocess.Popen[bytes]] = []
        self._components: list[_Component] = []
        self.pki: Pki | None = None
        self.etcd_url = ""
        self.api_url = ""

    # -- paths

    @property
    def binaries(self) -> Binaries:
        if self._binaries is None:
            self._binaries = ensure_binaries(self.settings)
        return self._binaries

    @property
    def kubeconfig(self) -> Path:
        return self.directory / "kubeconfig"

    @property
    def log_dir(self) -> Path:
        return self.directory / "logs"

    @property
    def audit_log(self) -> Path:
        """Every request the API server handled, one JSON audit event per line (level Metadata)."""
        return self.log_dir / "audit.log"

    def audit_events(self) -> list[dict[str, Any]]:
        """The audit log's events so far: who did what to which object, with the response code.

        Tests use it to count the requests that really reached the API server, for
        example to prove that a steady-state reconcile writes nothing.
        """
        if not self.audit_log.exists():
            return []
        text = self.audit_log.read_text(errors="replace")
        # The API server may be writing the last line: only whole lines are events.
        lines = text[: text.rfind("\n") + 1].splitlines()
        return [json.loads(line) for line in lines if line.strip()]

    def _write_audit_policy(self) -> Path:
        policy = {
            "apiVersion": "audit.k8s.io/v1",
            "kind": "Policy",
            "omitStages": ["RequestReceived"],
            "rules": [{"level": "Metadata"}],
        }
        path = self.directory / "audit-policy.yaml"
        path.write_text(yaml.safe_dump(policy))
        return path

    # -- lifecycle

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        """Start every component and wait until each is ready; on failure, stop what started."""
        binaries = self.binaries
        self.directory.mkdir(parents=True, exist_ok=True)
        self.log_dir.mkdir(exist_ok=True)
        try:
            self.pki = create_pki(
                self.directory / "pki", service_ip=str(self.service_cidr[1]), addresses=(self.bind_address,)
            )
            deadline = time.monotonic() + self.settings.start_timeout
            self._start_etcd(binaries, deadline)
            self._start_apiserver(binaries, deadline)
            self._write_kubeconfig()
            self._start_controller_manager(binaries, deadline)
            self._start_scheduler(binaries, deadline)
            self._wait_for_default_service_account(deadline)
        except BaseException:
            self.stop()
            raise
        self.state().save()

    def stop(self) -> None:
        """Stop every component, newest first; leaves no process behind."""
        stop_recorded(self._components)
        for process in self._processes:
            try:
                process.wait(timeout=1)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self._processes.clear()
        self._components.clear()

    def restart_apiserver(self, down_seconds: float = 5.0) -> None:
        """Stop the kube-apiserver, leave it down ``down_seconds``, and start it again at the same address
        (etcd keeps every object): an API server outage, as an upgrade or a crash makes one.

        An outage of :data:`LEASE_RENEW_DEADLINE_SECONDS` or more also restarts kube-scheduler and
        kube-controller-manager, as it does in a cluster that runs them with leader election (kubeadm's
        default): each exits when it cannot renew its lease in time, and its kubelet starts it again
        with fresh caches. Left running across such an outage, kube-scheduler 1.35 was seen to keep
        new pods Pending for minutes ("Scheduler cache is corrupted", no binding ever sent).
        """
        stopped = time.monotonic()
        self._stop_component("kube-apiserver")
        time.sleep(down_seconds)
        port = int(self.api_url.rsplit(":", 1)[1])
        self._start_apiserver(self.binaries, time.monotonic() + self.settings.start_timeout, port=port)
        if time.monotonic() - stopped >= LEASE_RENEW_DEADLINE_SECONDS:
            deadline = time.monotonic() + self.settings.start_timeout
            for name, start in (
                ("kube-controller-manager", self._start_controller_manager),
                ("kube-scheduler", self._start_scheduler),
            ):
                self._stop_component(name)
                start(self.binaries, deadline)
        self.state().save()

    def _stop_component(self, name: str) -> None:
        (component,) = [c for c in self._components if c.name == name]
        (process,) = [p for p in self._processes if p.pid == component.pid]
        self._components.remove(component)
        self._processes.remove(process)
        process.terminate()
        try:
            process.wait(timeout=_STOP_GRACE_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def state(self) -> ControlPlaneState:
        return ControlPlaneState(
            directory=str(self.directory),
            api_url=self.api_url,
            etcd_url=self.etcd_url,
            kubeconfig=str(self.kubeconfig),
            components=list(self._components),
        )

    # -- components

    def _spawn(self, name: str, argv: list[str]) -> subprocess.Popen[bytes]:
        log_path = self.log_dir / f"{name}.log"
        # Bound to this process from a thread that lasts: restart_apiserver runs on passing threads.
        process = spawn(argv, log_path, bound=self.bind_to_parent, cwd=self.directory)
        self._processes.append(process)
        self._components.append(_Component(name=Path(argv[0]).name, pid=process.pid, log=str(log_path)))
        return process

    def _wait(
        self, name: str, process: subprocess.Popen[bytes], ready: Callable[[], bool], deadline: float
    ) -> None:
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise ControlPlaneError(
                    f"{name} exited with code {process.returncode} while starting; "
                    f"last lines of {self.log_dir / (name + '.log')}:\n{self._log_tail(name)}"
                )
            try:
                if ready():
                    return
            except (httpx.HTTPError, OSError):
                pass
            time.sleep(0.2)
        raise ControlPlaneError(f"{name} was not ready in time; last log lines:\n{self._log_tail(name)}")

    def _log_tail(self, name: str, lines: int = 20) -> str:
        path = self.log_dir / f"{name}.log"
        if not path.exists():
            return "(no log)"
        return "".join(path.read_text(errors="replace").splitlines(keepends=True)[-lines:])

    def _start_etcd(self, binaries: Binaries, deadline: float) -> None:
        client_port, peer_port = free_port(), free_port()
        self.etcd_url = f"http://127.0.0.1:{client_port}"
        process = self._spawn(
            "etcd",
            [
                str(binaries.etcd),
                "--name=local",
                f"--data-dir={self.directory / 'etcd-data'}",
                f"--listen-client-urls={self.etcd_url}",
                f"--advertise-client-urls={self.etcd_url}",
                f"--listen-peer-urls=http://127.0.0.1:{peer_port}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}",
                f"--initial-cluster=local=http://127.0.0.1:{peer_port}",
                # A test cluster's data need not survive a power cut; fsync would dominate start-up.
                "--unsafe-no-fsync",
                "--log-level=warn",
            ],
        )

        def healthy() -> bool:
            answer = httpx.get(f"{self.etcd_url}/health", timeout=2)
            return answer.status_code == 200 and answer.json().get("health") == "true"

        self._wait("etcd", process, healthy, deadline)

    def _admin_ssl(self) -> ssl.SSLContext:
        assert self.pki is not None
        context = ssl.create_default_context(cafile=str(self.pki.ca_cert))
        context.load_cert_chain(str(self.pki.admin_cert), str(self.pki.admin_key))
        return context

    def _start_apiserver(self, binaries: Binaries, deadline: float, port: int | None = None) -> None:
        assert self.pki is not None
        port = port or free_port()
        self.api_url = f"https://{self.bind_address}:{port}"
        kubelet_cert, kubelet_key = issue_client_certificate(
            self.pki, self.directory / "pki", "kube-apiserver-kubelet-client", ("system:masters",)
        )
        process = self._spawn(
            "kube-apiserver",
            [
                str(binaries.kube_apiserver),
                f"--etcd-servers={self.etcd_url}",
                f"--bind-address={self.bind_address}",
                f"--advertise-address={self.bind_address}",
                f"--secure-port={port}",
                # Real nodes' kubelets (logs, exec, port-forward), reached at their InternalIP as this client.
                f"--kubelet-client-certificate={kubelet_cert}",
                f"--kubelet-client-key={kubelet_key}",
                "--kubelet-preferred-address-types=InternalIP",
                f"--cert-dir={self.directory / 'apiserver-certs'}",
                f"--tls-cert-file={self.pki.serving_cert}",
                f"--tls-private-key-file={self.pki.serving_key}",
                f"--client-ca-file={self.pki.ca_cert}",
                "--authorization-mode=Node,RBAC",
                f"--service-cluster-ip-range={self.service_cidr}",
                # Webhooks and aggregated APIs are called at their Service's endpoints, as by a managed
                # control plane outside the node network: a ClusterIP is only a rule of a node's
                # kube-proxy, and a fresh one may not be there yet (decision 43).
                "--enable-aggregator-routing=true",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                f"--service-account-key-file={self.pki.service_account_public_key}",
                f"--service-account-signing-key-file={self.pki.service_account_key}",
                "--allow-privileged=true",
                "--profiling=false",
                f"--audit-policy-file={self._write_audit_policy()}",
                f"--audit-log-path={self.audit_log}",
                "--audit-log-maxsize=0",
            ],
        )
        context = self._admin_ssl()

        def ready() -> bool:
            return httpx.get(f"{self.api_url}/readyz", verify=context, timeout=2).status_code == 200

        self._wait("kube-apiserver", process, ready, deadline)

    def kubectl(self, *arguments: str, timeout: float = 120) -> str:
        """Run the pinned kubectl as admin against this control plane; its stdout, or ControlPlaneError
        (subprocess.TimeoutExpired after ``timeout`` seconds)."""
        result = subprocess.run(
            [str(self.binaries.kubectl), f"--kubeconfig={self.kubeconfig}", *arguments],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if result.returncode != 0:
            raise ControlPlaneError(f"kubectl {' '.join(arguments)} failed: {result.stderr.strip()}")
        return result.stdout

    def kubeconfig_text(self, user: Mapping[str, Any]) -> str:
        """A kubeconfig for this control plane with the given user entry (certificate or token)."""
        assert self.pki is not None
        config: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "operator-suite",
                    "cluster": {
                        "server": self.api_url,
                        "certificate-authority-data": _base64(self.pki.ca_cert),
                    },
                }
            ],
            "users": [{"name": "user", "user": user}],
            "contexts": [
                {"name": "operator-suite", "context": {"cluster": "operator-suite", "user": "user"}}
            ],
            "current-context": "operator-suite",
        }
        return yaml.safe_dump(config, sort_keys=False)

    def kubeconfig_for_token(self, token: str) -> str:
        """A kubeconfig that authenticates with a bearer token, e.g. a ServiceAccount's."""
        return self.kubeconfig_text({"token": token})

    def _write_kubeconfig(self) -> None:
        assert self.pki is not None
        admin = {
            "client-certificate-data": _base64(self.pki.admin_cert),
            "client-key-data": _base64(self.pki.admin_key),
        }
        self.kubeconfig.write_text(self.kubeconfig_text(admin))
        self.kubeconfig.chmod(0o600)

    def _component_health(self, port: int) -> Callable[[], bool]:
        def healthy() -> bool:
            # These components serve a self-signed certificate they make themselves; /healthz is public.
            answer = httpx.get(f"https://127.0.0.1:{port}/healthz", verify=False, timeout=2)  # noqa: S501
            return answer.status_code == 200

        return healthy

    def _start_controller_manager(self, binaries: Binaries, deadline: float) -> None:
        assert self.pki is not None
        port = free_port()
        process = self._spawn(
            "kube-controller-manager",
            [
                str(binaries.kube_controller_manager),
                f"--kubeconfig={self.kubeconfig}",
                f"--authentication-kubeconfig={self.kubeconfig}",
                f"--authorization-kubeconfig={self.kubeconfig}",
                "--bind-address=127.0.0.1",
                f"--secure-port={port}",
                f"--cert-dir={self.directory / 'controller-manager-certs'}",
                f"--service-account-private-key-file={self.pki.service_account_key}",
                f"--root-ca-file={self.pki.ca_cert}",
                f"--cluster-signing-cert-file={self.pki.ca_cert}",
                f"--cluster-signing-key-file={self.pki.ca_key}",
                f"--service-cluster-ip-range={self.service_cidr}",
                "--use-service-account-credentials=true",
                "--leader-elect=false",
                "--controllers=" + ",".join(["*", *(f"-{name}" for name in self.disabled_controllers)]),
            ],
        )
        self._wait("kube-controller-manager", process, self._component_health(port), deadline)

    def _start_scheduler(self, binaries: Binaries, deadline: float) -> None:
        port = free_port()
        process = self._spawn(
            "kube-scheduler",
            [
                str(binaries.kube_scheduler),
                f"--kubeconfig={self.kubeconfig}",
                f"--authentication-kubeconfig={self.kubeconfig}",
                f"--authorization-kubeconfig={self.kubeconfig}",
                "--bind-address=127.0.0.1",
                f"--secure-port={port}",
                f"--cert-dir={self.directory / 'scheduler-certs'}",
                "--leader-elect=false",
            ],
        )
        self._wait("kube-scheduler", process, self._component_health(port), deadline)

    def _wait_for_default_service_account(self, deadline: float) -> None:
        """Pods cannot be created before the controller manager has made `default/default`."""
        context = self._admin_ssl()
        url = f"{self.api_url}/api/v1/namespaces/default/serviceaccounts/default"
        self._wait(
            "kube-controller-manager",
            self._processes[-2],
            lambda: httpx.get(url, verify=context, timeout=2).status_code == 200,
            deadline,
        )
