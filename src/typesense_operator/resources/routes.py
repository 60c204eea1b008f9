"""Builders for the Gateway API HTTPRoutes (spec.httpRoutes) and their ReferenceGrants.

Each enabled entry becomes an HTTPRoute ``<cluster>-<name>`` in the cluster's
namespace, attached to the Gateway its ``parentRef`` names and sending every
request that matches its path to the client Service. With ``referenceGrant``
and a Gateway in another namespace, a ReferenceGrant in the Gateway's namespace
lets the routes of the cluster's namespace refer to that Gateway (the Go
operator's object, name and meaning). An object in another namespace cannot
be owned, so the grant carries no owner reference: it is found by its labels,
the owner's namespace among them, and removed by the controller. With TLS on the nodes
(spec.tls), a BackendTLSPolicy tells the Gateway to speak HTTPS to them and to verify them.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from operator_core.children import OWNER_NAMESPACE_LABEL
from typesense_operator.api.v1alpha1 import HttpRouteSpec
from typesense_operator.resources.model import Cluster, Manifest
from typesense_operator.resources.tls import NodesTls, ca_configmap_name

__all__ = [
    "BACKENDTLSPOLICY_API_VERSION",
    "GATEWAY_GROUP",
    "HTTPROUTE_API_VERSION",
    "REFERENCEGRANT_API_VERSION",
    "build_backend_tls_policy",
    "build_http_routes",
    "build_reference_grants",
    "gateway_children",
]

GATEWAY_GROUP = "gateway.networking.k8s.io"
HTTPROUTE_API_VERSION = f"{GATEWAY_GROUP}/v1"
REFERENCEGRANT_API_VERSION = f"{GATEWAY_GROUP}/v1beta1"
"""ReferenceGrant is served as v1beta1 only (Gateway API v1.4)."""
BACKENDTLSPOLICY_API_VERSION = f"{GATEWAY_GROUP}/v1"
ROUTE = "route"


def _enabled(cluster: Cluster) -> list[HttpRouteSpec]:
    return [route for route in cluster.spec.http_routes or [] if route.enabled]


def _route_name(cluster: Cluster, route: HttpRouteSpec) -> str:
    return f"{cluster.name}-{route.name}"


def _gateway_namespace(cluster: Cluster, route: HttpRouteSpec) -> str:
    return route.parent_ref.namespace or cluster.namespace


def build_http_routes(cluster: Cluster) -> list[Manifest]:
    """One HTTPRoute per enabled entry of spec.httpRoutes."""
    routes = []
    for route in _enabled(cluster):
        metadata = cluster.metadata(_route_name(cluster, route), ROUTE)
        metadata["labels"] = {**(route.labels or {}), **metadata["labels"]}
        if route.annotations:
            metadata["annotations"] = dict(route.annotations)
        parent: dict[str, Any] = {
            "group": GATEWAY_GROUP,
            "kind": "Gateway",
            "name": route.parent_ref.name,
            "namespace": _gateway_namespace(cluster, route),
        }
        if route.parent_ref.section:
            parent["sectionName"] = route.parent_ref.section
        spec: dict[str, Any] = {
            "parentRefs": [parent],
            "rules": [
                {
                    "matches": [{"path": {"type": route.path_type, "value": route.path}}],
                    "backendRefs": [
                        {
                            "group": "",
                            "kind": "Service",
                            "name": cluster.client_service_name,
                            "port": cluster.spec.api_port,
                            "weight": 1,
                        }
                    ],
                }
            ],
        }
        if route.hostnames:
            spec["hostnames"] = list(route.hostnames)
        routes.append(
            {"apiVersion": HTTPROUTE_API_VERSION, "kind": "HTTPRoute", "metadata": metadata, "spec": spec}
        )
    return routes


def build_reference_grants(cluster: Cluster) -> list[Manifest]:
    """A ReferenceGrant for each enabled entry with referenceGrant whose Gateway is in another namespace."""
    grants = []
    for route in _enabled(cluster):
        namespace = _gateway_namespace(cluster, route)
        if not route.reference_grant or namespace == cluster.namespace:
            continue
        labels = {**cluster.labels(ROUTE), OWNER_NAMESPACE_LABEL: cluster.namespace}
        grants.append(
            {
                "apiVersion": REFERENCEGRANT_API_VERSION,
                "kind": "ReferenceGrant",
                "metadata": {
                    "name": f"{_route_name(cluster, route)}-reference-grant",
                    "namespace": namespace,
                    "labels": labels,
                },
                "spec": {
                    "from": [{"group": GATEWAY_GROUP, "kind": "HTTPRoute", "namespace": cluster.namespace}],
                    "to": [{"group": GATEWAY_GROUP, "kind": "Gateway", "name": route.parent_ref.name}],
                },
            }
        )
    return grants


def build_backend_tls_policy(cluster: Cluster, tls: NodesTls | None) -> Manifest | None:
    """With TLS on the nodes and a route, a BackendTLSPolicy on the client Service: the Gateway speaks
    HTTPS to the nodes and verifies them for the Service's name with the nodes' CA (the ConfigMap
    ``<cluster>-tls-ca``), or the system's CAs for a publicly trusted certificate."""
    if tls is None or not _enabled(cluster):
        return None
    validation: dict[str, Any] = {"hostname": f"{cluster.client_service_name}.{cluster.namespace}.svc"}
    if tls.ca_bundle:
        reference = {"group": "", "kind": "ConfigMap", "name": ca_configmap_name(cluster.name)}
        validation["caCertificateRefs"] = [reference]
    else:
        validation["wellKnownCACertificates"] = "System"
    return {
        "apiVersion": BACKENDTLSPOLICY_API_VERSION,
        "kind": "BackendTLSPolicy",
        "metadata": cluster.metadata(f"{cluster.name}-backend-tls", ROUTE),
        "spec": {
            "targetRefs": [{"group": "", "kind": "Service", "name": cluster.client_service_name}],
            "validation": validation,
        },
    }


def gateway_children(
    cluster: Cluster, tls: NodesTls | None, served: Collection[tuple[str, str]]
) -> tuple[list[Manifest], list[str]]:
    """The Gateway API children to apply, of the kinds in ``served`` (whose CRDs the API server serves),
    and the kinds the spec needs that are not served. A kind that is served is applied, not held back
    for want of another, except routes to HTTPS nodes without their BackendTLSPolicy: a Gateway would
    speak plain HTTP to them, so no route until it can verify them."""
    routes, grants = build_http_routes(cluster), build_reference_grants(cluster)
    policy = build_backend_tls_policy(cluster, tls)
    applied: list[Manifest] = []
    missing = []
    for manifests in (routes, grants, [policy] if policy is not None else []):
        if not manifests:
            continue
        api_version, kind = manifests[0]["apiVersion"], manifests[0]["kind"]
        if (api_version, kind) in served:
            applied.extend(manifests)
        else:
            missing.append(f"{kind} ({api_version})")
    if policy is not None and policy not in applied:
        applied = [m for m in applied if m["kind"] != "HTTPRoute"]
    return applied, missing
