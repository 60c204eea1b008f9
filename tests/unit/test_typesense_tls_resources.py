"""What a cluster's certificate must cover, the Certificate asking for one, and the copy the nodes mount."""

from __future__ import annotations

import base64
from datetime import UTC, datetime

from operator_testkit.pki import CertificateAuthority
from typesense_operator.resources import Cluster
from typesense_operator.resources.core import build_statefulset
from typesense_operator.resources.tls import (
    API_SCHEME_ANNOTATION,
    build_certificate,
    build_served_secret,
    ca_bundle,
    certificate_names,
    required_names,
    tls_env,
)
from typesense_operator.tls.check import Served, check_certificate

CLUSTER = Cluster.from_object(
    {
        "metadata": {"name": "search", "namespace": "shop", "uid": "u"},
        "spec": {"image": "typesense/typesense:27.1"},
    }
)


def test_the_required_names_are_the_client_service_and_every_node() -> None:
    assert required_names(CLUSTER, 3) == [
        "search-svc",
        "search-svc.shop",
        "search-svc.shop.svc",
        "search-svc.shop.svc.cluster.local",
        "search-sts-0.search-sts-svc.shop.svc",
        "search-sts-1.search-sts-svc.shop.svc",
        "search-sts-2.search-sts-svc.shop.svc",
    ]


def test_a_certificate_with_the_asked_names_covers_every_required_name_at_any_size() -> None:
    """The wildcard under the headless Service: scaling to 7 nodes needs no new certificate."""
    ca = CertificateAuthority.create()
    issued = ca.issue(*certificate_names(CLUSTER))
    served = check_certificate(issued.cert, issued.key, ca.pem, required_names(CLUSTER, 7), datetime.now(UTC))
    assert isinstance(served, Served), served


def test_the_certificate_asks_for_a_new_key_at_each_renewal_and_names_no_common_name() -> None:
    certificate = build_certificate(CLUSTER, "shop-ca")
    spec = certificate["spec"]
    assert certificate["metadata"]["ownerReferences"][0]["name"] == "search"
    assert spec["secretName"] == "search-tls"
    assert spec["issuerRef"] == {"name": "shop-ca", "kind": "Issuer", "group": "cert-manager.io"}
    assert spec["privateKey"]["rotationPolicy"] == "Always"
    assert "commonName" not in spec


def test_the_ca_bundle_keeps_the_previous_ca_while_a_new_one_takes_over() -> None:
    old, new = CertificateAuthority.create("old").pem, CertificateAuthority.create("new").pem
    assert ca_bundle(new, None).count(b"BEGIN CERTIFICATE") == 1
    both = ca_bundle(new, ca_bundle(old, None))
    assert both.count(b"BEGIN CERTIFICATE") == 2
    assert ca_bundle(new, both) == both, "each CA once"
    newer = CertificateAuthority.create("newer").pem
    assert ca_bundle(newer, both) == ca_bundle(newer, new), "one CA before the current one, no more"


def test_the_nodes_mount_a_copy_and_read_it_again_without_a_restart() -> None:
    secret = build_served_secret(CLUSTER, b"cert", b"key", b"ca")
    assert secret["metadata"]["name"] == "search-tls-served"
    assert secret["type"] == "kubernetes.io/tls"
    assert base64.b64decode(secret["data"]["tls.key"]) == b"key"
    assert {"name": "TYPESENSE_SSL_REFRESH_INTERVAL_SECONDS", "value": "30"} in tls_env(30)


def test_pods_that_serve_https_mount_the_copy_say_so_and_are_probed_by_the_kubelet_in_https() -> None:
    cluster = Cluster.from_object(
        {
            "metadata": {"name": "search", "namespace": "shop", "uid": "u"},
            "spec": {"image": "typesense/typesense:27.1", "tls": {"certificateSecret": {"name": "mine"}}},
        }
    )
    plain = build_statefulset(cluster, 3)["spec"]["template"]
    https = build_statefulset(cluster, 3, https=True)["spec"]["template"]
    assert "tls" not in [volume["name"] for volume in plain["spec"]["volumes"]]
    assert API_SCHEME_ANNOTATION not in (plain["metadata"].get("annotations") or {})
    assert https["metadata"]["annotations"][API_SCHEME_ANNOTATION] == "https"
    volume = next(v for v in https["spec"]["volumes"] if v["name"] == "tls")
    assert volume["secret"]["secretName"] == "search-tls-served", "never the user's Secret itself"
    (typesense,) = [c for c in https["spec"]["containers"] if c["name"] == "typesense"]
    env = {e["name"]: e.get("value") for e in typesense["env"]}
    assert env["TYPESENSE_SSL_CERTIFICATE"] == "/etc/typesense/tls/tls.crt"
    assert env["TYPESENSE_SSL_REFRESH_INTERVAL_SECONDS"] == "30"
    assert typesense["readinessProbe"]["httpGet"]["scheme"] == "HTTPS"
    assert typesense["livenessProbe"] == plain["spec"]["containers"][0]["livenessProbe"], (
        "a TCP check either way"
    )
