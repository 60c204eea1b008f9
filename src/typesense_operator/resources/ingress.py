"""Builders for the optional Ingress and the nginx reverse proxy in front of Typesense.

Only requests whose Referer matches ``ingress.referer`` reach Typesense when a
referer is set; the user's http, server and location directives are placed in
the matching nginx blocks. Every builder returns None when ``spec.ingress`` is
unset, meaning "this object should not exist".
"""

from __future__ import annotations

import hashlib
from typing import Any

from typesense_operator.resources.model import Cluster, Manifest
from typesense_operator.resources.tls import NODES_CA_ANNOTATION, NodesTls, trust_nodes

__all__ = [
    "build_ingress",
    "build_proxy_configmap",
    "build_proxy_deployment",
    "build_proxy_service",
    "nginx_config",
]

PROXY = "reverse-proxy"
PROXY_PORT = 80
PROXY_RESOURCES: dict[str, Any] = {
    "requests": {"cpu": "100m", "memory": "32Mi"},
    "limits": {"cpu": "150m", "memory": "64Mi"},
}
PROXY_SECURITY_CONTEXT: dict[str, Any] = {
    "allowPrivilegeEscalation": False,
    "seccompProfile": {"type": "RuntimeDefault"},
}
SCRATCH = "/tmp"  # noqa: S108 - a path inside the proxy container, an emptyDir of its own
"""Where nginx.conf has nginx write (its pid and temporary files): an emptyDir with a read-only root."""


def _indent(text: str | None, spaces: int) -> str:
    if not text:
        return ""
    pad = " " * spaces
    return "\n".join(pad + line.strip() for line in text.strip().splitlines()) + "\n"


def _verify_upstream(service: str, tls: NodesTls) -> str:
    """nginx's directives to speak HTTPS to the nodes and verify them, as nginx does not by default:
    the certificate must chain to the nodes' CA and hold the client Service's name, which is also sent
    as the SNI."""
    return (
        "proxy_ssl_verify on;\n"
        f"proxy_ssl_trusted_certificate {tls.ca_file};\n"
        "proxy_ssl_verify_depth 3;\n"
        f"proxy_ssl_name {service};\n"
        "proxy_ssl_server_name on;\n"
        "proxy_ssl_session_reuse on;\n"
    )


def nginx_config(cluster: Cluster, tls: NodesTls | None = None) -> str | None:
    """nginx.conf of the proxy, or None without an ingress; with ``tls``, it speaks HTTPS to the nodes."""
    ingress = cluster.spec.ingress
    if ingress is None:
        return None
    service = f"{cluster.client_service_name}.{cluster.namespace}.svc"
    scheme = "https" if tls is not None else "http"
    upstream = f"{scheme}://{service}:{cluster.spec.api_port}"
    verify = _indent(_verify_upstream(service, tls), 12) if tls is not None else ""
    referer_check = ""
    if ingress.referer:
        # valid_referers without "none": a request with no Referer is refused as well.
        referer_check = (
            f"        valid_referers server_names {ingress.referer};\n"
            "        if ($invalid_referer) {\n"
            "            return 403;\n"
            "        }\n"
        )
    return (
        "worker_processes auto;\n"
        "pid /tmp/nginx.pid;\n"
        "events {\n    worker_connections 1024;\n}\n"
        "http {\n"
        "    client_body_temp_path /tmp/client_temp;\n"
        "    proxy_temp_path /tmp/proxy_temp;\n"
        "    fastcgi_temp_path /tmp/fastcgi_temp;\n"
        "    uwsgi_temp_path /tmp/uwsgi_temp;\n"
        "    scgi_temp_path /tmp/scgi_temp;\n"
        f"{_indent(ingress.http_directives, 4)}"
        "    server {\n"
        f"        listen {PROXY_PORT};\n"
        f"        server_name {ingress.host};\n"
        f"{_indent(ingress.server_directives, 8)}"
        "        location / {\n"
        f"{_indent(referer_check, 12) if referer_check else ''}"
        f"            proxy_pass {upstream};\n"
        f"{verify}"
        "            proxy_set_header Host $host;\n"
        "            proxy_set_header X-Real-IP $remote_addr;\n"
        "            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;\n"
        f"{_indent(ingress.location_directives, 12)}"
        "        }\n"
        "    }\n"
        "}\n"
    )


def build_proxy_configmap(cluster: Cluster, tls: NodesTls | None = None) -> Manifest | None:
    config = nginx_config(cluster, tls)
    if config is None:
        return None
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": cluster.metadata(f"{cluster.proxy_name}-config", PROXY),
        "data": {"nginx.conf": config},
    }


def build_proxy_deployment(cluster: Cluster, tls: NodesTls | None = None) -> Manifest | None:
    config = nginx_config(cluster, tls)
    if config is None:
        return None
    # nginx reads its config only at start: a changed config rolls the pods through this hash.
    config_hash = hashlib.sha256(config.encode()).hexdigest()[:16]
    template_labels = cluster.labels(PROXY)
    ingress = cluster.spec.ingress
    assert ingress is not None  # nginx_config says so
    volumes: list[dict[str, Any]] = [
        {"name": "config", "configMap": {"name": f"{cluster.proxy_name}-config"}}
    ]
    mounts: list[dict[str, Any]] = [
        {"name": "config", "mountPath": "/etc/nginx/nginx.conf", "subPath": "nginx.conf", "readOnly": True}
    ]
    security_context = PROXY_SECURITY_CONTEXT
    read_only = ingress.read_only_root_filesystem
    if read_only is not None:
        security_context = read_only.security_context or {
            **PROXY_SECURITY_CONTEXT,
            "readOnlyRootFilesystem": True,
        }
        volumes += read_only.volumes or []
        mounts += read_only.volume_mounts or []
        if not any(mount.get("mountPath") == SCRATCH for mount in mounts):
            volumes.append({"name": "scratch", "emptyDir": {}})
            mounts.append({"name": "scratch", "mountPath": SCRATCH})
    container: dict[str, Any] = {
        "name": "nginx",
        "image": ingress.image,
        "ports": [{"name": "http", "containerPort": PROXY_PORT, "protocol": "TCP"}],
        "volumeMounts": mounts,
        "readinessProbe": {"tcpSocket": {"port": PROXY_PORT}, "periodSeconds": 5},
        "livenessProbe": {"tcpSocket": {"port": PROXY_PORT}, "periodSeconds": 10, "failureThreshold": 6},
        "resources": ingress.resources or PROXY_RESOURCES,
        "securityContext": security_context,
    }
    pod_spec: dict[str, Any] = {"containers": [container], "volumes": volumes}
    annotations = {"ts.opentelekomcloud.com/nginx-config-hash": config_hash}
    if tls is not None:
        trust_nodes(cluster, tls, pod_spec, container)
        annotations[NODES_CA_ANNOTATION] = tls.ca_digest
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": cluster.metadata(cluster.proxy_name, PROXY),
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": cluster.selector(PROXY)},
            "template": {
                "metadata": {"labels": template_labels, "annotations": annotations},
                "spec": cluster.pulling(pod_spec),
            },
        },
    }


def build_proxy_service(cluster: Cluster) -> Manifest | None:
    ingress = cluster.spec.ingress
    if ingress is None:
        return None
    metadata = cluster.metadata(f"{cluster.proxy_name}-svc", PROXY)
    if ingress.service_annotations:
        metadata["annotations"] = dict(ingress.service_annotations)
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata,
        "spec": {
            "type": "ClusterIP",
            "selector": cluster.selector(PROXY),
            "ports": [{"name": "http", "port": PROXY_PORT, "targetPort": PROXY_PORT, "protocol": "TCP"}],
        },
    }


def build_ingress(cluster: Cluster) -> Manifest | None:
    ingress = cluster.spec.ingress
    if ingress is None:
        return None
    annotations = dict(ingress.annotations or {})
    if ingress.cluster_issuer:
        annotations["cert-manager.io/cluster-issuer"] = ingress.cluster_issuer
    metadata = cluster.metadata(f"{cluster.proxy_name}-ingress", PROXY)
    metadata["labels"] = {**(ingress.labels or {}), **metadata["labels"]}
    if annotations:
        metadata["annotations"] = annotations
    spec: dict[str, Any] = {
        "ingressClassName": ingress.ingress_class_name,
        "rules": [
            {
                "host": ingress.host,
                "http": {
                    "paths": [
                        {
                            "path": ingress.path,
                            "pathType": ingress.path_type,
                            "backend": {
                                "service": {
                                    "name": f"{cluster.proxy_name}-svc",
                                    "port": {"number": PROXY_PORT},
                                }
                            },
                        }
                    ]
                },
            }
        ],
    }
    if ingress.cluster_issuer or ingress.tls_secret_name:
        # cert-manager fills the default Secret; without an issuer or a Secret there is no certificate.
        secret = ingress.tls_secret_name or f"{cluster.proxy_name}-tls"
        spec["tls"] = [{"hosts": [ingress.host], "secretName": secret}]
    return {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": metadata, "spec": spec}
