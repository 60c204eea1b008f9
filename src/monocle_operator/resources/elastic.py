"""Builders for the search engine (Elasticsearch or OpenSearch): a one-pod StatefulSet with its volume,
and the Service on port 9200 in front of whichever engine runs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from monocle_operator.api import ENGINE_IMAGES
from monocle_operator.resources.model import ELASTIC_PORT, Instance, Manifest
from operator_core.podsecurity import restricted_container, restricted_pod

__all__ = [
    "ELASTIC",
    "ENGINES",
    "EngineRuntime",
    "build_elastic_service",
    "build_elastic_statefulset",
    "engine_image",
]

ELASTIC = "elastic"
"""The component label of the engine's pods, whichever the engine (the Service selects by it)."""
# The uid both upstream images run as.
ELASTIC_UID = 1000


@dataclass(frozen=True)
class EngineRuntime:
    """How an engine's upstream image is run: its container's name, where it keeps its data, and the
    variables it reads (a dotted name is a setting in both images)."""

    container: str
    data_dir: str
    java_options: str
    settings: tuple[tuple[str, str], ...] = ()


ENGINES = {
    "Elasticsearch": EngineRuntime("elasticsearch", "/usr/share/elasticsearch/data", "ES_JAVA_OPTS"),
    "OpenSearch": EngineRuntime(
        "opensearch",
        "/usr/share/opensearch/data",
        "OPENSEARCH_JAVA_OPTS",
        # Upstream's image starts its security plugin with demonstration certificates and an admin
        # password to set; Monocle speaks plain HTTP to the engine inside the namespace, as it does to
        # Elasticsearch 7's default.
        (("DISABLE_SECURITY_PLUGIN", "true"), ("DISABLE_INSTALL_DEMO_CONFIG", "true")),
    ),
}
DEFAULT_RESOURCES: dict[str, Any] = {
    "requests": {"cpu": "250m", "memory": "1Gi"},
    "limits": {"cpu": "1", "memory": "2Gi"},
}


def engine_image(instance: Instance) -> str:
    """The engine's image: the spec's, or the engine's own default."""
    elastic = instance.spec.elastic
    return elastic.image or ENGINE_IMAGES[elastic.engine]


def build_elastic_statefulset(instance: Instance, claim_size: str | None = None) -> Manifest:
    """The single-node engine the spec names.

    ``claim_size`` is the size in the live StatefulSet's claim template: that template
    cannot change once created, so a grown spec size is applied to the PVC instead,
    and the template keeps what it was created with.
    """
    elastic = instance.spec.elastic
    runtime = ENGINES[elastic.engine]
    heap = elastic.java_heap
    name = instance.engine_statefulset_name()
    claim_spec: dict[str, Any] = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": claim_size or elastic.storage_size}},
    }
    if elastic.storage_class_name:
        claim_spec["storageClassName"] = elastic.storage_class_name
    health = "/_cluster/health"
    container: dict[str, Any] = {
        "name": runtime.container,
        "image": engine_image(instance),
        "env": [
            {"name": "discovery.type", "value": "single-node"},
            {"name": runtime.java_options, "value": f"-Xms{heap} -Xmx{heap}"},
            *({"name": variable, "value": value} for variable, value in runtime.settings),
        ],
        "ports": [{"name": "http", "containerPort": ELASTIC_PORT, "protocol": "TCP"}],
        "volumeMounts": [{"name": "data", "mountPath": runtime.data_dir}],
        "resources": instance.spec.resources.elastic or DEFAULT_RESOURCES,
        # Ready once the cluster is at least yellow (a single node never has its replicas).
        "readinessProbe": {
            "httpGet": {"path": f"{health}?wait_for_status=yellow&timeout=2s", "port": ELASTIC_PORT},
            "periodSeconds": 10,
            "timeoutSeconds": 5,
            "failureThreshold": 3,
        },
        # Alive while the node answers at all; a red cluster is not cured by a restart.
        "livenessProbe": {
            "httpGet": {"path": f"{health}?local=true", "port": ELASTIC_PORT},
            "initialDelaySeconds": 60,
            "periodSeconds": 20,
            "timeoutSeconds": 10,
            "failureThreshold": 6,
        },
        "securityContext": restricted_container(),
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": instance.metadata(name, ELASTIC),
        "spec": {
            "replicas": 1,
            "serviceName": instance.elastic_name,
            "selector": {"matchLabels": instance.selector(ELASTIC)},
            "template": {
                "metadata": {"labels": instance.labels(ELASTIC)},
                "spec": {
                    "securityContext": restricted_pod(ELASTIC_UID),
                    "containers": [container],
                },
            },
            "volumeClaimTemplates": [
                {"metadata": {"name": "data", "labels": instance.labels(ELASTIC)}, "spec": claim_spec}
            ],
        },
    }


def build_elastic_service(instance: Instance) -> Manifest:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": instance.metadata(instance.elastic_name, ELASTIC),
        "spec": {
            "type": "ClusterIP",
            "selector": instance.selector(ELASTIC),
            "ports": [{"name": "http", "port": ELASTIC_PORT, "targetPort": ELASTIC_PORT, "protocol": "TCP"}],
        },
    }
