"""What a cluster's certificate must cover, the Certificate asking for one, and the copy the nodes mount."""

from __future__ import annotations

import base64
from datetime import UTC, datetime

from operator_testkit.pki import CertificateAuthority
from typesense_operator.resources import Cluster, desired_children, nginx_config
from typesense_operator.resources.core import build_statefulset
from typesense_operator.resources.routes import build_backend_tls_policy
from typesense_operator.resources.tls import (
    API_SCHEME_ANNOTATION,
    NODES_CA_ANNOTATION,
    NodesTls,
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
    https = build_statefulset(cluster, 3, tls=NodesTls(b"CA"))["spec"]["template"]
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


CLIENTS = Cluster.from_object(
    {
        "metadata": {"name": "search", "namespace": "shop", "uid": "u"},
        "spec": {
            "image": "typesense/typesense:27.1",
            "tls": {"certificateSecret": {"name": "mine"}},
            "ingress": {"host": "search.example.com", "ingressClassName": "nginx"},
            "metrics": {"release": "prometheus"},
            "scrapers": [{"name": "docs", "schedule": "@daily", "host": "docs.example.com"}],
            "httpRoutes": [{"name": "public", "parentRef": {"name": "gateway"}}],
        },
    }
)
CA_BUNDLE = b"-----BEGIN CERTIFICATE-----\nCA\n-----END CERTIFICATE-----\n"


def _children(tls: NodesTls | None) -> dict[str, dict]:
    return {f"{m['kind']}/{m['metadata']['name']}": m for m in desired_children(CLIENTS, tls=tls)}


def _env(container: dict) -> dict[str, str | None]:
    return {variable["name"]: variable.get("value") for variable in container.get("env", [])}


def _mounts_the_ca(pod_spec: dict, container: dict) -> bool:
    volume = {"name": "nodes-ca", "configMap": {"name": "search-tls-ca", "optional": True}}
    mount = {"name": "nodes-ca", "mountPath": "/etc/typesense/nodes-ca", "readOnly": True}
    return volume in pod_spec.get("volumes", []) and mount in container.get("volumeMounts", [])


def test_the_clients_ca_is_a_configmap_without_the_key() -> None:
    children = _children(NodesTls(CA_BUNDLE))
    assert children["ConfigMap/search-tls-ca"]["data"] == {"ca.crt": CA_BUNDLE.decode()}
    assert "ConfigMap/search-tls-ca" not in _children(None)


def test_the_proxy_speaks_https_to_the_service_and_verifies_it_with_the_nodes_ca() -> None:
    config = nginx_config(CLIENTS, NodesTls(CA_BUNDLE))
    assert config is not None
    assert "proxy_pass https://search-svc.shop.svc:8108;" in config
    for directive in (
        "proxy_ssl_verify on;",
        "proxy_ssl_trusted_certificate /etc/typesense/nodes-ca/ca.crt;",
        "proxy_ssl_name search-svc.shop.svc;",
        "proxy_ssl_server_name on;",
    ):
        assert directive in config
    public = nginx_config(CLIENTS, NodesTls())
    assert public is not None
    assert "proxy_ssl_trusted_certificate /etc/ssl/certs/ca-certificates.crt;" in public
    plain = nginx_config(CLIENTS)
    assert plain is not None
    assert "proxy_pass http://search-svc.shop.svc:8108;" in plain
    assert "proxy_ssl" not in plain


def test_a_new_ca_rolls_the_proxy_which_reads_it_only_at_its_start() -> None:
    def template(tls: NodesTls | None) -> dict:
        return _children(tls)["Deployment/search-reverse-proxy"]["spec"]["template"]

    first, second = template(NodesTls(CA_BUNDLE)), template(NodesTls(CA_BUNDLE + CA_BUNDLE))
    assert (
        first["metadata"]["annotations"][NODES_CA_ANNOTATION]
        != (second["metadata"]["annotations"][NODES_CA_ANNOTATION])
    )
    (nginx,) = first["spec"]["containers"]
    assert _mounts_the_ca(first["spec"], nginx)
    assert NODES_CA_ANNOTATION not in template(None)["metadata"]["annotations"]


def test_the_scrapers_speak_https_and_trust_the_nodes_ca() -> None:
    cronjob = _children(NodesTls(CA_BUNDLE))["CronJob/search-scraper-docs"]
    pod_spec = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    (scraper,) = pod_spec["containers"]
    env = _env(scraper)
    assert env["TYPESENSE_PROTOCOL"] == "https"
    assert env["TYPESENSE_HOST"] == "search-svc.shop.svc", "a name the certificate holds"
    assert env["REQUESTS_CA_BUNDLE"] == env["SSL_CERT_FILE"] == "/etc/typesense/nodes-ca/ca.crt"
    assert _mounts_the_ca(pod_spec, scraper)
    plain = _children(None)["CronJob/search-scraper-docs"]["spec"]["jobTemplate"]["spec"]
    assert _env(plain["template"]["spec"]["containers"][0])["TYPESENSE_PROTOCOL"] == "http"


def test_the_exporter_asks_its_own_node_by_the_name_its_certificate_holds() -> None:
    template = build_statefulset(CLIENTS, 3, tls=NodesTls(CA_BUNDLE))["spec"]["template"]
    exporter = next(c for c in template["spec"]["containers"] if c["name"] == "metrics-exporter")
    names = [variable["name"] for variable in exporter["env"]]
    assert names.index("POD_NAME") < names.index("TYPESENSE_HOST"), "$(POD_NAME) expands only after it"
    env = _env(exporter)
    assert env["TYPESENSE_HOST"] == "$(POD_NAME).search-sts-svc.shop.svc"
    assert env["TYPESENSE_PROTOCOL"] == "https"
    assert env["SSL_CERT_FILE"] == "/etc/typesense/nodes-ca/ca.crt"
    assert _mounts_the_ca(template["spec"], exporter)
    typesense = next(c for c in template["spec"]["containers"] if c["name"] == "typesense")
    assert not _mounts_the_ca(template["spec"], typesense)
    public = build_statefulset(CLIENTS, 3, tls=NodesTls())["spec"]["template"]
    exporter = next(c for c in public["spec"]["containers"] if c["name"] == "metrics-exporter")
    assert "SSL_CERT_FILE" not in _env(exporter), "the image's own CAs verify a public certificate"


def test_the_routes_gateway_verifies_the_nodes_through_a_backend_tls_policy() -> None:
    policy = build_backend_tls_policy(CLIENTS, NodesTls(CA_BUNDLE))
    assert policy is not None
    assert policy["apiVersion"] == "gateway.networking.k8s.io/v1"
    assert policy["spec"] == {
        "targetRefs": [{"group": "", "kind": "Service", "name": "search-svc"}],
        "validation": {
            "hostname": "search-svc.shop.svc",
            "caCertificateRefs": [{"group": "", "kind": "ConfigMap", "name": "search-tls-ca"}],
        },
    }
    public = build_backend_tls_policy(CLIENTS, NodesTls())
    assert public is not None
    assert public["spec"]["validation"] == {
        "hostname": "search-svc.shop.svc",
        "wellKnownCACertificates": "System",
    }
    assert build_backend_tls_policy(CLIENTS, None) is None
    assert build_backend_tls_policy(CLUSTER, NodesTls(CA_BUNDLE)) is None, "no route, no policy"


def _empty_lists(value: object, path: str = "") -> list[str]:
    if isinstance(value, dict):
        return [found for key, item in value.items() for found in _empty_lists(item, f"{path}.{key}")]
    if isinstance(value, list):
        return (
            [path]
            if not value
            else [f for i, item in enumerate(value) for f in _empty_lists(item, f"{path}[{i}]")]
        )
    return []


def test_no_child_holds_an_empty_list_which_the_api_server_drops_and_every_apply_would_restore() -> None:
    for tls in (NodesTls(CA_BUNDLE), NodesTls(), None):
        for name, manifest in _children(tls).items():
            assert _empty_lists(manifest) == [], name
