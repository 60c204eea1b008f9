"""Pure builders from a TypesenseCluster spec to the manifests of its children.

No API calls and no framework here (import-linter checks it). A builder that
returns None means "this object should not exist"; :func:`stale_children`
tells the controller which existing children to delete for that reason.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from operator_core import children
from operator_core.cache import KindRef
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
from typesense_operator.resources.metrics import POD_MONITOR_KIND, PODMONITOR_API_VERSION, build_pod_monitor
from typesense_operator.resources.model import API_KEY_DATA_KEY, Cluster, Manifest
from typesense_operator.resources.routes import (
    BACKENDTLSPOLICY_API_VERSION,
    HTTPROUTE_API_VERSION,
    REFERENCEGRANT_API_VERSION,
    build_backend_tls_policy,
    build_http_routes,
    build_reference_grants,
    gateway_children,
)
from typesense_operator.resources.scrapers import build_scraper_cronjobs, invalid_scraper_configs
from typesense_operator.resources.tls import (
    CERTIFICATE_KIND,
    CertificateCopy,
    NodesTls,
    build_ca_configmap,
    build_certificate,
    build_served_secret,
)

__all__ = [
    "API_KEY_DATA_KEY",
    "BACKENDTLSPOLICY_API_VERSION",
    "CLAIM_TEMPLATE_NAME",
    "HTTPROUTE_API_VERSION",
    "PODMONITOR_API_VERSION",
    "POD_MONITOR_KIND",
    "PRUNABLE_ELSEWHERE",
    "PRUNABLE_KINDS",
    "REFERENCEGRANT_API_VERSION",
    "SERVER_CONFIGURATION_HASH",
    "Cluster",
    "DesiredState",
    "Manifest",
    "Observed",
    "build_backend_tls_policy",
    "build_generated_key_secret",
    "build_http_routes",
    "build_pod_monitor",
    "build_reference_grants",
    "desired_children",
    "desired_state",
    "gateway_children",
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
    POD_MONITOR_KIND,
    (HTTPROUTE_API_VERSION, "HTTPRoute"),
    # spec.tls or the last route removed.
    (BACKENDTLSPOLICY_API_VERSION, "BackendTLSPolicy"),
    # spec.tls.issuerRef removed, or replaced by a Secret of the user's.
    CERTIFICATE_KIND,
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


@dataclass(frozen=True)
class Observed:
    """What one reconcile saw that the children depend on, besides the spec: the controller's steps fill
    it, and :func:`desired_state` turns it and the spec into every child."""

    members: Sequence[int] | None = None
    """Pod ordinals in the nodes list (None: every desired node), see :func:`desired_children`."""
    claim_size: str | None = None
    configuration_hash: str | None = None
    tls: NodesTls | None = None
    """The nodes serve HTTPS, with this CA bundle (None: plain HTTP)."""
    certificate_copy: CertificateCopy | None = None
    """A certificate that passed the check this reconcile, for the nodes' Secret (None: the copy the
    nodes have stays as it is, or there is none)."""
    disruption_budget: bool = True
    addresses: Mapping[int, str] | None = None
    served: frozenset[KindRef] = frozenset()
    """The optional kinds whose CRDs the API server serves (PodMonitor, the Gateway API's, Certificate)."""
    generated_key: str | None = None
    """An admin key generated this reconcile, for the Secret created once with the children."""
    certificate_only: bool = False
    """A new cluster waits for its certificate: only cert-manager's Certificate is made meanwhile."""


@dataclass(frozen=True)
class DesiredState:
    """Every child of a cluster, and how to apply them."""

    children: list[Manifest]
    create_once: list[tuple[Manifest, str]] = field(default_factory=list)
    """Created, never applied (a generated key's Secret is never replaced), each with what it is for."""
    prunable: tuple[KindRef, ...] = PRUNABLE_KINDS
    """The kinds whose children no longer named are deleted."""


def desired_state(cluster: Cluster, observed: Observed) -> DesiredState:
    """Every child of ``cluster`` from its spec and what its reconcile observed: :func:`desired_children`,
    the PodMonitor and the Gateway API children where their CRDs are served, cert-manager's Certificate
    (spec.tls.issuerRef) and the nodes' copy of a checked certificate, and a generated key's Secret."""
    tls = cluster.spec.tls
    issuer = tls.issuer_ref if tls is not None else None
    certificate = (
        build_certificate(cluster, issuer.name, issuer.kind, issuer.group)
        if issuer is not None and CERTIFICATE_KIND in observed.served
        else None
    )
    if observed.certificate_only:
        # Nothing else exists yet, and nothing is pruned: the cluster's first pod waits for the certificate.
        return DesiredState([certificate] if certificate is not None else [], prunable=())
    children = desired_children(
        cluster,
        observed.members,
        observed.claim_size,
        observed.configuration_hash,
        tls=observed.tls,
        disruption_budget=observed.disruption_budget,
        addresses=observed.addresses,
    )
    monitor = build_pod_monitor(cluster)
    if monitor is not None and POD_MONITOR_KIND in observed.served:
        children.append(monitor)
    children.extend(gateway_children(cluster, observed.tls, observed.served)[0])
    if certificate is not None:
        children.append(certificate)
    if observed.certificate_copy is not None and observed.tls is not None:
        copy = observed.certificate_copy
        children.append(build_served_secret(cluster, copy.cert, copy.key, observed.tls.ca_bundle))
    key = observed.generated_key
    key_secret = build_generated_key_secret(cluster, key) if key is not None else None
    create_once = [(key_secret, "a generated admin API key")] if key_secret is not None else []
    return DesiredState(children, create_once)
