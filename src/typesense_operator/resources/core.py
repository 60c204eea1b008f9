"""Builders for the children every cluster has: key Secret, nodes list, Services, StatefulSet, PDB."""

from __future__ import annotations

import base64
import hashlib
import ipaddress
import json
from collections.abc import Mapping, Sequence
from typing import Any

from operator_core.podsecurity import restricted_container
from typesense_operator.resources.model import (
    API_KEY_DATA_KEY,
    DATA_DIR,
    NODELIST_DIR,
    NODELIST_KEY,
    Cluster,
    Manifest,
)
from typesense_operator.resources.tls import API_SCHEME_ANNOTATION, NodesTls, serve_https, trust_nodes

__all__ = [
    "CLAIM_TEMPLATE_NAME",
    "SERVER_CONFIGURATION_HASH",
    "TERMINATION_GRACE_SECONDS",
    "TYPESENSE_CONTAINER",
    "build_client_service",
    "build_generated_key_secret",
    "build_headless_service",
    "build_nodes_configmap",
    "build_pod_disruption_budget",
    "build_statefulset",
    "claim_template",
    "node_claim_name",
    "node_placement",
    "nodes_list",
    "security_context",
    "server_configuration_hash",
]

SERVER_CONFIGURATION_HASH = "ts.opentelekomcloud.com/server-configuration-hash"
"""Pod template annotation: a hash of the additionalServerConfiguration ConfigMap's content. Its pods
read that content once, at start (envFrom); a new hash is a new template, which rolls them."""

CLAIM_TEMPLATE_NAME = "data"
"""The StatefulSet's claim template: node N's claim is ``data-<statefulset>-N``."""

NODE = "node"
TYPESENSE_CONTAINER = "typesense"
"""The nodes' container that runs typesense-server."""
METRICS_PORT = 8908
# Used when spec.resources is not set: enough for a small index, bounded so one
# cluster cannot starve a node.
DEFAULT_RESOURCES: dict[str, Any] = {
    "requests": {"cpu": "100m", "memory": "256Mi"},
    "limits": {"cpu": "1", "memory": "1Gi"},
}


DEFAULT_METRICS_RESOURCES: dict[str, Any] = {
    "requests": {"cpu": "100m", "memory": "32Mi"},
    "limits": {"cpu": "100m", "memory": "64Mi"},
}
RESTRICTED_POD_SECURITY_CONTEXT: dict[str, Any] = {
    "runAsNonRoot": True,
    "runAsUser": 10000,
    "runAsGroup": 3000,
    "fsGroup": 2000,
    "fsGroupChangePolicy": "OnRootMismatch",
    "seccompProfile": {"type": "RuntimeDefault"},
}
"""The nodes' pod security context unless spec.securityContext.pod replaces it: the restricted Pod
Security Standard, with the Typesense image's user."""


def build_generated_key_secret(cluster: Cluster, api_key: str) -> Manifest | None:
    """The generated admin key Secret, or None when the user brings their own."""
    if cluster.spec.admin_api_key is not None:
        return None
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": cluster.metadata(cluster.generated_secret_name, "admin-key"),
        "type": "Opaque",
        "data": {API_KEY_DATA_KEY: base64.b64encode(api_key.encode()).decode()},
    }


def nodes_list(cluster: Cluster, members: Sequence[int], addresses: Mapping[int, str] | None = None) -> str:
    """Typesense's nodes file: the member pods' raft endpoints, comma-separated.

    A member whose pod has an IPv4 address (``addresses``, by ordinal) is written by that address, the
    others by their headless-Service DNS name, after every address. Typesense (0.24 to 27.x at least)
    keeps a name it cannot resolve as it is, and braft's parser stops at it: the configuration is the
    entries before it. A leader then changes the raft membership to that prefix, and to an empty one
    when the first entry is a pod being replaced, which aborts the leader (braft's replicator refuses
    an empty configuration) and leaves every follower in a joint configuration that names no live
    address, where no election can ever succeed. Addresses always parse; a name only stands for a pod
    that has no address yet (nothing is lost when it is dropped) and makes a new pod reachable as soon
    as its name resolves, before the list names its address.
    """
    known = addresses or {}
    by_address = [index for index in members if _raft_address(known.get(index))]
    by_name = [index for index in members if index not in by_address]
    ports = f"{cluster.spec.peering_port}:{cluster.spec.api_port}"
    endpoints = [f"{known[index]}:{ports}" for index in by_address]
    return ",".join(endpoints + [cluster.pod_endpoint(index) for index in by_name])


def _raft_address(ip: str | None) -> bool:
    """Whether braft can take ``ip`` as a peer's host: an IPv4 address (it splits peers at colons)."""
    try:
        return ip is not None and ipaddress.ip_address(ip).version == 4
    except ValueError:
        return False


def build_nodes_configmap(
    cluster: Cluster, members: Sequence[int], addresses: Mapping[int, str] | None = None
) -> Manifest:
    """The raft membership. Quorum recovery narrows it to one survivor and grows it back."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": cluster.metadata(cluster.nodes_configmap_name, NODE),
        "data": {NODELIST_KEY: nodes_list(cluster, members, addresses)},
    }


def _ports(cluster: Cluster) -> list[dict[str, Any]]:
    spec = cluster.spec
    return [
        {"name": "http", "port": spec.api_port, "targetPort": spec.api_port, "protocol": "TCP"},
        {"name": "peering", "port": spec.peering_port, "targetPort": spec.peering_port, "protocol": "TCP"},
    ]


def build_headless_service(cluster: Cluster) -> Manifest:
    """Stable DNS names for raft peers, published for not-ready pods too: a starting node must be found."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": cluster.metadata(cluster.headless_service_name, NODE),
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": cluster.selector(NODE),
            "ports": _ports(cluster),
        },
    }


def build_client_service(cluster: Cluster) -> Manifest:
    """The REST API for clients, served by ready nodes only; its type and annotations from the spec."""
    spec, service = cluster.spec, cluster.spec.service
    annotations = {**(spec.service_annotations or {}), **((service and service.annotations) or {})}
    metadata = cluster.metadata(cluster.client_service_name, NODE)
    if annotations:
        metadata["annotations"] = annotations
    service_spec: dict[str, Any] = {
        "type": service.type if service else "ClusterIP",
        "selector": cluster.selector(NODE),
        "ports": _ports(cluster)[:1],
    }
    if service and service.external_traffic_policy:
        service_spec["externalTrafficPolicy"] = service.external_traffic_policy
    return {"apiVersion": "v1", "kind": "Service", "metadata": metadata, "spec": service_spec}


def _typesense_env(cluster: Cluster) -> list[dict[str, Any]]:
    """Settings from the spec; env wins over envFrom, so they override additionalServerConfiguration."""
    spec = cluster.spec
    env: list[dict[str, Any]] = [
        {
            "name": "TYPESENSE_API_KEY",
            "valueFrom": {"secretKeyRef": {"name": cluster.admin_key_secret_name, "key": API_KEY_DATA_KEY}},
        },
        {"name": "TYPESENSE_NODES", "value": f"{NODELIST_DIR}/{NODELIST_KEY}"},
        {"name": "TYPESENSE_DATA_DIR", "value": DATA_DIR},
        {"name": "TYPESENSE_API_PORT", "value": str(spec.api_port)},
        {"name": "TYPESENSE_PEERING_PORT", "value": str(spec.peering_port)},
        {"name": "TYPESENSE_PEERING_ADDRESS", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        {"name": "TYPESENSE_RESET_PEERS_ON_ERROR", "value": str(spec.reset_peers_on_error).lower()},
        {"name": "TYPESENSE_ENABLE_CORS", "value": str(spec.enable_cors).lower()},
    ]
    if spec.cors_domains:
        env.append({"name": "TYPESENSE_CORS_DOMAINS", "value": spec.cors_domains})
    return env


def _typesense_container(cluster: Cluster) -> dict[str, Any]:
    spec = cluster.spec
    container: dict[str, Any] = {
        "name": TYPESENSE_CONTAINER,
        "image": spec.image,
        "env": _typesense_env(cluster),
        "ports": [
            {"name": "http", "containerPort": spec.api_port, "protocol": "TCP"},
            {"name": "peering", "containerPort": spec.peering_port, "protocol": "TCP"},
        ],
        "volumeMounts": [
            {"name": CLAIM_TEMPLATE_NAME, "mountPath": DATA_DIR},
            {"name": "nodeslist", "mountPath": NODELIST_DIR},
        ],
        "resources": spec.resources or DEFAULT_RESOURCES,
        # /health is 503 while a node loads or lags: not ready, but alive.
        "readinessProbe": {
            "httpGet": {"path": "/health", "port": spec.api_port},
            "periodSeconds": 5,
            "timeoutSeconds": 3,
            "failureThreshold": 3,
        },
        # Until the API port is open (typesense-server opens it before it loads its data): up to
        # 5 minutes, and the liveness probe only after it.
        "startupProbe": {
            "tcpSocket": {"port": spec.api_port},
            "periodSeconds": 2,
            "timeoutSeconds": 2,
            "failureThreshold": 150,
        },
        # Liveness only asks whether the server takes connections at all, so a node loading a large
        # data set is never killed (that would restart the load, forever). A process that takes none
        # for 30 s is hung: a leader thawed after a freeze has been seen to stop accepting for minutes
        # (its connection backlog full); its kill waits the pod's short grace (TERMINATION_GRACE_SECONDS).
        # 30 s leave the quorum's own 20 s grace to act first on a hung majority.
        "livenessProbe": {
            "tcpSocket": {"port": spec.api_port},
            "periodSeconds": 10,
            "timeoutSeconds": 5,
            "failureThreshold": 3,
        },
        "securityContext": security_context(cluster, "typesense") or restricted_container(),
    }
    if spec.additional_server_configuration is not None:
        container["envFrom"] = [{"configMapRef": {"name": spec.additional_server_configuration.name}}]
    return container


TERMINATION_GRACE_SECONDS = 10
"""How long a node's pod may take to stop before its kubelet kills it. typesense-server stops within 2 s
of SIGTERM (every stop that ended by itself in a 30-minute soak), except when its shutdown never ends:
0.24.1 counts a leader's writes in flight and does not count down a write whose raft task failed (a
term change, a lost leadership), then waits for that count to reach zero, forever, still leading and
sending heartbeats, so that no follower elects another until the kill. A kill loses nothing
acknowledged (the raft log is on disk and is replayed at the start). The grace must be short from the
start: a real kubelet keeps the grace it began a stop with, and a second delete with a shorter one
changes nothing (kubernetes/kubernetes#83916)."""


WAIT_FOR_ADDRESSES_CONTAINER = "wait-for-addresses"
WAIT_FOR_ADDRESSES_SECONDS = 30
WAIT_FOR_OWN_ADDRESS_SECONDS = 5
# typesense-server (0.24 at least) reads its nodes file once at start and, when an entry does not
# resolve, tries again only 30 s later. A new pod has no address when its first list is written, so
# the list names it by its DNS name, which its Service's record serves only a moment after the pod
# has its address, and after typesense-server has started (about 100 ms). So the pod waits here,
# before the server starts, until the list names every member by address (a name holds letters, an
# IPv4 address none), which the operator writes as soon as the pods have theirs; never longer than
# WAIT_FOR_ADDRESSES_SECONDS: a member that cannot be placed must not keep the others from starting.
# A list of addresses that does not name this pod (POD_IP) is waited on for up to
# WAIT_FOR_OWN_ADDRESS_SECONDS more: a pod made again (all pods deleted) first mounts the list of the
# pods before it, all addresses and none of them its own, and the list that names it (by name, while
# a pod has no address yet) comes a moment later, after an end at the first list without letters
# (seen on real nodes: the server met its own name and started 30 s late, 2 times in 13). A list that
# rightly leaves it out (a downgrade's survivor alone) costs those few seconds.
_WAIT_FOR_ADDRESSES = """\
nodes="$1"; tries=$(( $2 * 5 )); strange=$(( $3 * 5 ))
while [ "$tries" -gt 0 ]; do
  if [ -s "$nodes" ] && ! grep -q '[A-Za-z]' "$nodes"; then
    case ",$(cat "$nodes")," in *",$POD_IP:"*) exit 0 ;; esac
    strange=$(( strange - 1 )); [ "$strange" -gt 0 ] || exit 0
  fi
  tries=$(( tries - 1 )); sleep 0.2
done
exit 0
"""


def _wait_for_addresses_container(cluster: Cluster) -> dict[str, Any]:
    """An init container of the Typesense image (its shell, grep and sleep): until the list names every
    member by address, this pod among them (above), at most WAIT_FOR_ADDRESSES_SECONDS."""
    return {
        "name": WAIT_FOR_ADDRESSES_CONTAINER,
        "image": cluster.spec.image,
        "command": ["/bin/sh", "-c", _WAIT_FOR_ADDRESSES, "wait-for-addresses",
                    f"{NODELIST_DIR}/{NODELIST_KEY}", str(WAIT_FOR_ADDRESSES_SECONDS),
                    str(WAIT_FOR_OWN_ADDRESS_SECONDS)],
        "env": [{"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
        "volumeMounts": [{"name": "nodeslist", "mountPath": NODELIST_DIR}],
        "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"memory": "32Mi"}},
        "securityContext": security_context(cluster, "typesense") or restricted_container(),
    }  # fmt: skip


def _metrics_container(cluster: Cluster) -> dict[str, Any] | None:
    metrics = cluster.spec.metrics
    if metrics is None:
        return None
    return {
        "name": "metrics-exporter",
        "image": metrics.image,
        "env": [
            {
                "name": "TYPESENSE_API_KEY",
                "valueFrom": {
                    "secretKeyRef": {"name": cluster.admin_key_secret_name, "key": API_KEY_DATA_KEY}
                },
            },
            {"name": "TYPESENSE_HOST", "value": "localhost"},
            {"name": "TYPESENSE_PORT", "value": str(cluster.spec.api_port)},
            {"name": "TYPESENSE_PROTOCOL", "value": "http"},
            {"name": "TYPESENSE_CLUSTER", "value": cluster.name},
            {"name": "LOG_LEVEL", "value": str(metrics.log_level)},
        ],
        "ports": [{"name": "metrics", "containerPort": METRICS_PORT, "protocol": "TCP"}],
        "resources": metrics.resources or DEFAULT_METRICS_RESOURCES,
        "securityContext": security_context(cluster, "metrics") or restricted_container(),
    }


def _exporter_over_https(
    cluster: Cluster, tls: NodesTls, pod_spec: dict[str, Any], exporter: dict[str, Any]
) -> None:
    """The exporter asks its own node over HTTPS, by the name the node's certificate holds for it
    (``localhost`` is in no certificate), and verifies it with the nodes' CA (Go reads SSL_CERT_FILE)."""
    env = {variable["name"]: variable for variable in exporter["env"]}
    pod_name = {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}
    # Kubernetes expands $(POD_NAME) in a value when POD_NAME comes before it.
    env["TYPESENSE_HOST"]["value"] = f"$(POD_NAME).{cluster.headless_service_name}.{cluster.namespace}.svc"
    env["TYPESENSE_PROTOCOL"]["value"] = "https"
    exporter["env"] = [pod_name, *env.values()]
    trust_nodes(cluster, tls, pod_spec, exporter, ("SSL_CERT_FILE",))


def security_context(cluster: Cluster, which: str) -> dict[str, Any] | None:
    """The spec's securityContext.<which>, which replaces the operator's own; None without it."""
    overrides = cluster.spec.security_context
    chosen: dict[str, Any] | None = getattr(overrides, which) if overrides is not None else None
    return chosen


def server_configuration_hash(config_map: Mapping[str, Any] | None) -> str | None:
    """A hash of a ConfigMap's content (``data`` and ``binaryData``); None when it does not exist."""
    if config_map is None:
        return None
    content = {key: config_map.get(key) or {} for key in ("data", "binaryData")}
    return hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()[:16]


def claim_template(cluster: Cluster, claim_size: str | None = None) -> Manifest:
    """The claim each node gets (``data-<statefulset>-<ordinal>``), of ``claim_size`` or the spec's size."""
    storage = cluster.spec.storage
    metadata: dict[str, Any] = {"name": CLAIM_TEMPLATE_NAME, "labels": cluster.labels(NODE)}
    if storage.annotations:
        metadata["annotations"] = dict(storage.annotations)
    return {
        "metadata": metadata,
        "spec": {
            "accessModes": [storage.access_mode],
            "storageClassName": storage.storage_class_name,
            "resources": {"requests": {"storage": claim_size or storage.size}},
        },
    }


def node_placement(cluster: Cluster) -> dict[str, Any]:
    """Where the nodes may run, as the spec says (its nodeSelector, tolerations and affinity, those set):
    for their pods, and for a Job whose volume they will use."""
    spec = cluster.spec
    chosen = (
        ("nodeSelector", spec.node_selector),
        ("tolerations", spec.tolerations),
        ("affinity", spec.affinity),
    )
    return {field: value for field, value in chosen if value}


def node_claim_name(cluster: Cluster, index: int) -> str:
    """The claim the StatefulSet gives node ``index``."""
    return f"{CLAIM_TEMPLATE_NAME}-{cluster.statefulset_name}-{index}"


def build_statefulset(
    cluster: Cluster,
    replicas: int,
    claim_size: str | None = None,
    configuration_hash: str | None = None,
    *,
    tls: NodesTls | None = None,
) -> Manifest:
    """The Typesense nodes, ``replicas`` pods.

    ``claim_size`` is the size its claim template keeps (the live one's, while the volumes cannot
    grow to spec.storage.size); the spec's by default. ``configuration_hash`` is
    :func:`server_configuration_hash` of the additionalServerConfiguration ConfigMap, when it exists:
    an edit of that ConfigMap alone changes the pod template, and so reaches every node. With
    ``tls`` (spec.tls, once its certificate was checked), the nodes serve their API over TLS, and the
    exporter sidecar verifies its node with the nodes' CA.
    """
    spec = cluster.spec
    typesense = _typesense_container(cluster)
    containers = [typesense]
    sidecar = _metrics_container(cluster)
    if sidecar is not None:
        containers.append(sidecar)
    pod_spec: dict[str, Any] = {
        "securityContext": security_context(cluster, "pod") or RESTRICTED_POD_SECURITY_CONTEXT,
        "terminationGracePeriodSeconds": TERMINATION_GRACE_SECONDS,
        "initContainers": [_wait_for_addresses_container(cluster)],
        "containers": containers,
        "volumes": [{"name": "nodeslist", "configMap": {"name": cluster.nodes_configmap_name}}],
    }
    if tls is not None:
        serve_https(cluster, pod_spec, typesense)
        if sidecar is not None:
            _exporter_over_https(cluster, tls, pod_spec, sidecar)
    pod_spec.update(node_placement(cluster))
    for field, value in (
        ("topologySpreadConstraints", spec.topology_spread_constraints),
        ("priorityClassName", spec.priority_class_name),
    ):
        if value:
            pod_spec[field] = value
    statefulset_annotations = spec.stateful_set_annotations or {}
    pod_annotations = {
        **(statefulset_annotations if spec.pods_inherit_stateful_set_annotations else {}),
        **(spec.pod_annotations or {}),
    }
    if configuration_hash is not None:
        pod_annotations[SERVER_CONFIGURATION_HASH] = configuration_hash
    if tls is not None:
        pod_annotations[API_SCHEME_ANNOTATION] = "https"
    template_metadata: dict[str, Any] = {"labels": cluster.labels(NODE)}
    if pod_annotations:
        template_metadata["annotations"] = pod_annotations
    metadata = cluster.metadata(cluster.statefulset_name, NODE)
    if statefulset_annotations:
        metadata["annotations"] = dict(statefulset_annotations)
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": metadata,
        "spec": {
            "replicas": replicas,
            "serviceName": cluster.headless_service_name,
            # Raft needs its peers up together to elect a leader; ordered start would deadlock.
            "podManagementPolicy": "Parallel",
            # The operator rolls a new template itself, node by node, seeing raft (quorum/roll.py).
            "updateStrategy": {"type": "OnDelete"},
            "selector": {"matchLabels": cluster.selector(NODE)},
            "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Retain", "whenScaled": "Retain"},
            "template": {"metadata": template_metadata, "spec": cluster.pulling(pod_spec)},
            "volumeClaimTemplates": [claim_template(cluster, claim_size)],
        },
    }


def build_pod_disruption_budget(cluster: Cluster) -> Manifest:
    """One node at a time may be evicted: a 3-node cluster keeps its majority through a drain."""
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": cluster.metadata(cluster.pdb_name, NODE),
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": cluster.selector(NODE)}},
    }
