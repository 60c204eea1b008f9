"""The agent's Node objects: registration, status heartbeats and Leases, as the kubelet keeps them.

Each node gets its own zone label (``zone-a``, ``zone-b``, ...), so the real
scheduler's topology spreading and zone selection have something to work with,
and an InternalIP in its own loopback range (127.49.0.N), used as the pods'
``hostIP``. Every :data:`HEARTBEAT_SECONDS` the agent renews each node's Lease
in ``kube-node-lease`` and refreshes its Ready condition, well inside the node
lifecycle controller's grace period, so it never taints the nodes.

The status advertises each node's kubelet endpoint (:mod:`.kubelet`, on the
node's address and a free port, so several agents can share this machine), and
only the InternalIP as an address: the API server reaches a kubelet at the first
address type it prefers, and a Hostname it would look up in DNS.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from operator_core.kube import Kube
from operator_testkit.nodeagent.status import timestamp

__all__ = [
    "AGENT_LABEL",
    "HEARTBEAT_SECONDS",
    "NodeIdentity",
    "NodeSet",
    "lease_manifest",
    "node_identities",
    "node_manifest",
    "node_status",
]

log = logging.getLogger(__name__)

AGENT_LABEL = "nodeagent.operator-suite.io/agent"
HEARTBEAT_SECONDS = 10.0
LEASE_SECONDS = 40
CAPACITY = {"cpu": "8", "memory": "16Gi", "pods": "110", "ephemeral-storage": "100Gi"}


@dataclass(frozen=True)
class NodeIdentity:
    name: str
    zone: str
    address: str


def node_identities(prefix: str, count: int) -> list[NodeIdentity]:
    """``count`` nodes named ``{prefix}-0..`` in zones ``zone-a``, ``zone-b``, ... (pure)."""
    if not 1 <= count <= 26:
        raise ValueError("between 1 and 26 nodes, one zone letter each")
    return [
        NodeIdentity(f"{prefix}-{i}", f"zone-{chr(ord('a') + i)}", f"127.49.0.{i + 1}") for i in range(count)
    ]


def node_status(
    node: NodeIdentity, now: datetime, transition: str | None = None, kubelet_port: int = 10250
) -> dict[str, Any]:
    """A healthy node's status, heartbeat ``now``, its kubelet on ``kubelet_port`` (pure)."""
    stamp = timestamp(now)

    def condition(kind: str, status: str, reason: str, message: str) -> dict[str, str]:
        return {
            "type": kind,
            "status": status,
            "reason": reason,
            "message": message,
            "lastHeartbeatTime": stamp,
            "lastTransitionTime": transition or stamp,
        }

    return {
        "capacity": CAPACITY,
        "allocatable": CAPACITY,
        "conditions": [
            condition("MemoryPressure", "False", "KubeletHasSufficientMemory", "node agent: no pressure"),
            condition("DiskPressure", "False", "KubeletHasNoDiskPressure", "node agent: no pressure"),
            condition("PIDPressure", "False", "KubeletHasSufficientPID", "node agent: no pressure"),
            condition("Ready", "True", "KubeletReady", "operator-suite node agent is posting ready status"),
        ],
        "addresses": [{"type": "InternalIP", "address": node.address}],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": kubelet_port}},
        "nodeInfo": {
            "architecture": "amd64",
            "bootID": "",
            "containerRuntimeVersion": "nodeagent://0.1.0",
            "kernelVersion": "",
            "kubeProxyVersion": "",
            "kubeletVersion": "v1.35.4-nodeagent",
            "machineID": "",
            "operatingSystem": "linux",
            "osImage": "operator-suite node agent",
            "systemUUID": "",
        },
    }


def node_manifest(node: NodeIdentity, now: datetime, kubelet_port: int = 10250) -> dict[str, Any]:
    """The Node as registered (pure)."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": node.name,
            "labels": {
                "kubernetes.io/hostname": node.name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "topology.kubernetes.io/zone": node.zone,
                AGENT_LABEL: "true",
            },
        },
        "spec": {},
        "status": node_status(node, now, kubelet_port=kubelet_port),
    }


def lease_manifest(node_name: str, node_uid: str, now: datetime) -> dict[str, Any]:
    """The node's Lease in kube-node-lease, renewed ``now`` (pure).

    The client drops a zero fraction when it encodes a MicroTime, which the API
    server refuses, so the fraction is never zero.
    """
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {
            "name": node_name,
            "namespace": "kube-node-lease",
            "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": node_name, "uid": node_uid}],
        },
        "spec": {
            "holderIdentity": node_name,
            "leaseDurationSeconds": LEASE_SECONDS,
            "renewTime": now.replace(microsecond=max(now.microsecond, 1)),
        },
    }


class NodeSet:
    """Registers the agent's nodes and keeps them alive."""

    def __init__(self, kube: Kube, nodes: Sequence[NodeIdentity]) -> None:
        self._kube = kube
        self.nodes = list(nodes)
        self._uids: dict[str, str] = {}
        self.kubelet_ports: dict[str, int] = {}  # set by the agent once its kubelet endpoints listen
        self._since = timestamp(datetime.now(UTC))  # when the conditions last changed: at registration

    @property
    def names(self) -> set[str]:
        return {n.name for n in self.nodes}

    def address_of(self, name: str) -> str:
        return next(n.address for n in self.nodes if n.name == name)

    def _port(self, node: NodeIdentity) -> int:
        return self.kubelet_ports.get(node.name, 10250)

    async def register(self) -> None:
        """Create each Node (or take over an existing one of the same name) and its Lease."""
        now = datetime.now(UTC)
        for node in self.nodes:
            live = await self._kube.get("v1", "Node", node.name)
            if live is None:
                live = await self._kube.create(node_manifest(node, now, self._port(node)))
            self._uids[node.name] = live["metadata"]["uid"]
        await self.beat()

    async def beat(self) -> None:
        now = datetime.now(UTC)
        for node in self.nodes:
            status = node_status(node, now, transition=self._since, kubelet_port=self._port(node))
            await self._kube.patch_status("v1", "Node", node.name, None, status)
            await self._kube.apply(lease_manifest(node.name, self._uids[node.name], now))

    async def run(self) -> None:
        """Heartbeats until cancelled; an API error is logged and retried at the next beat."""
        while True:
            await asyncio.sleep(HEARTBEAT_SECONDS)
            try:
                await self.beat()
            except Exception as error:  # any failure is retried at the next beat
                log.warning("node heartbeat failed: %s", error)
