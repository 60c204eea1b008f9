"""Pure builders from a TypesenseCluster spec to the manifests of its children.

No API calls and no framework here (import-linter checks it). A builder that
returns None means "this object should not exist"; :func:`stale_children`
tells the controller which existing children to delete for that reason.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from operator_core import children
from typesense_operator.resources.core import (
    CLAIM_TEMPLATE_NAME,
    SERVER_CONFIGURATION_HASH,
    build_client_service,
    build_generated_key_secret,
    build_headless_service,
    build_nodes_configmap,
    build_pod_disruption_budget,
    build_statefulset,
    nodes_list,
    server_configuration_hash,
)
from typesense_operator.resources.ingress import (
    build_ingress,
    build_proxy_configmap,
    build_proxy_deployment,
    build_proxy_service,
    nginx_config,
)
from typesense_operator.resources.metrics import PODMONITOR_API_VERSION, build_pod_monitor
from typesense_operator.resources.model import API_KEY_DATA_KEY, Cluster, Manifest
from typesense_operator.resources.routes import (
    BACKENDTLSPOLICY_API_VERSION,
    HTTPROUTE_API_VERSION,
    REFERENCEGRANT_API_VERSION,
    build_backend_tls_policy,
    build_http_routes,
    build_reference_grants,
)
from typesense_operator.resources.scrapers import build_scraper_cronjobs, invalid_scraper_configs
from typesense_operator.resources.tls import CERTIFICATE_API_VERSION, NodesTls, build_ca_configmap

__all__ = [
    "API_KEY_DATA_KEY",
    "BACKENDTLSPOLICY_API_VERSION",
    "CLAIM_TEMPLATE_NAME",
    "HTTPROUTE_API_VERSION",
    "PODMONITOR_API_VERSION",
    "PRUNABLE_ELSEWHERE",
    "PRUNABLE_KINDS",
    "REFERENCEGRANT_API_VERSION",
    "SERVER_CONFIGURATION_HASH",
    "Cluster",
    "Manifest",
    "build_backend_tls_policy",
    "build_generated_key_secret",
    "build_http_routes",
    "build_pod_monitor",
    "build_reference_grants",
    "desired_children",
    "invalid_scraper_configs",
    "nginx_config",
    "nodes_list",
    "server_configuration_hash",
    "stale_children",
]

# Kinds whose objects may stop being wanted (a removed scraper, a dropped ingress or
# metrics spec). The StatefulSet, its PVCs and the key Secret are never pruned; the nodes' copy of the
# certificate goes only once no pod serves HTTPS (controller/cluster/tls.py).
PRUNABLE_KINDS: tuple[tuple[str, str], ...] = (
    ("v1", "ConfigMap"),
    ("v1", "Service"),
    ("apps/v1", "Deployment"),
    ("networking.k8s.io/v1", "Ingress"),
    ("batch/v1", "CronJob"),
    (PODMONITOR_API_VERSION, "PodMonitor"),
    (HTTPROUTE_API_VERSION, "HTTPRoute"),
    # spec.tls or the last route removed.
    (BACKENDTLSPOLICY_API_VERSION, "BackendTLSPolicy"),
    # spec.tls.issuerRef removed, or replaced by a Secret of the user's.
    (CERTIFICATE_API_VERSION, "Certificate"),
)
PRUNABLE_ELSEWHERE: tuple[tuple[str, str], ...] = ((REFERENCEGRANT_API_VERSION, "ReferenceGrant"),)
"""Prunable kinds whose objects live in other namespaces (a Gateway's), found by the owner-namespace label."""


def desired_children(
    cluster: Cluster,
    members: Sequence[int] | None = None,
    claim_size: str | None = None,
    configuration_hash: str | None = None,
    *,
    tls: NodesTls | None = None,
    disruption_budget: bool = True,
    addresses: Mapping[int, str] | None = None,
) -> list[Manifest]:
    """Every child applied on each reconcile, in apply order (config before its consumers).

    ``members`` are the pod ordinals in the nodes list: every desired node normally, fewer
    while quorum recovery runs; ``addresses`` their pods' IPs, by ordinal, where they have one
    (see :func:`nodes_list`). The StatefulSet always keeps ``spec.replicas`` pods, and
    ``claim_size`` in its claim template when given, and ``configuration_hash`` (of the
    additionalServerConfiguration ConfigMap) in its pod template (see :func:`build_statefulset`).
    The PodDisruptionBudget comes with ``disruption_budget`` (the controller decides when a cluster
    has something for it to guard). With ``tls`` the nodes serve their API over TLS (spec.tls, once
    its certificate was checked, :mod:`.tls`), and the proxy, the scrapers and the exporter verify
    them with the CA bundle the ConfigMap ``<cluster>-tls-ca`` holds.

    The generated key Secret (created once, never overwritten), the PodMonitor and the
    Gateway API routes (only where their CRDs exist) are decided by the controller.
    """
    optional = [
        build_proxy_configmap(cluster, tls),
        build_proxy_deployment(cluster, tls),
        build_proxy_service(cluster),
        build_ingress(cluster),
    ]
    replicas = cluster.spec.replicas
    return [
        build_nodes_configmap(cluster, range(replicas) if members is None else members, addresses),
        build_headless_service(cluster),
        build_client_service(cluster),
        *([build_ca_configmap(cluster, tls)] if tls is not None else []),
        build_statefulset(cluster, replicas, claim_size, configuration_hash, tls=tls),
        *([build_pod_disruption_budget(cluster)] if disruption_budget else []),
        *(m for m in optional if m is not None),
        *build_scraper_cronjobs(cluster, tls),
    ]


def stale_children(desired: Iterable[Manifest], live: Iterable[Manifest]) -> list[Manifest]:
    """Live children of a :data:`PRUNABLE_KINDS` kind that no desired manifest names."""
    return children.stale_children(desired, live, PRUNABLE_KINDS)
