"""Reaching a TypesenseCluster's nodes: its pods as probe targets (ordinal, address, what their kubelet
says), the admin key the probes carry, the probes themselves through the operator's addressing, and the
furthest commit seen of each cluster (:class:`CommitMemory`, kept in the operator's runtime). Who uses
it: the cluster's quorum step and its children (the nodes list by address), and the backup controller,
which probes the nodes to choose one."""

from __future__ import annotations

import secrets
import string
from dataclasses import replace
from datetime import datetime
from typing import Any, Generic, TypeVar

from operator_core import errors
from operator_core.clock import parse_wire_time
from operator_core.conditions import reports_true
from operator_core.kube import Kube
from operator_core.pods import container_state, pod_ordinal
from typesense_operator.controller.settings import TypesenseSettings
from typesense_operator.quorum.hosts import Host, heartbeat_silent, host_of
from typesense_operator.quorum.model import HELD_BACK_REASONS, NodeProbe
from typesense_operator.quorum.probe import NodeAddressing, NodeTarget, NodeTls, probe_nodes
from typesense_operator.resources import API_KEY_DATA_KEY, Cluster
from typesense_operator.resources.core import NODE, TYPESENSE_CONTAINER
from typesense_operator.resources.model import secret_bytes
from typesense_operator.resources.tls import node_server_name, served_secret_name, serves_https

__all__ = [
    "ClusterMemory",
    "CommitMemory",
    "SilenceMemory",
    "decoded_key",
    "generate_key",
    "member_hosts",
    "node_targets",
    "pod_addresses",
    "probe_cluster",
    "with_node_heartbeats",
]

Remembered = TypeVar("Remembered")

_KEY_ALPHABET = string.ascii_letters + string.digits


_KEY_LENGTH = 48


def generate_key() -> str:
    return "".join(secrets.choice(_KEY_ALPHABET) for _ in range(_KEY_LENGTH))


def decoded_key(secret: dict[str, Any] | None, data_key: str = API_KEY_DATA_KEY) -> str | None:
    """The value under ``data_key`` of a Secret (the admin key's, by default); None when absent."""
    value = secret_bytes(secret, data_key)
    return value.decode() if value is not None else None


def pod_addresses(pods: list[dict[str, Any]], statefulset: str) -> dict[int, str]:
    """Each node pod's IP by ordinal, for the nodes list. A pod being deleted keeps its address while
    its process may still lead; one that has ended (Failed, Succeeded) has none any more."""
    addresses = {}
    for pod in pods:
        status = pod.get("status") or {}
        index = pod_ordinal(pod["metadata"]["name"], statefulset)
        if index is not None and status.get("podIP") and status.get("phase") not in ("Failed", "Succeeded"):
            addresses[index] = str(status["podIP"])
    return addresses


def _held_back(pod: dict[str, Any]) -> str | None:
    """The Typesense container's waiting reason when its kubelet holds it back (quorum/decide.py's
    HELD_BACK_REASONS); None while it runs or is about to start."""
    reason = (container_state(pod, TYPESENSE_CONTAINER).get("waiting") or {}).get("reason")
    return str(reason) if reason in HELD_BACK_REASONS else None


def _running_since(pod: dict[str, Any]) -> datetime | None:
    """When the Typesense container started, while it runs (its kubelet's ``state.running.startedAt``)."""
    return parse_wire_time((container_state(pod, TYPESENSE_CONTAINER).get("running") or {}).get("startedAt"))


def _unready_since(pod: dict[str, Any]) -> datetime | None:
    """When the pod's Ready condition last became False, while it is False (its kubelet's view)."""
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready" and condition.get("status") == "False":
            return parse_wire_time(condition.get("lastTransitionTime"))
    return None


def _target(pod: dict[str, Any], index: int, cluster: Cluster, ca: bytes | None) -> NodeTarget:
    tls = None
    if serves_https(pod):
        tls = NodeTls(node_server_name(cluster, pod["metadata"]["name"]), ca or b"")
    return NodeTarget(
        index=index,
        pod=pod["metadata"]["name"],
        namespace=cluster.namespace,
        pod_ip=(pod.get("status") or {}).get("podIP"),
        port=cluster.spec.api_port,
        kubelet_ready=reports_true(pod),
        peering_port=cluster.spec.peering_port,
        held_back=_held_back(pod),
        running_since=_running_since(pod),
        unready_since=_unready_since(pod),
        tls=tls,
    )


async def node_targets(kube: Kube, cluster: Cluster) -> tuple[list[NodeTarget], list[dict[str, Any]]]:
    """The cluster's node pods that are not going away, as probe targets (those serving HTTPS with the
    CA bundle they are checked with), and the pods themselves."""
    pods = await kube.list("v1", "Pod", cluster.namespace, labels=cluster.labels(NODE))
    served = await kube.get("v1", "Secret", served_secret_name(cluster.name), cluster.namespace)
    ca = secret_bytes(served, "ca.crt")
    targets, target_pods = [], []
    for pod in pods:
        index = pod_ordinal(pod["metadata"]["name"], cluster.statefulset_name)
        if index is None or pod["metadata"].get("deletionTimestamp"):
            continue
        target_pods.append(pod)
        targets.append(_target(pod, index, cluster, ca))
    return targets, target_pods


async def member_hosts(kube: Kube, pods: list[dict[str, Any]]) -> list[Host]:
    """The Kubernetes node of each pod (its ``spec.nodeName``) as the control plane sees it, from the
    Nodes' watch cache. A Node the operator may not read is Unknown: said, never guessed."""
    hosts = []
    for pod in pods:
        name = (pod.get("spec") or {}).get("nodeName")
        if not name:
            hosts.append(host_of(None, None))
            continue
        try:
            hosts.append(host_of(name, await kube.get("v1", "Node", name)))
        except (errors.Forbidden, errors.NotFound):
            hosts.append(host_of(name, None, readable=False))
    return hosts


NODE_LEASE = ("coordination.k8s.io/v1", "Lease")
NODE_LEASE_NAMESPACE = "kube-node-lease"
"""Where each node's kubelet renews its heartbeat, a Lease named after the node."""


async def with_node_heartbeats(
    kube: Kube, probes: list[NodeProbe], hosts: list[Host], indexes: tuple[int, ...], now: datetime
) -> list[NodeProbe]:
    """The probes, those of members ``indexes`` marked ``node_silent`` where their node's kubelet
    stopped renewing its Lease. Read live, and only for these members: it is asked only before a pod
    would be deleted for a hung member, which is rare, so no cache of every node's Lease (renewed
    every 10 s each) is kept for it. A Lease the operator may not read, or none, says nothing."""
    marked = []
    for probe, host in zip(probes, hosts, strict=True):
        if probe.index in indexes and host.name:
            try:
                lease = await kube.get_live(*NODE_LEASE, host.name, NODE_LEASE_NAMESPACE)
            except errors.Forbidden:
                lease = None
            probe = replace(probe, node_silent=heartbeat_silent(lease, now))
        marked.append(probe)
    return marked


async def probe_cluster(
    addressing: NodeAddressing,
    settings: TypesenseSettings,
    cluster: Cluster,
    targets: list[NodeTarget],
    key: str,
) -> list[NodeProbe]:
    return await probe_nodes(
        addressing,
        targets,
        key,
        # The spec may ask for more patience, never for less than the operator's own floor.
        timeout=max(settings.probe_timeout, cluster.spec.health_probe_timeout_in_milliseconds / 1000),
        concurrency=settings.probe_concurrency,
    )


class ClusterMemory(Generic[Remembered]):
    """What the operator remembers of each cluster between looks, kept by (namespace, name) with the
    uid it was seen for, so that a cluster made again under the same name starts afresh, and
    forgotten when the cluster is gone."""

    def __init__(self) -> None:
        self._seen: dict[tuple[str, str], tuple[str, Remembered]] = {}

    def recall(self, namespace: str, name: str, uid: str) -> Remembered | None:
        seen = self._seen.get((namespace, name))
        return seen[1] if seen is not None and seen[0] == uid else None

    def keep(self, namespace: str, name: str, uid: str, value: Remembered) -> None:
        self._seen[(namespace, name)] = (uid, value)

    def forget(self, namespace: str, name: str) -> None:
        self._seen.pop((namespace, name), None)


class CommitMemory(ClusterMemory[tuple[int, int]]):
    """The furthest commit seen of each cluster, as of the last look: its status has it only as of the
    last time anything went wrong or the leader's term changed (quorum/record.py says why)."""


class SilenceMemory(ClusterMemory[dict[tuple[str, int, datetime | None], datetime]]):
    """Since when each node has been silent, look after look: its /status while its /health answered
    ok, or both (it answered nothing at all). A clock no single probe has (quorum/decide.py's
    hung_members reads it). Kept per container run (its ordinal and start), so a restarted container
    starts afresh. An operator that restarts starts every clock again: at worst one more wait."""

    def stamp(
        self, namespace: str, name: str, uid: str, probes: list[NodeProbe], now: datetime
    ) -> list[NodeProbe]:
        """The probes with ``status_silent_since`` and ``unreachable_since`` filled in; a node that
        answered is forgotten."""
        before = self.recall(namespace, name, uid) or {}

        def since(what: str, probe: NodeProbe) -> tuple[tuple[str, int, datetime | None], datetime]:
            key = (what, probe.index, probe.running_since)
            return key, before.get(key, now)

        clocks = dict(
            [since("status", p) for p in probes if p.status_silent and p.health_ok is True]
            + [since("unreachable", p) for p in probes if not p.reachable]
        )
        self.keep(namespace, name, uid, clocks)
        return [
            replace(
                p,
                status_silent_since=clocks.get(("status", p.index, p.running_since)),
                unreachable_since=clocks.get(("unreachable", p.index, p.running_since)),
            )
            for p in probes
        ]
