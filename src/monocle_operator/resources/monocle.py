"""Builders for Monocle itself: the generated Secret and ConfigMap, the API, the crawler, the Ingress.

The API and the crawler read the same environment (the generated Secret, then
the user's, through envFrom) and the same config.yaml mounted at /etc/monocle.
Their pod templates carry the hash of the Secrets' data, so a data change rolls
both Deployments and nothing else does.
"""

from __future__ import annotations

import base64
from typing import Any

from monocle_operator.resources.model import (
    API_PORT,
    CONFIG_DIR,
    CONFIG_KEY,
    CRAWLER_HEALTH_PORT,
    CRAWLERS_API_KEY,
    ENGINE_ANNOTATION,
    SECRET_HASH_ANNOTATION,
    Instance,
    Manifest,
)
from operator_core.podsecurity import restricted_container, restricted_pod

__all__ = [
    "API",
    "CRAWLER",
    "DEFAULT_CONFIG",
    "build_api_deployment",
    "build_api_service",
    "build_config_map",
    "build_crawler_deployment",
    "build_generated_secret",
    "build_ingress",
    "monocle_env",
]

API = "api"
CRAWLER = "crawler"
CONFIG = "config"
SECRET_COMPONENT = "secret"  # noqa: S105 (a component label, not a password)
# The Monocle image does not need root; a fixed uid lets runAsNonRoot be checked.
MONOCLE_UID = 1001
DEFAULT_CONFIG = "workspaces:\n  - name: demo\n    crawlers: []\n"
DEFAULT_RESOURCES: dict[str, Any] = {
    "requests": {"cpu": "100m", "memory": "128Mi"},
    "limits": {"cpu": "1", "memory": "512Mi"},
}


def build_generated_secret(instance: Instance, crawlers_api_key: str) -> Manifest:
    """The instance's Secret with the crawler key; created once, then the user's to edit."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": instance.metadata(instance.api_name, SECRET_COMPONENT),
        "type": "Opaque",
        "data": {CRAWLERS_API_KEY: base64.b64encode(crawlers_api_key.encode()).decode()},
    }


def build_config_map(instance: Instance) -> Manifest | None:
    """The default config.yaml, created once; None when the user brings a ConfigMap."""
    if instance.spec.config_map_ref is not None:
        return None
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": instance.metadata(instance.api_name, CONFIG),
        "data": {CONFIG_KEY: DEFAULT_CONFIG},
    }


def monocle_env(instance: Instance) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(env, envFrom) shared by the API and the update-idents Job."""
    env = [
        {"name": "MONOCLE_ELASTIC_URL", "value": instance.elastic_url},
        {"name": "MONOCLE_PUBLIC_URL", "value": instance.spec.monocle_public_url},
        {"name": "MONOCLE_CONFIG", "value": f"{CONFIG_DIR}/{CONFIG_KEY}"},
    ]
    return env, _env_from(instance)


def _env_from(instance: Instance) -> list[dict[str, Any]]:
    # A later source wins for a key in both, so the user's Secret overrides the generated one.
    sources = [{"secretRef": {"name": instance.api_name}}]
    if instance.spec.secret_ref is not None:
        sources.append({"secretRef": {"name": instance.spec.secret_ref.name}})
    return sources


def config_volume(instance: Instance) -> dict[str, Any]:
    return {"name": CONFIG, "configMap": {"name": instance.config_map_name}}


def config_mount() -> dict[str, Any]:
    return {"name": CONFIG, "mountPath": CONFIG_DIR, "readOnly": True}


def _engine_annotation(instance: Instance) -> dict[str, str]:
    """The engine behind the Service, on the pod template: a change of engine restarts the API (which
    makes the workspaces' indices at its start) and the crawler. Elasticsearch, the default, has none,
    so that the pods of an instance from before the choice existed are not restarted by it."""
    engine = instance.spec.elastic.engine
    return {} if engine == "Elasticsearch" else {ENGINE_ANNOTATION: engine}


def _deployment(
    instance: Instance, name: str, component: str, container: dict[str, Any], secret_hash: str
) -> Manifest:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": instance.metadata(name, component),
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": instance.selector(component)},
            "template": {
                "metadata": {
                    "labels": instance.labels(component),
                    "annotations": {SECRET_HASH_ANNOTATION: secret_hash, **_engine_annotation(instance)},
                },
                "spec": {
                    "securityContext": restricted_pod(MONOCLE_UID),
                    "containers": [container],
                    "volumes": [config_volume(instance)],
                },
            },
        },
    }


def build_api_deployment(instance: Instance, secret_hash: str, image: str | None = None) -> Manifest:
    """``image``: the Monocle image to run now, when it is not yet the spec's (it waits for the engine)."""
    env, env_from = monocle_env(instance)
    container = {
        "name": API,
        "image": image or instance.spec.image,
        "command": ["monocle", "api"],
        "env": env,
        "envFrom": env_from,
        "ports": [{"name": "http", "containerPort": API_PORT, "protocol": "TCP"}],
        "volumeMounts": [config_mount()],
        "resources": instance.spec.resources.api or DEFAULT_RESOURCES,
        "readinessProbe": {"httpGet": {"path": "/health", "port": API_PORT}, "periodSeconds": 10},
        # The API waits for Elasticsearch at start; six slow answers in a row mean it is stuck.
        "livenessProbe": {
            "httpGet": {"path": "/health", "port": API_PORT},
            "initialDelaySeconds": 30,
            "periodSeconds": 20,
            "timeoutSeconds": 30,
            "failureThreshold": 6,
        },
        "securityContext": restricted_container(),
    }
    return _deployment(instance, instance.api_name, API, container, secret_hash)


def build_api_service(instance: Instance) -> Manifest:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": instance.metadata(instance.api_name, API),
        "spec": {
            "type": "ClusterIP",
            "selector": instance.selector(API),
            "ports": [{"name": "http", "port": API_PORT, "targetPort": API_PORT, "protocol": "TCP"}],
        },
    }


def build_crawler_deployment(instance: Instance, secret_hash: str, image: str | None = None) -> Manifest:
    """``image``: as :func:`build_api_deployment`'s."""
    _, env_from = monocle_env(instance)
    container = {
        "name": CRAWLER,
        "image": image or instance.spec.image,
        "command": ["monocle", "crawler"],
        # The crawler posts what it fetched to the API, inside the namespace.
        "env": [
            {"name": "MONOCLE_PUBLIC_URL", "value": instance.internal_api_url},
            {"name": "MONOCLE_CONFIG", "value": f"{CONFIG_DIR}/{CONFIG_KEY}"},
        ],
        "envFrom": env_from,
        "ports": [{"name": "health", "containerPort": CRAWLER_HEALTH_PORT, "protocol": "TCP"}],
        "volumeMounts": [config_mount()],
        "resources": instance.spec.resources.crawler or DEFAULT_RESOURCES,
        "readinessProbe": {"httpGet": {"path": "/health", "port": CRAWLER_HEALTH_PORT}, "periodSeconds": 10},
        "livenessProbe": {
            "httpGet": {"path": "/health", "port": CRAWLER_HEALTH_PORT},
            "initialDelaySeconds": 30,
            "periodSeconds": 20,
            "timeoutSeconds": 10,
            "failureThreshold": 6,
        },
        "securityContext": restricted_container(),
    }
    return _deployment(instance, instance.crawler_name, CRAWLER, container, secret_hash)


def build_ingress(instance: Instance) -> Manifest | None:
    ingress = instance.spec.ingress
    if ingress is None:
        return None
    metadata = instance.metadata(instance.api_name, API)
    if ingress.annotations:
        metadata["annotations"] = dict(ingress.annotations)
    backend = {"service": {"name": instance.api_name, "port": {"number": API_PORT}}}
    spec: dict[str, Any] = {
        "rules": [
            {
                "host": ingress.host,
                "http": {"paths": [{"path": "/", "pathType": "Prefix", "backend": backend}]},
            }
        ]
    }
    if ingress.ingress_class_name:
        spec["ingressClassName"] = ingress.ingress_class_name
    if ingress.tls is not None:
        spec["tls"] = [{"hosts": [ingress.host], "secretName": ingress.tls.secret_name}]
    return {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": metadata, "spec": spec}
