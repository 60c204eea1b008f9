"""Monocle, version v1alpha1, wire-compatible with the Go operator's resource.

The Go operator's spec has one field, ``monoclePublicURL``; its sample applies
here unchanged. Everything else is optional with defaults that reproduce the
Go operator's deployment (the same images, a 1Gi Elasticsearch volume). CEL
rules refuse at admission what cannot work: a public URL without a scheme, a
storage class changed after the volume exists, a volume that shrinks.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field

from operator_core.apimodel import ApiModel, cel, preserve_unknown
from operator_core.conditions import Condition
from operator_core.crdgen import CustomResource, PrinterColumn

__all__ = [
    "DEFAULT_ELASTIC_IMAGE",
    "DEFAULT_IMAGE",
    "DEFAULT_OPENSEARCH_IMAGE",
    "ENGINE_IMAGES",
    "GROUP",
    "MONOCLE",
    "VERSION",
    "Engine",
    "MonocleSpec",
    "MonocleStatus",
]

GROUP = "monocle.monocle.change-metrics.io"
VERSION = "v1alpha1"
DEFAULT_IMAGE = "quay.io/change-metrics/monocle:1.8.0"
# The release Monocle's own docker-compose recipe runs; Monocle 1.8 speaks the 7.x API.
DEFAULT_ELASTIC_IMAGE = "docker.elastic.co/elasticsearch/elasticsearch:7.17.5"
# OpenSearch answers Elasticsearch 7's API, which Monocle speaks, and is Apache-2.0 (Monocle's
# issues 318 and 1067 ask for it as Elasticsearch 7 reaches its end of life).
DEFAULT_OPENSEARCH_IMAGE = "opensearchproject/opensearch:2.19.6"
Engine = Literal["Elasticsearch", "OpenSearch"]
ENGINE_IMAGES: dict[str, str] = {
    "Elasticsearch": DEFAULT_ELASTIC_IMAGE,
    "OpenSearch": DEFAULT_OPENSEARCH_IMAGE,
}
"""Each engine's image when spec.elastic.image is unset."""

_RESOURCES_DOC = preserve_unknown()


class SecretReference(ApiModel):
    """A Secret in the instance's namespace, owned by the user."""

    name: str = Field(min_length=1, max_length=253)
    """Name of the Secret. Each of its keys becomes an environment variable of the API and the crawler."""


class ConfigMapReference(ApiModel):
    """A ConfigMap in the instance's namespace, owned by the user."""

    name: str = Field(min_length=1, max_length=253)
    """Name of the ConfigMap. It must hold Monocle's configuration under the key config.yaml."""


class ElasticSpec(ApiModel):
    """The single-node search engine that stores Monocle's indices: Elasticsearch, or OpenSearch."""

    engine: Engine = "Elasticsearch"
    """The engine the operator runs: Elasticsearch (what Monocle ships with), or OpenSearch (Apache-2.0,
    which answers the Elasticsearch 7 API Monocle speaks). Each runs as a StatefulSet of its own
    (NAME-elastic, NAME-opensearch) behind the Service NAME-elastic. A change is refused unless
    onEngineChange says how the data moves."""
    on_engine_change: Literal["Recrawl"] | None = None
    """How Monocle's data moves when the engine changes. Recrawl: the new engine starts empty on a volume
    of its own, Monocle's API makes its indices there again, and the crawlers fetch everything anew
    from the providers (Monocle's indices hold nothing the providers do not); the old engine's
    StatefulSet goes and its volume is kept, for its PersistentVolumeClaim to be deleted once the new
    engine serves. Unset, a change of engine is refused."""
    image: str | None = Field(default=None, min_length=1)
    """The engine's container image; unset, docker.elastic.co/elasticsearch/elasticsearch:7.17.5 for
    Elasticsearch and opensearchproject/opensearch:2.19.6 for OpenSearch."""
    storage_class_name: str | None = Field(default=None, min_length=1)
    """StorageClass of the data volume; the cluster's default class when unset. Fixed after creation."""
    storage_size: str = Field(
        default="1Gi",
        json_schema_extra=cel(
            ("isQuantity(self)", "elastic.storageSize must be a Kubernetes quantity, such as 1Gi or 500Mi"),
            {
                "rule": "!isQuantity(self) || !isQuantity(oldSelf) "
                "|| !quantity(self).isLessThan(quantity(oldSelf))",
                "message": "elastic.storageSize cannot shrink: a PersistentVolumeClaim can only grow",
            },
        ),
    )
    """Size of the data volume. It may grow later, where the StorageClass allows volume expansion."""
    java_heap: str = Field(
        default="512m",
        json_schema_extra=cel(
            (
                "self.matches('^[1-9][0-9]*[kmgKMG]$')",
                "elastic.javaHeap must be a JVM heap size: a number and a unit k, m or g, such as 512m or 1g",
            )
        ),
    )
    """Java heap of the engine (both -Xms and -Xmx)."""

    model_config = ConfigDict(
        json_schema_extra=cel(
            (
                # has(): the API server checks the schema's default ({}) against these rules too.
                "!has(self.engine) || !has(oldSelf.engine) || self.engine == oldSelf.engine "
                "|| has(self.onEngineChange)",
                "elastic.engine cannot change without elastic.onEngineChange, which says how the data "
                "moves: Recrawl starts the new engine empty and crawls everything again",
            ),
            (
                "!has(self.engine) || !has(oldSelf.engine) || self.engine == oldSelf.engine "
                "|| !has(self.image) || !has(oldSelf.image) || self.image != oldSelf.image",
                "elastic.image names the old engine's image: unset it (each engine has its default), "
                "or set the new engine's, in the same change as elastic.engine",
            ),
            (
                "has(self.storageClassName) == has(oldSelf.storageClassName) && "
                "(!has(self.storageClassName) || self.storageClassName == oldSelf.storageClassName)",
                "elastic.storageClassName is fixed once the volume exists; "
                "create a new instance to move to another storage class",
            ),
        )
    )


class IngressTLS(ApiModel):
    """TLS of the Ingress."""

    secret_name: str = Field(min_length=1, max_length=253)
    """Secret holding the certificate and key for the host (for example, filled by cert-manager)."""


class IngressSpec(ApiModel):
    """Expose the Monocle web UI and API through an Ingress."""

    host: str = Field(min_length=1, max_length=253)
    """Host name served by the Ingress."""
    ingress_class_name: str | None = Field(default=None, min_length=1)
    """IngressClass that serves the Ingress; the cluster's default class when unset."""
    tls: IngressTLS | None = None
    """Serve the host over TLS with this certificate. Without it, the Ingress has no TLS."""
    annotations: dict[str, str] | None = None
    """Annotations added to the Ingress (for example, cert-manager.io/cluster-issuer)."""


class ResourcesSpec(ApiModel):
    """Compute resources per component (core/v1 ResourceRequirements); defaults fit a small instance."""

    elastic: dict[str, Any] | None = Field(default=None, json_schema_extra=_RESOURCES_DOC)
    """Resources of the search engine's container."""
    api: dict[str, Any] | None = Field(default=None, json_schema_extra=_RESOURCES_DOC)
    """Resources of the API container (also used by the update-idents Job)."""
    crawler: dict[str, Any] | None = Field(default=None, json_schema_extra=_RESOURCES_DOC)
    """Resources of the crawler container."""


class MonocleSpec(ApiModel):
    """The desired Monocle deployment."""

    monocle_public_url: str = Field(
        default="http://localhost:8090",
        alias="monoclePublicURL",
        max_length=2048,
        json_schema_extra=cel(
            (
                "self.startsWith('http://') || self.startsWith('https://')",
                "monoclePublicURL must start with http:// or https://, for example https://monocle.example.com",
            )
        ),
    )
    """URL under which users reach Monocle (MONOCLE_PUBLIC_URL)."""
    image: str = Field(default=DEFAULT_IMAGE, min_length=1)
    """Monocle container image, for the API, the crawler and the update-idents Job."""
    # A default of {} (not the model's dump) lets the API server fill each nested default,
    # and keeps an unset storageClassName unset instead of null.
    elastic: ElasticSpec = Field(default_factory=ElasticSpec, json_schema_extra={"default": {}})
    """The search engine: Elasticsearch or OpenSearch."""
    ingress: IngressSpec | None = None
    """Optional Ingress in front of the API Service."""
    secret_ref: SecretReference | None = None
    """A Secret of the user (provider tokens and the like) added to the API's and crawler's environment.

    It is not owned by the instance, so it survives the instance's deletion. Its keys win over
    the generated Secret's."""
    config_map_ref: ConfigMapReference | None = None
    """A ConfigMap of the user holding config.yaml, used instead of the generated one.

    It is not owned by the instance, so it survives the instance's deletion."""
    resources: ResourcesSpec = Field(default_factory=ResourcesSpec, json_schema_extra={"default": {}})
    """Compute resources of each component."""


class MonocleStatus(ApiModel):
    """The observed state of the instance, written only by the operator."""

    conditions: list[Condition] | None = Field(
        default=None,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
    )
    """Ready, ElasticReady, ApiReady, CrawlerReady and ConfigValid; Ready summarises the others."""
    observed_generation: int | None = None
    """The .metadata.generation the status was last computed from."""
    config_hash: str | None = None
    """Hash of the config.yaml that update-idents last ran for (or that the instance started with)."""
    update_idents_job: str | None = None
    """Name of the last update-idents Job the operator created."""


# The update-idents Job is named {name}-update-idents-{10 hex digits}, and a Job's name
# becomes a pod label value, which may not exceed 63 characters.
_NAME_LENGTH_RULE = {
    "rule": "size(self.metadata.name) <= 38",
    "message": "metadata.name must be at most 38 characters: the update-idents Job is named "
    "{name}-update-idents-{hash}, which must fit in 63",
}

MONOCLE = CustomResource(
    group=GROUP,
    version=VERSION,
    kind="Monocle",
    plural="monocles",
    spec_model=MonocleSpec,
    status_model=MonocleStatus,
    description="A Monocle deployment (its search engine, API and crawler) managed by the Monocle operator.",
    categories=("monocle",),
    printer_columns=(
        PrinterColumn("URL", ".spec.monoclePublicURL", description="Public URL"),
        PrinterColumn(
            "Ready", '.status.conditions[?(@.type=="Ready")].status', description="Ready condition"
        ),
        PrinterColumn(
            "Reason", '.status.conditions[?(@.type=="Ready")].reason', description="Why (not) ready"
        ),
        PrinterColumn("Image", ".spec.image", description="Monocle image", priority=1),
        PrinterColumn("Engine", ".spec.elastic.engine", description="Search engine", priority=1),
        PrinterColumn("Config", ".status.configHash", description="Applied config hash", priority=1),
        PrinterColumn("Age", ".metadata.creationTimestamp", "date"),
    ),
    # The Go operator's sample has a spec; an empty one means every default.
    spec_required=False,
    validations=(_NAME_LENGTH_RULE,),
)
