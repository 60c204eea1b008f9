"""The sample manifests in ``deploy/samples/`` (every operator's, unchanged from their specifications)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

SAMPLES = Path(__file__).resolve().parent.parent / "deploy" / "samples"


def load_sample(name: str) -> list[dict[str, Any]]:
    """The documents of ``deploy/samples/<name>.yaml``."""
    return [d for d in yaml.safe_load_all((SAMPLES / f"{name}.yaml").read_text()) if d]


def sample_spec(name: str, kind: str) -> dict[str, Any]:
    """The spec of the sample's one object of that kind."""
    (obj,) = [d for d in load_sample(name) if d["kind"] == kind]
    return dict(obj["spec"])


GO_OPERATOR_0_4_1_FIELDS: dict[str, Any] = {
    "imagePullSecrets": [{"name": "registry-credentials"}],
    "healthProbeTimeoutInMilliseconds": 1500,
    "forceResetPeersConfigOnUpdate": False,
    "serviceAnnotations": {"old.example.com/kept": "yes", "example.com/overridden": "by-service"},
    "service": {
        "type": "LoadBalancer",
        "externalTrafficPolicy": "Local",
        "annotations": {"example.com/overridden": "service-wins"},
    },
    "statefulSetAnnotations": {"example.com/owner": "search-team"},
    "podAnnotations": {"example.com/scrape": "true"},
    "podsInheritStatefulSetAnnotations": True,
    "priorityClassName": "search-critical",
    "ignoreAnnotationsFromExternalMutations": ["kubectl.kubernetes.io/restartedAt"],
    "storage": {
        "size": "10Gi",
        "storageClassName": "fast",
        "accessMode": "ReadWriteMany",
        "annotations": {"example.com/backup": "daily"},
    },
    "metrics": {
        "release": "promstack",
        "image": "registry.example.com/exporter:1",
        "interval": 60,
        "resources": {"requests": {"cpu": "50m"}},
        "logLevel": -4,
    },
    "healthcheck": {"image": "quay.io/akyriako/typesense-healthcheck:0.2.0", "logLevel": 8},
    "ingress": {
        "host": "ts.example.de",
        "ingressClassName": "nginx",
        "referer": "docs.example.de",
        "labels": {"example.com/team": "search"},
        "annotations": {"example.com/i": "1"},
        "serviceAnnotations": {"example.com/proxy-service": "1"},
        "tlsSecretName": "wildcard-example-de",
        "path": "/search",
        "pathType": "Prefix",
        "image": "nginx:1.27-alpine",
        "resources": {"requests": {"cpu": "20m"}},
        "readOnlyRootFilesystem": {
            "volumes": [{"name": "cache", "emptyDir": {}}],
            "volumeMounts": [{"name": "cache", "mountPath": "/var/cache/nginx"}],
        },
    },
    "scrapers": [
        {
            "name": "docs",
            "image": "typesense/docsearch-scraper:0.12.0.rc14",
            "host": "docs.example.com",
            "protocol": "http",
            "schedule": "@daily",
            "authConfiguration": {"name": "docs-login"},
        }
    ],
    "httpRoutes": [
        {
            "enabled": True,
            "name": "public",
            "parentRef": {"name": "edge", "namespace": "gateways", "section": "https"},
            "hostnames": ["search.example.com", "*.search.example.com"],
            "path": "/",
            "pathType": "PathPrefix",
            "labels": {"example.com/exposure": "public"},
            "annotations": {"example.com/rate-limit": "100"},
            "referenceGrant": True,
        },
        {
            "enabled": False,
            "name": "legacy",
            "parentRef": {"name": "internal"},
            "path": "/v1",
            "pathType": "Exact",
            "referenceGrant": False,
        },
    ],
    "securityContext": {
        "pod": {"runAsNonRoot": True, "runAsUser": 20000},
        "typesense": {"readOnlyRootFilesystem": True},
        "healthcheck": {"runAsUser": 1},
        "metrics": {"runAsUser": 30000},
    },
}
"""A value for each field the Go operator's API (0.4.1) has beyond the seed's, as its users' manifests
set them; every default spelled out, so that the API server stores exactly this."""
