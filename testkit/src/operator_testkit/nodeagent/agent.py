"""The node agent: nodes, pods, storage and names, kept in step with the API by polling.

:class:`NodeAgent` registers its nodes, then runs a few loops side by side:

- pods (every :attr:`AgentSettings.poll_seconds`): every pod bound to one of its
  nodes gets an address at once and a :class:`~.pods.PodWorker` once no further pod
  has come for 1.5 s (peers started together know one another's names); updates (a deletion) are
  handed to it,
  and a pod that vanished stops its worker at once;
- names (every :attr:`AgentSettings.names_seconds`): Services and EndpointSlices are
  read and every pod's hosts file is rewritten where it changed;
- node heartbeats and Leases (:mod:`.nodes`), and the provisioner (:mod:`.storage`);
- the service proxy (:mod:`.serviceproxy`), updated with the pods.

It also serves the nodes' kubelet endpoints for ``kubectl logs`` (:mod:`.kubelet`)
and a control API for faults on demand (:mod:`.control`).

Polling instead of watching keeps the agent small and needs nothing beyond
:class:`~operator_core.kube.Kube`; the cost is up to one poll interval of delay.

The agent writes ``STATE/agent.json`` (mode 0600) once its nodes are registered (what
:mod:`.fixtures` waits for): its pid, nodes, the control API's URL and token.
:meth:`NodeAgent.shutdown` stops every container process it started; the API objects
are left as they are, as when a kubelet stops.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import logging
import os
import random
import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from operator_core.events import EventRecorder
from operator_core.kube import Kube
from operator_testkit.nodeagent.addresses import DEFAULT_POD_CIDR, next_address
from operator_testkit.nodeagent.control import ControlServer
from operator_testkit.nodeagent.hosts import endpoints_from_pods
from operator_testkit.nodeagent.kubelet import KubeletServer
from operator_testkit.nodeagent.nodes import NodeSet, node_identities
from operator_testkit.nodeagent.pods import PodWorker
from operator_testkit.nodeagent.runners import REGISTRY, WITHOUT_STAND_INS, Runner
from operator_testkit.nodeagent.serviceproxy import ServiceProxy, api_server_backend, service_backends
from operator_testkit.nodeagent.storage import Provisioner

__all__ = ["FIELD_MANAGER", "AgentSettings", "NodeAgent"]

log = logging.getLogger(__name__)

FIELD_MANAGER = "operator-suite-nodeagent"
# The client reads a namespace of None as the kubeconfig's default namespace; "*" means every namespace.
ALL_NAMESPACES = "*"
SANDBOX_QUIET_SECONDS = 1.5
"""New pods start once no further pod has come for this long (three poll passes): one pass was too
short on a loaded machine, where a StatefulSet's third pod came a second after the first two."""
SANDBOX_SETTLE_LIMIT_SECONDS = 5.0
Manifest = dict[str, Any]


@dataclass(frozen=True)
class AgentSettings:
    """How one agent runs; several agents may share a control plane with other node prefixes."""

    kubeconfig: Path
    state_dir: Path
    nodes: int = 3
    node_prefix: str = "agent-node"
    pod_cidr: str = DEFAULT_POD_CIDR
    poll_seconds: float = 0.5
    names_seconds: float = 2.0
    shutdown_grace: float = 5.0
    private_mounts: bool = False  # in a mount namespace of its own: size-limited volumes can be mounted
    stand_ins: bool = True  # images no real runner plays run a stand-in; without, they cannot start


class NodeAgent:
    """A kubelet stand-in for a few nodes on this machine. ``await agent.run()`` until cancelled."""

    def __init__(self, settings: AgentSettings) -> None:
        self.settings = settings
        self.state_dir = settings.state_dir.resolve()
        # connect() builds an instance of the class it is called on; its annotation just says Kube.
        self.kube = Kube.connect(settings.kubeconfig, field_manager=FIELD_MANAGER)
        self.nodes = NodeSet(self.kube, node_identities(settings.node_prefix, settings.nodes))
        self.events = EventRecorder(self.kube, "operator-suite-nodeagent", settings.node_prefix)
        # For probes: no proxies from the environment; HTTPS probes skip verification, as the kubelet's do.
        self.http = httpx.AsyncClient(trust_env=False, verify=False, follow_redirects=False)  # noqa: S501
        self.workers: dict[str, PodWorker] = {}
        self.runners: Sequence[tuple[str, Runner]] = REGISTRY if settings.stand_ins else WITHOUT_STAND_INS
        self._network = ipaddress.IPv4Network(settings.pod_cidr)
        self._addresses: dict[str, ipaddress.IPv4Address] = {}
        # A random start, so that agents of concurrent test sessions rarely hand out the same address.
        self._last_address: ipaddress.IPv4Address | None = self._network[
            random.randrange(self._network.num_addresses)  # noqa: S311  (not a secret)
        ]
        self._services: list[Manifest] = []
        self._slices: list[Manifest] = []
        self._pods: list[Manifest] = []
        self._sandboxes: dict[str, tuple[Manifest, float]] = {}  # new pods by uid: (pod, since when)
        self.provisioner = Provisioner(self.kube, self.state_dir / "volumes", mounts=settings.private_mounts)
        self.proxy = ServiceProxy()
        self._api_server = api_server_backend(self.kube.server)  # behind the `kubernetes` Service
        self.kubelet = KubeletServer(self.state_dir, self._live_log_dir)
        self._token = secrets.token_urlsafe(24)
        self.control = ControlServer(self, self._token)

    # -- what pod workers use (PodServices)

    def allocate_ip(self, uid: str, wanted: str | None) -> str:
        """A fresh address; a pod that already had one (an agent restart) keeps it while it is free."""
        if uid in self._addresses:
            return str(self._addresses[uid])
        in_use = set(self._addresses.values())
        chosen: ipaddress.IPv4Address | None = None
        if wanted:
            with contextlib.suppress(ValueError):
                candidate = ipaddress.IPv4Address(wanted)
                if candidate in self._network and candidate not in in_use:
                    chosen = candidate
        if chosen is None:
            chosen = next_address(self._network, in_use, self._last_address)
            self._last_address = chosen
        self._addresses[uid] = chosen
        return str(chosen)

    def release_ip(self, uid: str) -> None:
        self._addresses.pop(uid, None)

    def host_ip(self, node_name: str) -> str:
        return self.nodes.address_of(node_name)

    def cluster_names(self) -> tuple[list[Manifest], list[Manifest]]:
        return self._services, self._slices

    # -- what the control API and the kubelet endpoint use

    def worker_for(self, namespace: str, pod: str) -> PodWorker | None:
        """The worker of the live pod of that name (a re-created pod's, not its predecessor's)."""
        found = [
            w
            for w in self.workers.values()
            if w.namespace == namespace and w.name == pod and not w.gone and not w.finished
        ]
        return found[-1] if found else None

    async def claim_path(self, namespace: str, claim: str) -> Path:
        return await self.provisioner.path_of_claim(namespace, claim)

    def _live_log_dir(self, namespace: str, pod: str) -> Path | None:
        worker = self.worker_for(namespace, pod)
        return worker.log_dir if worker is not None else None

    # -- the loops

    async def run(self) -> None:
        """Register the nodes, then keep everything in step until cancelled; always shuts down."""
        self.state_dir.mkdir(parents=True, exist_ok=True)
        try:
            ports = await self.kubelet.start([n.address for n in self.nodes.nodes])
            self.nodes.kubelet_ports = {n.name: ports[n.address] for n in self.nodes.nodes}
            control_url = await self.control.start()
            await self.nodes.register()
            await self._refresh_names()
            self._write_marker(control_url)
            log.info("node agent ready: nodes %s", ", ".join(sorted(self.nodes.names)))
            await asyncio.gather(
                self.nodes.run(),
                self.provisioner.run(),
                self._every(self.settings.names_seconds, self._refresh_names),
                self._every(self.settings.poll_seconds, self._sync_pods),
            )
        finally:
            await self.shutdown()

    def _write_marker(self, control_url: str) -> None:
        marker = {
            "pid": os.getpid(),
            "nodes": sorted(self.nodes.names),
            "podCIDR": str(self._network),
            "kubeletPorts": self.nodes.kubelet_ports,
            "control": {"url": control_url, "token": self._token},
            "privateMounts": self.settings.private_mounts,
        }
        path = self.state_dir / "agent.json"
        temporary = path.with_name(".agent.json.tmp")
        temporary.unlink(missing_ok=True)
        # Written whole, then renamed: a reader never sees half of it; 0600: the token is a key.
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as handle:
            handle.write(json.dumps(marker, indent=2))
        os.replace(temporary, path)

    @staticmethod
    async def _every(seconds: float, step: Any) -> None:
        while True:
            try:
                await step()
            except Exception as error:  # a failed pass is retried at the next one
                log.warning("%s failed: %s", getattr(step, "__name__", step), error)
            await asyncio.sleep(seconds)

    async def _refresh_names(self) -> None:
        self._services = await self.kube.list("v1", "Service", ALL_NAMESPACES)
        real = await self.kube.list("discovery.k8s.io/v1", "EndpointSlice", ALL_NAMESPACES)
        # The API refuses loopback endpoint addresses, so the pods' endpoints are computed here too.
        self._slices = [*real, *endpoints_from_pods(self._services, self._pods_as_allocated())]
        for worker in list(self.workers.values()):
            worker.refresh_hosts()

    def _pods_as_allocated(self) -> list[Manifest]:
        """The pods, each with the address given here even before its status write comes back.

        The endpoint controller publishes an address as soon as the pod's status has it, which on a
        real node comes with the sandbox, before any container starts. Here a container starts
        moments after its address is chosen, so the names follow the choice, not the status write:
        peers started together then resolve one another from their first start.
        """
        pods = []
        for pod in self._pods:
            address = self._addresses.get(pod["metadata"]["uid"])
            status = pod.get("status") or {}
            if address is not None and status.get("podIP") != str(address):
                pod = {**pod, "status": {**status, "podIP": str(address)}}
            pods.append(pod)
        return pods

    async def _sync_pods(self) -> None:
        names = self.nodes.names
        seen = set()
        arrived = False
        self._pods = await self.kube.list("v1", "Pod", ALL_NAMESPACES)
        for pod in self._pods:
            if pod.get("spec", {}).get("nodeName") not in names:
                continue
            metadata = pod["metadata"]
            uid = metadata["uid"]
            seen.add(uid)
            worker = self.workers.get(uid)
            if worker is not None:
                worker.update(pod)
                continue
            if uid in self._sandboxes:
                self._sandboxes[uid] = (pod, self._sandboxes[uid][1])
                continue
            if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                if metadata.get("deletionTimestamp"):  # finished earlier: only its removal is left
                    await self.kube.delete(
                        "v1", "Pod", metadata["name"], metadata["namespace"], grace_period=0
                    )
                continue
            # Every new pod's address first, as a sandbox comes before its containers.
            self.allocate_ip(uid, (pod.get("status") or {}).get("podIP"))
            self._sandboxes[uid] = (pod, time.monotonic())
            arrived = True
        for uid in [uid for uid in self._sandboxes if uid not in seen]:  # deleted before it started
            del self._sandboxes[uid]
            self.release_ip(uid)
        starting = bool(self._sandboxes) and self._sandboxes_settled()
        if arrived or starting:
            # Names as of now, not of the last names pass: a Service created just before these pods,
            # and the pods themselves, resolve in their hosts files from the first start.
            await self._refresh_names()
        if starting:
            for uid, (pod, _) in self._sandboxes.items():
                worker = PodWorker(self, pod)
                worker.update(pod)
                self.workers[uid] = worker
                worker.task = asyncio.create_task(worker.run(), name=f"pod {worker.key}")
            self._sandboxes.clear()
        for uid, worker in list(self.workers.items()):
            if uid not in seen:
                worker.vanish()
            if worker.finished:
                del self.workers[uid]
        # Here rather than with the names: endpoints follow pod readiness, which changes faster.
        await self.proxy.update(service_backends(self._services, self._pods, self._api_server))

    def _sandboxes_settled(self) -> bool:
        """Whether the pods waiting for their containers may start now.

        A controller creates a StatefulSet's pods one after another, and peers that start together
        must find one another by name from their first start (typesense-server retries an
        unresolvable peer only after 30 s). So new pods wait, addressed and named, until no further
        pod has come for :data:`SANDBOX_QUIET_SECONDS`, as a real node spends a moment on each
        sandbox; a steady stream of new pods holds none of them longer than
        :data:`SANDBOX_SETTLE_LIMIT_SECONDS`.
        """
        arrivals = [since for _, since in self._sandboxes.values()]
        now = time.monotonic()
        return (
            now - max(arrivals) >= SANDBOX_QUIET_SECONDS
            or now - min(arrivals) >= SANDBOX_SETTLE_LIMIT_SECONDS
        )

    async def shutdown(self) -> None:
        """Stop every container process (SIGTERM, then SIGKILL after the shutdown grace), and the servers."""
        for server in (self.control, self.kubelet, self.proxy):
            with contextlib.suppress(Exception):
                await server.stop()
        workers = list(self.workers.values())
        await asyncio.gather(*(w.stop(self.settings.shutdown_grace) for w in workers), return_exceptions=True)
        for worker in workers:
            if worker.task is not None:
                worker.task.cancel()
        await asyncio.gather(*(w.task for w in workers if w.task is not None), return_exceptions=True)
        self.workers.clear()
        await self.provisioner.unmount_all()
        await self.http.aclose()
        await self.kube.close()
