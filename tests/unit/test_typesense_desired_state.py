"""Every child of a TypesenseCluster from one pure function of its spec and what its reconcile observed
(:func:`typesense_operator.resources.desired_state`): the optional kinds only where served, the
certificate's children, the generated key created once, and the new cluster that waits for its
certificate."""

from __future__ import annotations

from typing import Any

import pytest

from samples import GO_OPERATOR_0_4_1_FIELDS
from typesense_operator.resources import (
    PRUNABLE_KINDS,
    Cluster,
    DesiredState,
    Observed,
    desired_children,
    desired_state,
    gateway_children,
)
from typesense_operator.resources.tls import CertificateCopy, NodesTls, served_secret_name

POD_MONITOR = ("monitoring.coreos.com/v1", "PodMonitor")
HTTP_ROUTE = ("gateway.networking.k8s.io/v1", "HTTPRoute")
REFERENCE_GRANT = ("gateway.networking.k8s.io/v1beta1", "ReferenceGrant")
BACKEND_TLS_POLICY = ("gateway.networking.k8s.io/v1", "BackendTLSPolicy")
CERTIFICATE = ("cert-manager.io/v1", "Certificate")
EVERY_KIND = frozenset({POD_MONITOR, HTTP_ROUTE, REFERENCE_GRANT, BACKEND_TLS_POLICY, CERTIFICATE})
TLS = NodesTls(b"-----BEGIN CERTIFICATE-----\nCA\n-----END CERTIFICATE-----\n")
COPY = CertificateCopy(b"cert", b"key")


def cluster(*, tls: dict[str, Any] | None = None) -> Cluster:
    spec: dict[str, Any] = {
        "image": "typesense/typesense:27.1",
        "metrics": {"release": "promstack"},
        "httpRoutes": GO_OPERATOR_0_4_1_FIELDS["httpRoutes"],
    }
    if tls is not None:
        spec["tls"] = tls
    metadata = {"name": "search", "namespace": "shop", "uid": "u"}
    return Cluster.from_object({"metadata": metadata, "spec": spec})


def kinds(state: DesiredState) -> list[str]:
    return [m["kind"] for m in state.children]


def extra_kinds(state: DesiredState, base: Cluster, tls: NodesTls | None = None) -> list[str]:
    """The kinds beyond :func:`desired_children`'s."""
    return kinds(state)[len(desired_children(base, tls=tls)) :]


def test_every_optional_kind_served_every_child_is_desired_and_the_generated_key_is_created_once() -> None:
    issued = cluster(tls={"issuerRef": {"name": "shop-ca"}})
    state = desired_state(
        issued,
        Observed(tls=TLS, certificate_copy=COPY, served=EVERY_KIND, generated_key="generated-key-value"),
    )
    assert extra_kinds(state, issued, TLS) == [
        "PodMonitor",
        "HTTPRoute",
        "ReferenceGrant",
        "BackendTLSPolicy",
        "Certificate",
        "Secret",
    ]
    assert state.children[-1]["metadata"]["name"] == served_secret_name("search")
    assert state.prunable == PRUNABLE_KINDS
    ((key_secret, why),) = state.create_once
    assert (key_secret["kind"], why) == ("Secret", "a generated admin API key")


def test_nothing_optional_is_desired_where_its_crd_is_not_served() -> None:
    issued = cluster(tls={"issuerRef": {"name": "shop-ca"}})
    state = desired_state(issued, Observed(tls=TLS, certificate_copy=COPY))
    assert extra_kinds(state, issued, TLS) == ["Secret"]
    assert state.create_once == []


@pytest.mark.parametrize(
    ("tls", "served", "applied", "missing"),
    [
        (None, {HTTP_ROUTE, REFERENCE_GRANT}, ["HTTPRoute", "ReferenceGrant"], []),
        (None, {HTTP_ROUTE}, ["HTTPRoute"], ["ReferenceGrant (gateway.networking.k8s.io/v1beta1)"]),
        (TLS, EVERY_KIND, ["HTTPRoute", "ReferenceGrant", "BackendTLSPolicy"], []),
        # HTTPS nodes: no route until the Gateway can verify them; the grant goes on.
        (
            TLS,
            {HTTP_ROUTE, REFERENCE_GRANT},
            ["ReferenceGrant"],
            ["BackendTLSPolicy (gateway.networking.k8s.io/v1)"],
        ),
    ],
)
def test_gateway_children_are_those_served_and_no_route_to_https_nodes_without_its_policy(
    tls: NodesTls | None, served: set[tuple[str, str]], applied: list[str], missing: list[str]
) -> None:
    manifests, not_served = gateway_children(cluster(), tls, frozenset(served))
    assert [m["kind"] for m in manifests] == applied
    assert not_served == missing


@pytest.mark.parametrize(
    ("tls", "expected"),
    [({"issuerRef": {"name": "shop-ca"}}, ["Certificate"]), ({"certificateSecret": {"name": "mine"}}, [])],
)
def test_a_new_cluster_that_waits_for_its_certificate_gets_only_the_certificate_and_nothing_is_pruned(
    tls: dict[str, Any], expected: list[str]
) -> None:
    state = desired_state(
        cluster(tls=tls), Observed(served=EVERY_KIND, certificate_only=True, generated_key="k")
    )
    assert kinds(state) == expected
    assert state.prunable == ()
    assert state.create_once == [], "the generated key is created with the first children, not before"
