"""Where a local cluster of real nodes lives on this machine: its addresses, names and files (pure).

A cluster of real nodes takes one *slot* of this machine (0-7, held by a file lock for as long as it
runs, see :mod:`.host`), so two test runs, two pytest-xdist workers and the sandbox never meet. A slot
is a network namespace of its own: its nodes' kubelets, containerds and kube-proxy, every pod bridge
and every iptables rule live in it, joined to the machine by one veth pair. Every address comes from
the benchmark range 198.18.0.0/15 (RFC 2544), never from a private or public range:

====================  ==========================  ==========================================
what                  slot ``s``                  example (slot 0)
====================  ==========================  ==========================================
pods                  198.18.(32s).0/19           node *i* bridges 198.18.(32s+i).0/24
Services              198.19.(16s).0/20           ``kubernetes`` .1, cluster DNS .10
the link              198.19.(128+16s).0/24       machine .1 (the API server binds it),
                                                  namespace .2, node *i* .(11+i)
====================  ==========================  ==========================================

The namespace has no default route, and its FORWARD chain drops whatever a pod sends outside these
ranges: nothing a pod sends can leave the machine.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "KUBELET_GROUPS",
    "MAX_NODES",
    "RUN_DIR",
    "SLOTS",
    "NodePlan",
    "NodesPlan",
    "nodes_plan",
    "slot_cgroup",
    "socket_directory",
]

SLOTS = 8
MAX_NODES = 26
"""One zone letter each (``zone-a`` ...), as the tests' topology spreading expects."""

RUN_DIR = Path("/run/operator-suite")
"""The machine's record of slots, and short paths for sockets (a unix socket's path has at most 107 bytes)."""


KUBELET_GROUPS = 2_147_000_000
"""Where the kubelets' own group ids begin: each kubelet runs as root with the group
``KUBELET_GROUPS + 100 * slot + index`` (a group no account of the machine has), which its sockets
carry, so that an iptables rule can cut that one kubelet off (:mod:`.power`'s isolation)."""


def slot_cgroup(slot: int) -> str:
    """The cgroup (in every hierarchy) that holds every process of the slot: daemons, shims, containers."""
    return f"/operator-suite/slot{slot}"


def socket_directory(slot: int) -> Path:
    return RUN_DIR / f"s{slot}"


_SOCKET_PATH_LIMIT = 107
_POD_RANGE = ipaddress.IPv4Network("198.18.0.0/16")
_SERVICE_RANGE = ipaddress.IPv4Network("198.19.0.0/17")
_LINK_RANGE = ipaddress.IPv4Network("198.19.128.0/17")


@dataclass(frozen=True)
class NodePlan:
    """One node: its name, zone, address (on the slot's link) and pod subnet, and its files."""

    index: int
    name: str
    zone: str
    address: ipaddress.IPv4Address
    pod_subnet: ipaddress.IPv4Network
    bridge: str
    sockets: Path
    """A short directory for the node's containerd sockets."""
    cgroup_root: str
    """The node's cgroup, under which the kubelet puts every pod (made in every v1 controller)."""
    directory: Path
    daemon_cgroup: str
    """The cgroup of the node's kubelet and containerd (and so of containerd's shims): a power cut
    freezes and kills it with the node's pods, and nothing else of the slot."""
    kubelet_group: int
    """The group id the node's kubelet runs with (:data:`KUBELET_GROUPS`)."""

    @property
    def gateway(self) -> ipaddress.IPv4Address:
        """The bridge's own address, its pods' default gateway."""
        return self.pod_subnet[1]


@dataclass(frozen=True)
class NodesPlan:
    """A slot's whole layout."""

    slot: int
    directory: Path
    pod_range: ipaddress.IPv4Network
    service_range: ipaddress.IPv4Network
    link: ipaddress.IPv4Network
    nodes: tuple[NodePlan, ...]

    @property
    def api_address(self) -> ipaddress.IPv4Address:
        """The machine's end of the link, where the API server listens, reachable from every pod."""
        return self.link[1]

    @property
    def namespace_address(self) -> ipaddress.IPv4Address:
        """The namespace's end of the link: the machine routes pods and Services through it."""
        return self.link[2]

    @property
    def kubernetes_service_ip(self) -> ipaddress.IPv4Address:
        return self.service_range[1]

    @property
    def dns_service_ip(self) -> ipaddress.IPv4Address:
        return self.service_range[10]

    @property
    def machine_link(self) -> str:
        """The machine's end of the veth pair (interface names have at most 15 characters)."""
        return f"osnodes{self.slot}"

    @property
    def namespace_link(self) -> str:
        return "uplink"

    @property
    def cgroup(self) -> str:
        return slot_cgroup(self.slot)

    @property
    def daemons_cgroup(self) -> str:
        """The slot's daemons: kube-proxy and the resizer here, each node's kubelet and containerd in
        a cgroup of its own below (:attr:`NodePlan.daemon_cgroup`)."""
        return f"{self.cgroup}/daemons"

    @property
    def socket_directory(self) -> Path:
        return socket_directory(self.slot)

    @property
    def netns_file(self) -> Path:
        """The network namespace, kept alive by a bind mount on this file (no /run/netns entry)."""
        return self.directory / "netns"

    @property
    def reachable(self) -> tuple[ipaddress.IPv4Network, ...]:
        """Everything a pod may send to; the FORWARD chain drops the rest."""
        return (self.pod_range, self.service_range, self.link)


def nodes_plan(slot: int, count: int, directory: Path) -> NodesPlan:
    """The layout of ``count`` nodes in ``slot``, their files under ``directory``.

    Nodes are named ``node-a``, ``node-b`` ... and zoned ``zone-a``, ``zone-b`` ... in order.
    """
    if not 0 <= slot < SLOTS:
        raise ValueError(f"slot {slot} is not one of 0-{SLOTS - 1}")
    if not 1 <= count <= MAX_NODES:
        raise ValueError(f"between 1 and {MAX_NODES} nodes, one zone letter each; asked for {count}")
    # The kubelet makes unix sockets under its root directory (pod-resources/<10 digits>), and a
    # socket's path has at most 107 bytes.
    longest = directory / "node-z" / "kubelet" / "pod-resources" / "0123456789"
    if len(str(longest)) > _SOCKET_PATH_LIMIT:
        raise ValueError(
            f"the nodes' directory {directory} is too long by {len(str(longest)) - _SOCKET_PATH_LIMIT} "
            f"characters for the kubelet's sockets: choose a shorter one"
        )
    pod_range = list(_POD_RANGE.subnets(new_prefix=19))[slot]
    service_range = list(_SERVICE_RANGE.subnets(new_prefix=20))[slot]
    link = ipaddress.IPv4Network(f"{_LINK_RANGE[0] + 16 * 256 * slot}/24")
    node_subnets = list(pod_range.subnets(new_prefix=24))
    nodes = tuple(
        NodePlan(
            index=i,
            name=f"node-{letter}",
            zone=f"zone-{letter}",
            address=link[11 + i],
            pod_subnet=node_subnets[i],
            bridge=f"osbr{slot}{letter}",
            sockets=socket_directory(slot) / letter,
            cgroup_root=f"{slot_cgroup(slot)}/node-{letter}",
            directory=directory / f"node-{letter}",
            daemon_cgroup=f"{slot_cgroup(slot)}/daemons/node-{letter}",
            kubelet_group=KUBELET_GROUPS + 100 * slot + i,
        )
        for i, letter in ((i, chr(ord("a") + i)) for i in range(count))
    )
    return NodesPlan(slot, directory, pod_range, service_range, link, nodes)
