"""Typesense over TLS, as manifests (pure): the names a cluster's certificate must cover, the
cert-manager Certificate that asks for one, the checked copy the nodes mount, and what a node's pod
needs to serve HTTPS with it (table-tested in tests/unit/test_typesense_tls_resources.py).

typesense-server serves its API over TLS itself (``--ssl-certificate``, ``--ssl-certificate-key``, and
``--ssl-refresh-interval-seconds`` to read a renewed pair without a restart); its peering port stays
plain. The nodes never mount the user's Secret: a copy is made once the certificate was checked
(:mod:`typesense_operator.tls.check`), so that a broken renewal never reaches a node.
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from typesense_operator.resources.model import Cluster, Manifest

__all__ = [
    "API_SCHEME_ANNOTATION",
    "CA_DIR",
    "CERTIFICATE_API_VERSION",
    "CERTIFICATE_KIND",
    "NODES_CA_ANNOTATION",
    "SERVED_CERTIFICATE_ANNOTATION",
    "SYSTEM_CA_FILE",
    "TLS_DIR",
    "CertificateCopy",
    "NodesTls",
    "build_ca_configmap",
    "build_certificate",
    "build_served_secret",
    "ca_bundle",
    "ca_configmap_name",
    "certificate_names",
    "issued_secret_name",
    "node_server_name",
    "required_names",
    "serve_https",
    "served_secret_name",
    "serves_https",
    "tls_env",
    "tls_mount",
    "tls_volume",
    "trust_nodes",
]

CERTIFICATE_API_VERSION = "cert-manager.io/v1"
CERTIFICATE_KIND = (CERTIFICATE_API_VERSION, "Certificate")
API_SCHEME_ANNOTATION = "ts.opentelekomcloud.com/api-scheme"
"""Pod template annotation, ``https`` on the pods that serve their API over TLS: while TLS is turned on
or off, some pods serve HTTPS and others HTTP, and each client of the operator's asks each pod its way."""
SERVED_CERTIFICATE_ANNOTATION = "ts.opentelekomcloud.com/served-certificate-hash"
"""Pod annotation set when the checked copy changes: a change of the pod makes its kubelet update the
mounted files at once, not at its next periodic sync (a minute or more)."""
TLS_DIR = "/etc/typesense/tls"
_TLS_VOLUME = "tls"
CA_DIR = "/etc/typesense/nodes-ca"
"""Where the cluster's own clients (the proxy, the scrapers, the exporter) find the CA of the nodes."""
_CA_VOLUME = "nodes-ca"
SYSTEM_CA_FILE = "/etc/ssl/certs/ca-certificates.crt"
"""The system's CAs in Debian's and Alpine's images: what the proxy trusts for a public certificate."""
NODES_CA_ANNOTATION = "ts.opentelekomcloud.com/nodes-ca-hash"
"""Proxy pod template annotation: nginx reads the CA it trusts only at its start, so a new CA rolls it."""
_PEM_CERTIFICATE = re.compile(rb"-----BEGIN CERTIFICATE-----.+?-----END CERTIFICATE-----", re.DOTALL)


def _service_forms(service: str, namespace: str) -> list[str]:
    return [
        service,
        f"{service}.{namespace}",
        f"{service}.{namespace}.svc",
        f"{service}.{namespace}.svc.cluster.local",
    ]


def required_names(cluster: Cluster, replicas: int) -> list[str]:
    """What clients and the operator name a cluster by, each of which the certificate must cover: its
    client Service (in every form a pod can write it), and each node by its name under the headless
    Service (how the operator checks every node it talks to)."""
    nodes = [node_server_name(cluster, cluster.pod_name(index)) for index in range(replicas)]
    return [*_service_forms(cluster.client_service_name, cluster.namespace), *nodes]


def serves_https(pod: Mapping[str, Any]) -> bool:
    """Whether a node's pod serves its API over HTTPS, as its template's annotation says."""
    return (pod["metadata"].get("annotations") or {}).get(API_SCHEME_ANNOTATION) == "https"


def node_server_name(cluster: Cluster, pod: str) -> str:
    """The name the operator asks a node's certificate to hold when it talks to the node."""
    return f"{pod}.{cluster.headless_service_name}.{cluster.namespace}.svc"


def certificate_names(cluster: Cluster) -> list[str]:
    """The DNS names a Certificate asks for: the client Service's and the headless Service's forms,
    and a wildcard under the headless Service, so that scaling needs no new certificate."""
    headless = cluster.headless_service_name
    wildcards = [f"*.{name}" for name in _service_forms(headless, cluster.namespace)[2:]]
    return [
        *_service_forms(cluster.client_service_name, cluster.namespace),
        *_service_forms(headless, cluster.namespace),
        *wildcards,
    ]


def issued_secret_name(cluster: str) -> str:
    """The Secret cert-manager issues the operator's Certificate into, for the cluster of that name."""
    return f"{cluster}-tls"


def served_secret_name(cluster: str) -> str:
    """The nodes' checked copy of the certificate, for the cluster of that name."""
    return f"{cluster}-tls-served"


def build_certificate(
    cluster: Cluster, issuer: str, kind: str = "Issuer", group: str = "cert-manager.io"
) -> Manifest:
    """A cert-manager Certificate for the cluster, from ``issuer``: no common name (the names are in the
    SAN, which is what clients check), a new ECDSA key at each renewal."""
    return {
        "apiVersion": CERTIFICATE_API_VERSION,
        "kind": "Certificate",
        "metadata": cluster.metadata(issued_secret_name(cluster.name), "tls"),
        "spec": {
            "secretName": issued_secret_name(cluster.name),
            "dnsNames": certificate_names(cluster),
            "issuerRef": {"name": issuer, "kind": kind, "group": group},
            "usages": ["server auth", "digital signature", "key encipherment"],
            "privateKey": {"algorithm": "ECDSA", "size": 256, "rotationPolicy": "Always"},
        },
    }


@dataclass(frozen=True)
class NodesTls:
    """The nodes serve their API over HTTPS (spec.tls, once a certificate passed the check), and what
    the cluster's own clients trust for them: the CA bundle of the checked copy, empty for a publicly
    trusted certificate (the system's CAs)."""

    ca_bundle: bytes = b""

    @property
    def ca_digest(self) -> str:
        return hashlib.sha256(self.ca_bundle).hexdigest()[:16]

    @property
    def ca_file(self) -> str:
        """The file a client in the cluster reads the CA from: the mounted bundle, or the system's CAs."""
        return f"{CA_DIR}/ca.crt" if self.ca_bundle else SYSTEM_CA_FILE


def ca_configmap_name(cluster: str) -> str:
    """The CA bundle of the nodes, for the cluster of that name: a ConfigMap, so that clients (and a
    BackendTLSPolicy, which takes only ConfigMaps) read the CA without any access to the key."""
    return f"{cluster}-tls-ca"


def build_ca_configmap(cluster: Cluster, tls: NodesTls) -> Manifest:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": cluster.metadata(ca_configmap_name(cluster.name), "tls"),
        "data": {"ca.crt": tls.ca_bundle.decode()},
    }


def trust_nodes(
    cluster: Cluster,
    tls: NodesTls,
    pod_spec: dict[str, Any],
    container: dict[str, Any],
    variables: Iterable[str] = (),
) -> None:
    """Give ``container`` the nodes' CA: the bundle mounted at :data:`CA_DIR`, and each of ``variables``
    (SSL_CERT_FILE, REQUESTS_CA_BUNDLE: how Go's, OpenSSL's and requests' clients are told their CAs)
    naming it. Nothing with a publicly trusted certificate: the image's own CAs verify it."""
    if not tls.ca_bundle:
        return
    # optional: a pod still serving HTTPS while TLS is turned off keeps starting after the ConfigMap goes.
    volume = {"name": _CA_VOLUME, "configMap": {"name": ca_configmap_name(cluster.name), "optional": True}}
    pod_spec.setdefault("volumes", []).append(volume)
    mount = {"name": _CA_VOLUME, "mountPath": CA_DIR, "readOnly": True}
    container.setdefault("volumeMounts", []).append(mount)
    if variables:  # never an empty list, which the API server drops: the apply would differ forever
        container.setdefault("env", []).extend({"name": n, "value": tls.ca_file} for n in variables)


def ca_bundle(current: bytes, previous: bytes | None) -> bytes:
    """The CA certificates the operator and clients trust: the current CA's, and while a new CA takes
    over, the one before it (from ``previous``, the bundle given so far), for a node may still serve a
    certificate of the old CA; each once, and never more than one CA before the current one."""
    kept = list(dict.fromkeys(_PEM_CERTIFICATE.findall(current)))
    earlier = [block for block in _PEM_CERTIFICATE.findall(previous or b"") if block not in kept]
    kept.extend(earlier[:1])
    return b"\n".join(kept) + b"\n" if kept else b""


def _data(values: Iterable[tuple[str, bytes]]) -> dict[str, str]:
    return {key: base64.b64encode(value).decode() for key, value in values}


@dataclass(frozen=True)
class CertificateCopy:
    """A certificate and its key that passed the check (:mod:`typesense_operator.tls.check`): what the
    nodes are given, in the Secret :func:`build_served_secret` makes, with the CA bundle of
    :class:`NodesTls`."""

    cert: bytes
    key: bytes = field(repr=False)


def build_served_secret(cluster: Cluster, cert: bytes, key: bytes, ca: bytes) -> Manifest:
    """The checked copy the nodes mount (a ``kubernetes.io/tls`` Secret of the cluster's own)."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": cluster.metadata(served_secret_name(cluster.name), "tls"),
        "type": "kubernetes.io/tls",
        "data": _data((("tls.crt", cert), ("tls.key", key), ("ca.crt", ca))),
    }


def tls_volume(cluster: Cluster) -> dict[str, Any]:
    # 0440 and the pod's fsGroup: the key is readable by the Typesense user only, never by the world.
    secret = {"secretName": served_secret_name(cluster.name), "defaultMode": 0o440}
    return {"name": _TLS_VOLUME, "secret": secret}


def tls_mount() -> dict[str, Any]:
    return {"name": _TLS_VOLUME, "mountPath": TLS_DIR, "readOnly": True}


def tls_env(refresh_seconds: int) -> list[dict[str, Any]]:
    """typesense-server's own TLS settings, the files of the mounted copy."""
    return [
        {"name": "TYPESENSE_SSL_CERTIFICATE", "value": f"{TLS_DIR}/tls.crt"},
        {"name": "TYPESENSE_SSL_CERTIFICATE_KEY", "value": f"{TLS_DIR}/tls.key"},
        {"name": "TYPESENSE_SSL_REFRESH_INTERVAL_SECONDS", "value": str(refresh_seconds)},
    ]


def serve_https(cluster: Cluster, pod_spec: dict[str, Any], container: dict[str, Any]) -> None:
    """Make a node's pod serve its API over TLS with the checked copy: the files, typesense-server's
    settings, and a readiness probe in HTTPS (the kubelet's probes never verify a certificate, and
    /health carries no key)."""
    assert cluster.spec.tls is not None
    pod_spec["volumes"].append(tls_volume(cluster))
    container["volumeMounts"].append(tls_mount())
    container["env"].extend(tls_env(cluster.spec.tls.refresh_interval_seconds))
    container["readinessProbe"]["httpGet"]["scheme"] = "HTTPS"
