"""TypesenseCluster, version v1alpha1, wire-compatible with the Go operator's resource.

Field names and defaults follow the specification's spec table, so a manifest
written for the Go operator is accepted here. CEL rules refuse, at admission,
what the Go operator only warns about in its documentation (an even cluster
size, a raft endpoint longer than 64 characters, a storage class changed
after the volumes exist).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import ConfigDict, Field

from operator_core.apimodel import ApiModel, cel, preserve_unknown
from operator_core.conditions import Condition
from operator_core.crdgen import CustomResource, PrinterColumn, ScaleSubresource
from typesense_operator.api.destinations import BackupDestination
from typesense_operator.api.tls import TlsSpec, TlsStatus

__all__ = ["TYPESENSE_CLUSTER", "TypesenseClusterSpec", "TypesenseClusterStatus", "cron_schedule"]

GROUP = "ts.opentelekomcloud.com"
VERSION = "v1alpha1"
DEFAULT_METRICS_IMAGE = "quay.io/akyriako/typesense-prometheus-exporter:0.1.9"
DEFAULT_HEALTHCHECK_IMAGE = "quay.io/akyriako/typesense-healthcheck:0.2.0"
LogLevel = Literal[-4, 0, 4, 8]
"""A log level of the Go operator's sidecars (slog: -4 debug, 0 info, 4 warn, 8 error)."""
DEFAULT_SCRAPER_IMAGE = "typesense/docsearch-scraper:0.12.0.rc14"
# One cron field: numbers, ranges, steps, lists, names (JAN, MON) or *; CEL's RE2 syntax.
_CRON_FIELD = r"[0-9*/,A-Za-z-]+"
# The macros a CronJob's schedule takes (the Go operator's list, less @reboot, which a CronJob has not).
_CRON_MACROS = ("@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly")
# A DNS host name: labels of letters, digits and '-', joined by dots.
_HOST_NAME = r"[a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?([.][a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?)*"


def cron_schedule() -> Any:
    """A schedule field: 5 cron fields or a macro, checked by the API server (CEL)."""
    return Field(
        max_length=128,
        json_schema_extra=cel(
            (
                f"self.matches('^{_CRON_FIELD}( {_CRON_FIELD}){{4}}$') || self in {list(_CRON_MACROS)}",
                "schedule must be a cron expression of 5 fields "
                "(minute hour day-of-month month day-of-week), without seconds or a time zone, "
                "for example '*/30 * * * *', or one of " + ", ".join(_CRON_MACROS) + " (there is no "
                "@reboot)",
            )
        ),
    )


class SecretReference(ApiModel):
    """A Secret in the cluster's namespace."""

    name: str = Field(min_length=1, max_length=253)
    """Name of the Secret. It must hold the admin API key under the key typesense-api-key."""


class ConfigMapReference(ApiModel):
    """A ConfigMap in the cluster's namespace."""

    name: str = Field(min_length=1, max_length=253)
    """Name of the ConfigMap."""


_QUANTITY_RULE = "isQuantity(self)"


class StorageAutoGrow(ApiModel):
    """Volumes grown before they fill: when a node's file system (as Typesense's own disk metrics
    report it) is ``thresholdPercent`` full, every node's claim is grown by ``step``, up to ``maxSize``.
    Only on a StorageClass that allows volume expansion; each growth is an Event (StorageAutoGrown), and
    a volume past the threshold at ``maxSize`` is a Warning and StorageReady False
    (AutoGrowLimitReached)."""

    enabled: bool = False
    """Off by default: a volume grows only when the spec's size does."""
    threshold_percent: int = Field(default=80, ge=50, le=95)
    """How full (used of total, in percent) a node's file system may be before the volumes grow."""
    step: str = Field(
        default="1Gi",
        json_schema_extra=cel(
            (_QUANTITY_RULE, "storage.autoGrow.step must be a Kubernetes quantity, such as 1Gi"),
            (
                "!isQuantity(self) || quantity(self).isGreaterThan(quantity('0'))",
                "storage.autoGrow.step must be more than 0",
            ),
        ),
    )
    """How much each growth adds to every claim."""
    max_size: str | None = Field(
        default=None,
        json_schema_extra=cel(
            (_QUANTITY_RULE, "storage.autoGrow.maxSize must be a Kubernetes quantity, such as 20Gi")
        ),
    )
    """The size no growth goes beyond (required when enabled)."""

    model_config = ConfigDict(
        json_schema_extra=cel(
            (
                "!self.enabled || has(self.maxSize)",
                "storage.autoGrow.maxSize is required when autoGrow is enabled: growth needs a bound",
            )
        )
    )


class StorageSpec(ApiModel):
    """The persistent volume behind each Typesense node."""

    size: str = Field(
        default="100Mi",
        json_schema_extra=cel(
            ("isQuantity(self)", "storage.size must be a Kubernetes quantity, such as 100Mi or 10Gi"),
            (
                "!isQuantity(self) || !isQuantity(oldSelf) "
                "|| quantity(self).compareTo(quantity(oldSelf)) >= 0",
                "storage.size may grow, never shrink: a volume cannot be made smaller",
            ),
        ),
    )
    """Size of each node's PersistentVolume, as a Kubernetes quantity. It may grow, never shrink: each
    node's claim is expanded where its StorageClass allows volume expansion (the StorageReady condition
    says when it does not)."""
    storage_class_name: str = Field(
        default="standard",
        min_length=1,
        json_schema_extra=cel(
            (
                "self == oldSelf",
                "storage.storageClassName is fixed once the volumes exist (a StatefulSet's volume claim "
                "templates cannot change); create a new cluster to move to another storage class",
            )
        ),
    )
    """StorageClass of the volumes. Fixed after creation."""
    access_mode: Literal["ReadWriteOnce", "ReadWriteMany"] = "ReadWriteOnce"
    """Access mode of each node's volume. Fixed after creation."""
    annotations: dict[str, str] | None = None
    """Annotations of each node's PersistentVolumeClaim (a storage driver's settings, say). Fixed after
    creation."""
    auto_grow: StorageAutoGrow | None = None
    """Grow the volumes before they fill (off unless enabled)."""

    model_config = ConfigDict(
        json_schema_extra=cel(
            (
                "!has(self.autoGrow) || !has(self.autoGrow.maxSize) || !isQuantity(self.autoGrow.maxSize) "
                "|| !isQuantity(self.size) "
                "|| quantity(self.autoGrow.maxSize).compareTo(quantity(self.size)) >= 0",
                "storage.autoGrow.maxSize must be at least storage.size",
            ),
            (
                "self.accessMode == oldSelf.accessMode && has(self.annotations) == has(oldSelf.annotations) "
                "&& (!has(self.annotations) || self.annotations == oldSelf.annotations)",
                "storage.accessMode and storage.annotations are fixed once the volumes exist (a "
                "StatefulSet's volume claim templates cannot change); create a new cluster to change them",
            ),
        )
    )


class ServiceSpec(ApiModel):
    """The client Service (<name>-svc) that serves the REST API to ready nodes."""

    type: Literal["ClusterIP", "LoadBalancer"] = "ClusterIP"
    """ClusterIP (inside the cluster) or LoadBalancer (an external address from the cloud's load
    balancer)."""
    external_traffic_policy: Literal["Cluster", "Local"] | None = None
    """How external traffic reaches the nodes (Local keeps the client's address); for a LoadBalancer
    Service only."""
    annotations: dict[str, str] | None = None
    """Annotations of the client Service (a load balancer's settings, say); they win over
    serviceAnnotations."""

    model_config = ConfigDict(
        json_schema_extra=cel(
            (
                "!has(self.externalTrafficPolicy) || self.type == 'LoadBalancer'",
                "service.externalTrafficPolicy needs service.type: LoadBalancer (a ClusterIP Service has "
                "no external traffic)",
            )
        )
    )


class ReadOnlyRootFilesystemSpec(ApiModel):
    """The proxy's container with a read-only root filesystem."""

    security_context: dict[str, Any] | None = Field(default=None, json_schema_extra=preserve_unknown())
    """The proxy container's security context (a core/v1 SecurityContext); by default the operator's,
    with readOnlyRootFilesystem: true."""
    volumes: list[dict[str, Any]] | None = Field(default=None, max_length=16)
    """Extra volumes of the proxy's pod (core/v1 Volume objects)."""
    volume_mounts: list[dict[str, Any]] | None = Field(default=None, max_length=16)
    """Extra mounts of the proxy container (core/v1 VolumeMount objects)."""


class IngressSpec(ApiModel):
    """Expose the cluster through an Ingress, behind an nginx reverse proxy that can check the referer."""

    host: str = Field(min_length=1)
    """Host name served by the Ingress."""
    ingress_class_name: str = Field(min_length=1)
    """IngressClass that serves the Ingress."""
    cluster_issuer: str | None = None
    """cert-manager ClusterIssuer that issues the TLS certificate. Without it, the Ingress has no TLS."""
    referer: str | None = None
    """Only requests whose Referer matches this host name reach Typesense."""
    http_directives: str | None = None
    """Extra nginx directives for the http block of the proxy."""
    server_directives: str | None = None
    """Extra nginx directives for the server block of the proxy."""
    location_directives: str | None = None
    """Extra nginx directives for the location block of the proxy."""
    annotations: dict[str, str] | None = None
    """Annotations added to the Ingress."""
    labels: dict[str, str] | None = None
    """Labels added to the Ingress (the operator's own labels win)."""
    service_annotations: dict[str, str] | None = None
    """Annotations of the proxy's Service."""
    tls_secret_name: str | None = Field(default=None, min_length=1, max_length=253)
    """Secret with the certificate the Ingress serves; by default <name>-reverse-proxy-tls, which
    cert-manager fills when clusterIssuer is set. With either, the Ingress serves TLS."""
    path: str = Field(
        default="/",
        json_schema_extra=cel(("self.startsWith('/')", "ingress.path must start with '/'")),
    )
    """Path of the Ingress rule."""
    path_type: Literal["Exact", "Prefix", "ImplementationSpecific"] = "ImplementationSpecific"
    """How the Ingress matches path."""
    image: str = Field(default="nginx:alpine", min_length=1)
    """Container image of the nginx proxy."""
    resources: dict[str, Any] | None = Field(default=None, json_schema_extra=preserve_unknown())
    """Compute resources of the proxy container (a core/v1 ResourceRequirements); by default 100m CPU
    (at most 150m) and 32Mi of memory (at most 64Mi)."""
    read_only_root_filesystem: ReadOnlyRootFilesystemSpec | None = None
    """Run the proxy with a read-only root filesystem; nginx then writes only to an emptyDir at /tmp
    (added unless volumeMounts mount something there)."""


# Gateway API's own patterns, so that what the HTTPRoute CRD would refuse is refused here first.
_GATEWAY_HOSTNAME = r"^(\*\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
_DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
_SECTION_NAME = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"


class GatewayParentRef(ApiModel):
    """The Gateway an HTTPRoute attaches to."""

    name: str = Field(min_length=1, max_length=253)
    """Name of the Gateway."""
    namespace: str | None = Field(default=None, min_length=1, max_length=63, pattern=_DNS_LABEL)
    """Namespace of the Gateway; the cluster's own by default."""
    section: str | None = Field(default=None, min_length=1, max_length=253, pattern=_SECTION_NAME)
    """The Gateway's listener to attach to (its sectionName); every listener that allows the route by
    default."""


class HttpRouteSpec(ApiModel):
    """A Gateway API HTTPRoute (<cluster>-<name>) that sends a Gateway's traffic to the client Service."""

    enabled: bool = True
    """Whether the route exists; false removes it (and its ReferenceGrant) and keeps the entry."""
    name: str = Field(min_length=1, max_length=63, pattern=_DNS_LABEL)
    """Name of the entry; the HTTPRoute is named <cluster>-<name>."""
    parent_ref: GatewayParentRef
    """The Gateway the route attaches to."""
    hostnames: list[str] | None = Field(
        default=None,
        min_length=1,
        max_length=16,
        json_schema_extra={"items": {"type": "string", "maxLength": 253, "pattern": _GATEWAY_HOSTNAME}},
    )
    """Host names the route answers (a leading *. matches every subdomain); every host name of the
    Gateway's listener when unset."""
    path: str = Field(
        default="/",
        max_length=1024,
        json_schema_extra=cel(("self.startsWith('/')", "httpRoutes[].path must start with /")),
    )
    """Path the route matches."""
    path_type: Literal["Exact", "PathPrefix", "ImplementationSpecific"] = "PathPrefix"
    """How path is matched."""
    labels: dict[str, str] | None = None
    """Labels of the HTTPRoute (the operator's own labels win)."""
    annotations: dict[str, str] | None = None
    """Annotations of the HTTPRoute."""
    reference_grant: bool = False
    """Create a ReferenceGrant (<cluster>-<name>-reference-grant) in the Gateway's namespace that lets
    HTTPRoutes of the cluster's namespace refer to that Gateway, as the Go operator does. Only a
    Gateway in another namespace needs one; for one in the cluster's namespace nothing is created. It
    is removed with the route, the entry or the cluster (a finalizer holds the cluster until it is
    gone, since an object in another namespace cannot be owned)."""


class DocSearchScraperSpec(ApiModel):
    """A DocSearch scraper, run on a schedule as a CronJob."""

    name: str = Field(
        max_length=52,
        json_schema_extra=cel(
            (
                "self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",
                "scraper name must be a DNS label: lower-case letters, digits and '-', "
                "starting and ending with a letter or digit",
            )
        ),
    )
    """Name of the scraper; part of the CronJob's name, and the index name of a generated config."""
    image: str = Field(default=DEFAULT_SCRAPER_IMAGE, min_length=1)
    """Container image of the scraper."""
    config: str | None = Field(default=None, min_length=1)
    """The scraper's JSON configuration. Without it, one for a Docusaurus site at host is generated."""
    host: str | None = Field(
        default=None,
        max_length=253,
        json_schema_extra=cel(
            (
                f"self.matches('^{_HOST_NAME}$')",
                "scraper host must be a host name, such as docs.example.com (no scheme, no path)",
            )
        ),
    )
    """Host name of the site to scrape when config is not given: the generated config starts at
    <protocol>://<host> and reads its sitemap.xml."""
    protocol: Literal["http", "https"] = "https"
    """Scheme of the site at host, for the generated config."""
    schedule: str = cron_schedule()
    """Cron expression with five fields (no time zone, no seconds), or @hourly, @daily and the like."""
    auth_configuration: SecretReference | None = None
    """Secret whose keys become the scraper's environment: the credentials of a site behind a login
    (the docsearch-scraper reads them from its environment)."""

    model_config = ConfigDict(
        json_schema_extra=cel(
            (
                "has(self.config) || has(self.host)",
                "a scraper needs config (its JSON configuration) or host (the site to scrape)",
            )
        )
    )


class MetricsSpec(ApiModel):
    """The Prometheus exporter sidecar and its PodMonitor."""

    release: str = Field(min_length=1)
    """The Prometheus release (its `release` label) that should scrape the cluster."""
    image: str = Field(default=DEFAULT_METRICS_IMAGE, min_length=1)
    """Container image of the metrics exporter."""
    interval: int = Field(default=15, ge=15, le=60)
    """Seconds between two scrapes, 15 to 60."""
    resources: dict[str, Any] | None = Field(default=None, json_schema_extra=preserve_unknown())
    """Compute resources of the exporter container (a core/v1 ResourceRequirements); by default
    100m CPU, 32Mi of memory, at most 64Mi."""
    log_level: LogLevel = 0
    """The exporter's log level (its LOG_LEVEL): -4 debug, 0 info, 4 warn, 8 error."""


class HealthCheckSpec(ApiModel):
    """The Go operator's health-check sidecar, accepted for its manifests. This operator runs no such
    sidecar: it probes each node's /status, /health and raft state itself, and its quorum decisions
    need no help from inside the pod."""

    image: str = Field(default=DEFAULT_HEALTHCHECK_IMAGE, min_length=1)
    """Container image of the Go operator's health-check sidecar (not run here)."""
    resources: dict[str, Any] | None = Field(default=None, json_schema_extra=preserve_unknown())
    """Compute resources of that sidecar (not run here)."""
    log_level: LogLevel = 0
    """Its log level: -4 debug, 0 info, 4 warn, 8 error (not run here)."""


class SecurityContextSpec(ApiModel):
    """Security contexts that replace the operator's own. Without them every pod meets the restricted
    Pod Security Standard; with them, meeting it is the author's choice."""

    pod: dict[str, Any] | None = Field(default=None, json_schema_extra=preserve_unknown())
    """The nodes' pod security context (a core/v1 PodSecurityContext), instead of the operator's
    (non-root user 10000, group 3000, fsGroup 2000, the runtime's seccomp profile)."""
    typesense: dict[str, Any] | None = Field(default=None, json_schema_extra=preserve_unknown())
    """The Typesense container's security context (a core/v1 SecurityContext), instead of the
    operator's (no privilege escalation, every capability dropped)."""
    healthcheck: dict[str, Any] | None = Field(default=None, json_schema_extra=preserve_unknown())
    """The Go operator's health-check sidecar's security context; accepted, no such sidecar runs here."""
    metrics: dict[str, Any] | None = Field(default=None, json_schema_extra=preserve_unknown())
    """The metrics exporter container's security context, instead of the operator's."""


class BackupReference(ApiModel):
    """A TypesenseBackup in the cluster's namespace."""

    name: str = Field(min_length=1, max_length=253)
    """Name of the TypesenseBackup. It must be Completed."""


class BackupLocation(ApiModel):
    """A backup found by where it is: for when its TypesenseBackup is gone too (its namespace, or the
    whole Kubernetes cluster, lost)."""

    destination: BackupDestination
    """Where the backups went (the same block as the backups' own)."""
    path: str = Field(
        min_length=1,
        max_length=1024,
        json_schema_extra=cel(
            ("!self.startsWith('/') && !self.contains('..')", "path must be a relative path without '..'")
        ),
    )
    """The backup's folder under the destination's prefix (or subPath): <namespace>/<cluster>/<backup>
    for the backups this operator makes (a backup's status.location ends with it)."""


class FromBackup(ApiModel):
    """The backup a new cluster starts from: exactly one of backup and location."""

    backup: BackupReference | None = None
    """A Completed TypesenseBackup in the cluster's namespace (of this or another cluster)."""
    location: BackupLocation | None = None
    """A backup by its destination and path, with no TypesenseBackup needed."""

    model_config = ConfigDict(
        json_schema_extra=cel(
            ("has(self.backup) != has(self.location)", "fromBackup is exactly one of backup and location")
        )
    )


class BootstrapSpec(ApiModel):
    """How a new cluster gets its first data. Set when the cluster is created, never changed after."""

    from_backup: FromBackup | None = None
    """Restore a backup: the first node's volume is filled from it (every file checked against the
    backup's manifest) before that node starts; the cluster comes up as that one node and then grows
    to its replicas, the other nodes catching up from it."""


class NodeLossSpec(ApiModel):
    """What the operator does with a member whose Kubernetes node is lost for good."""

    policy: Literal["Wait", "Replace"] = "Wait"
    """Wait: the status names the lost node and nothing is deleted; the member comes back with its
    node. Replace: once the node has been NotReady or unreachable for delaySeconds, or at once when it
    is tainted node.kubernetes.io/out-of-service or its Node is deleted, the member's pod and claim are
    deleted so that its StatefulSet makes it again on a node that can take it, where it catches up
    from its peers. Only while the other members are a healthy quorum with a leader, never for a
    member that still answers, and one member at a time."""
    delay_seconds: int = Field(default=300, ge=30, le=604800)
    """How long a node may be NotReady or unreachable before its member is replaced (policy Replace):
    long enough for a reboot, short enough not to run a member short for long."""


class TypesenseClusterSpec(ApiModel):
    """The desired Typesense cluster."""

    image: str = Field(min_length=1)
    """Typesense container image, for example typesense/typesense:27.1."""
    image_pull_secrets: list[SecretReference] | None = Field(default=None, max_length=16)
    """Secrets with the registry credentials to pull the images of the cluster's pods (the nodes, the
    referer proxy, the scrapers)."""
    admin_api_key: SecretReference | None = None
    """Secret holding the admin API key. Without it, the operator generates one."""
    replicas: int = Field(
        default=3,
        json_schema_extra=cel(
            ("self in [1, 3, 5, 7]", "replicas must be 1, 3, 5 or 7: raft needs an odd size")
        ),
    )
    """Number of Typesense nodes: 1, 3, 5 or 7."""
    api_port: int = Field(default=8108, ge=1, le=65535)
    """Port of the REST API."""
    peering_port: int = Field(default=8107, ge=1, le=65535)
    """Port of raft peering between nodes."""
    health_probe_timeout_in_milliseconds: int = Field(default=500, ge=500, le=60000)
    """How long the operator waits for a node's answer to its health probes (/status, /health). The
    operator waits at least OPERATOR_SUITE_PROBE_TIMEOUT (2 s by default) all the same, so that a busy
    operator never mistakes a healthy node for a silent one."""
    reset_peers_on_error: bool = True
    """Let Typesense reset its peers when it hits an error at start."""
    force_reset_peers_config_on_update: bool = True
    """After each rewrite of the nodes list (a quorum recovery, a scale, a pod's new address), annotate
    the pods so that their kubelet refreshes the mounted nodes file at once, instead of at its next
    periodic sync (a minute or more); Typesense then reads the new raft configuration within 10 s."""
    enable_cors: bool = False
    """Enable CORS on the API."""
    cors_domains: str | None = None
    """Comma-separated list of domains allowed by CORS; needs enableCors."""
    resources: dict[str, Any] | None = Field(default=None, json_schema_extra=preserve_unknown())
    """Compute resources of each Typesense container (a core/v1 ResourceRequirements)."""
    node_selector: dict[str, str] | None = None
    """Node labels a node must have to run a Typesense pod."""
    tolerations: list[dict[str, Any]] | None = Field(default=None, json_schema_extra={"maxItems": 64})
    """Tolerations of the Typesense pods (core/v1 Toleration objects)."""
    affinity: dict[str, Any] | None = Field(default=None, json_schema_extra=preserve_unknown())
    """Affinity rules of the Typesense pods (a core/v1 Affinity)."""
    additional_server_configuration: ConfigMapReference | None = None
    """ConfigMap of extra TYPESENSE_* settings. Settings in this spec win over it. An edit of its
    content rolls the nodes, one at a time."""
    service_annotations: dict[str, str] | None = None
    """Annotations of the client Service. Deprecated upstream for service.annotations, which win."""
    stateful_set_annotations: dict[str, str] | None = None
    """Annotations of the StatefulSet."""
    pod_annotations: dict[str, str] | None = None
    """Annotations of the Typesense pods. A change rolls the nodes, one at a time."""
    pods_inherit_stateful_set_annotations: bool = False
    """Give the pods the StatefulSet's annotations too (podAnnotations win)."""
    priority_class_name: str | None = Field(default=None, min_length=1, max_length=253)
    """PriorityClass of the Typesense pods."""
    ignore_annotations_from_external_mutations: list[str] | None = Field(default=None, max_length=64)
    """Accepted for the Go operator's manifests: annotation keys that other tools add to the StatefulSet
    or its pod template and that must not count as drift. This operator never reverts what another tool
    writes: server-side apply owns only the fields it sets, so every key is ignored already."""
    service: ServiceSpec | None = None
    """The client Service's type, external traffic policy and annotations."""
    storage: StorageSpec = StorageSpec()
    """Persistent storage of each node."""
    ingress: IngressSpec | None = None
    """Optional Ingress with a referer-checking nginx proxy."""
    http_routes: list[HttpRouteSpec] | None = Field(
        default=None,
        max_length=16,
        json_schema_extra=cel(
            ("self.all(a, self.exists_one(b, b.name == a.name))", "httpRoutes[].name must be unique")
        ),
    )
    """Gateway API HTTPRoutes to the client Service, each attached to a Gateway (needs the Gateway API
    CRDs; the RoutesReady condition says when they are missing)."""
    scrapers: list[DocSearchScraperSpec] | None = Field(
        default=None,
        max_length=32,
        json_schema_extra=cel(
            ("self.all(a, self.exists_one(b, b.name == a.name))", "scraper names must be unique")
        ),
    )
    """DocSearch scrapers run as CronJobs."""
    metrics: MetricsSpec | None = None
    """Optional metrics exporter sidecar and PodMonitor."""
    healthcheck: HealthCheckSpec | None = None
    """The Go operator's health-check sidecar, accepted for its manifests; not run here (the operator
    probes the nodes itself)."""
    security_context: SecurityContextSpec | None = None
    """Security contexts that replace the operator's restricted ones."""
    topology_spread_constraints: list[dict[str, Any]] | None = Field(
        default=None, json_schema_extra={"maxItems": 16}
    )
    """How Typesense pods spread across topology domains (core/v1 TopologySpreadConstraint objects)."""
    incremental_quorum_recovery: bool = False
    """When recovering quorum, add nodes back one at a time instead of all at once."""
    bootstrap: BootstrapSpec | None = None
    """Where a new cluster's data comes from: empty (not set), or a backup (fromBackup)."""
    node_loss: NodeLossSpec | None = None
    """A member whose Kubernetes node is lost: waited for (the default), or replaced on another node
    after a delay, with nothing lost (docs/typesense-quorum.md, "Node faults")."""
    tls: TlsSpec | None = None
    """Serve the REST API over HTTPS, with a certificate from a Secret or a cert-manager issuer. Every
    client of the operator's verifies it (its own calls, the proxy, the routes' Gateway through a
    BackendTLSPolicy, the scrapers and the exporter); plain HTTP is refused by the nodes."""

    model_config = ConfigDict(
        json_schema_extra=cel(
            ("self.apiPort != self.peeringPort", "apiPort and peeringPort must differ"),
            ("!has(self.corsDomains) || self.enableCors", "corsDomains needs enableCors: true"),
            (
                "has(self.bootstrap) == has(oldSelf.bootstrap)"
                " && (!has(self.bootstrap) || self.bootstrap == oldSelf.bootstrap)",
                "bootstrap is set when the cluster is created and never changed",
            ),
        )
    )


Phase = Literal[
    "Bootstrapping",
    "QuorumReady",
    "QuorumNotReady",
    "QuorumDegraded",
    "QuorumUpgraded",
    "QuorumNeedsIntervention",
]


class RaftPosition(ApiModel):
    """A position in the raft log."""

    term: int
    """The raft term."""
    index: int
    """The log index."""


class QuorumStatus(ApiModel):
    """What the quorum reconciler observed and remembers, so a restarted operator resumes a recovery."""

    state: Literal["OK", "SPLIT_BRAIN", "NOT_READY", "ELECTION_DEADLOCK"] | None = None
    """The cluster state from the nodes' /status answers at the last check."""
    members: list[int] | None = None
    """Pod ordinals in the nodes list while it differs from every desired node (after a downgrade)."""
    unhealthy_since: datetime | None = None
    """Since when no single leader has been seen (once no member was still loading)."""
    loading_since: datetime | None = None
    """Since when some member has been loading its data (reachable, no raft state yet)."""
    survivor: int | None = None
    """The ordinal a downgrade kept, until the cluster has grown back."""
    downgraded_at: datetime | None = None
    """When the last downgrade to a single node happened; cleared once a leader is seen (the survivor
    led), which ends the survivor's own wait."""
    survivor_restarted: bool | None = None
    """Whether the last-resort restart of the survivor's pod was done for this downgrade (it is done once)."""
    held_back_restarted: bool | None = None
    """Whether the pods of a majority held back in a crash-loop back-off were restarted while no leader
    was seen (it is done once; a downgrade follows if they are held back again)."""
    last_action: str | None = None
    """The last quorum step taken: Downgrade, Upgrade, RestartSurvivor, RestartErrored, RestartHeldBack,
    Hold, or NeedsIntervention."""
    committed: RaftPosition | None = None
    """The furthest a leader was seen to have committed: a downgrade never keeps a node whose raft log
    is behind it, since that node lacks acknowledged writes."""
    last_action_at: datetime | None = None
    """When the last quorum step was taken."""
    last_action_message: str | None = None
    """What the last quorum step did, and the evidence it was taken on."""
    grace_ends_at: datetime | None = None
    """While the operator waits for raft to heal itself: when that wait ends."""
    then_action: str | None = None
    """While the operator waits: what it will do when the wait ends and nothing healed."""


class RollStatus(ApiModel):
    """A change that needs new pods, rolled by the operator one node at a time."""

    update_revision: str | None = None
    """The StatefulSet revision every node is rolled to."""
    done: list[int] | None = None
    """Pod ordinals that run the update revision."""
    to_do: list[int] | None = None
    """Pod ordinals still to restart."""
    waiting_since: datetime | None = None
    """Since when the roll has waited for a restarted node to come back (it pauses after a timeout)."""
    next: int | None = None
    """The node the roll restarts next, or waits for."""


class RestoreStatus(ApiModel):
    """The restore that gave a new cluster its data (spec.bootstrap.fromBackup)."""

    backup: str | None = None
    """The TypesenseBackup restored (none when it was found by its location)."""
    location: str | None = None
    """Where its data was read from."""
    phase: Literal["Restoring", "Completed", "Failed"] | None = None
    """Restoring (the first node's volume is being filled), Completed, or Failed (the Restored
    condition says why)."""
    started_at: datetime | None = None
    """When the restore began."""
    completed_at: datetime | None = None
    """When the first node's volume held the whole backup."""
    files: int | None = None
    """Files restored."""
    size_bytes: int | None = None
    """Bytes restored."""
    served_by_every_node_at: datetime | None = None
    """When every node first listed the restored collections with as many documents as the leader:
    Ready stays False after a restore until then."""


class NodeStatus(ApiModel):
    """One node as the operator's probes last saw it (status.nodes), for `kubectl typesense status`."""

    index: int
    """The pod's ordinal."""
    pod: str
    """The pod's name."""
    answering: bool
    """Whether the node answered the operator's probe at all."""
    state: str | None = None
    """Its raft state from /status: LEADER, FOLLOWER, CANDIDATE, NOT_READY or ERROR."""
    healthy: bool | None = None
    """Its /health answer (false: lagging, loading or failed)."""
    committed_index: int | None = None
    """Its raft committed index when the view was last refreshed."""
    lag: int | None = None
    """Entries its committed index was behind the leader's when the view was last refreshed."""
    current_revision: bool | None = None
    """Whether its pod runs the StatefulSet's update revision (False: the roll has yet to restart it)."""
    held_back: str | None = None
    """Why its kubelet does not run Typesense now (CrashLoopBackOff, ...), when it says so."""
    disk_used_bytes: int | None = None
    """Bytes used on its data volume (Typesense's /metrics.json) when the view was last refreshed."""
    disk_total_bytes: int | None = None
    """Size of its data volume (Typesense's /metrics.json)."""
    certificate_serial: str | None = None
    """The serial number of the certificate it serves (spec.tls), as the operator's last TLS handshake
    with it saw; it changes within spec.tls.refreshIntervalSeconds of a renewal, with no restart."""
    k8s_node: str | None = Field(default=None, alias="k8sNode")
    """The Kubernetes node its pod runs on."""
    k8s_node_state: str | None = Field(default=None, alias="k8sNodeState")
    """That node as the control plane sees it: Ready, NotReady, Unreachable (its kubelet stopped
    reporting: a power cut, or a kubelet cut off), OutOfService (tainted
    node.kubernetes.io/out-of-service), Gone (no such Node any more), or Unknown (the operator may not
    read Nodes)."""


class MemberReplacement(ApiModel):
    """One member replaced because its node was lost (spec.nodeLoss)."""

    member: int
    """The member's ordinal."""
    pod: str
    """Its pod, deleted with its claim and made again by the StatefulSet."""
    node: str | None = None
    """The Kubernetes node it was lost with."""
    reason: str
    """Why: the node's state and since when."""
    started_at: datetime
    """When the pod and claim were deleted."""
    completed_at: datetime | None = None
    """When the new member answered healthy (None while it catches up)."""


class NodeLossStatus(ApiModel):
    """Members replaced because their node was lost (spec.nodeLoss.policy Replace)."""

    replacing: MemberReplacement | None = None
    """The replacement under way: no other member is replaced until this one is healthy."""
    last_replaced: MemberReplacement | None = None
    """The last replacement that completed."""
    held: str | None = None
    """Why a member due for replacement is not replaced now (a second member unhealthy, say)."""


class StorageStatus(ApiModel):
    """What spec.storage.autoGrow did to the volumes."""

    auto_grown_to: str | None = None
    """The size autoGrow last grew every claim to; the volumes keep the larger of it and spec's size."""
    last_auto_growth: datetime | None = None
    """When autoGrow last grew the volumes."""
    last_auto_growth_message: str | None = None
    """Why: which node's file system was how full."""


class TypesenseClusterStatus(ApiModel):
    """The observed state of the cluster, written only by the operator."""

    conditions: list[Condition] | None = Field(
        default=None,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
    )
    """Conditions of the cluster; Ready summarises them."""
    observed_generation: int | None = None
    """The .metadata.generation the status was last computed from."""
    replicas: int | None = None
    """Number of Typesense pods that exist (the scale subresource reads it)."""
    ready_replicas: int | None = None
    """Number of Typesense pods that are ready."""
    phase: Phase | None = None
    """One word for the cluster's state, for printer columns."""
    quorum: QuorumStatus | None = None
    """Quorum health and recovery bookkeeping."""
    roll: RollStatus | None = None
    """The roll of the last change that needed new pods."""
    restore: RestoreStatus | None = None
    """The restore of spec.bootstrap.fromBackup."""
    nodes: list[NodeStatus] | None = None
    """Each node as the operator's probes saw it: rewritten when a node's state changes, and its
    counters (committed index, lag, disk) at most once a minute otherwise."""
    nodes_observed_at: datetime | None = None
    """When status.nodes was last written."""
    tls: TlsStatus | None = None
    """The certificate the nodes are given (spec.tls)."""
    storage: StorageStatus | None = None
    """What spec.storage.autoGrow did to the volumes."""
    node_loss: NodeLossStatus | None = None
    """Members replaced because their node was lost (spec.nodeLoss)."""


# raft rejects a peer address ({name}-sts-{i}.{name}-sts-svc:{peering}:{api}) longer than 64 characters.
# The largest index is 6 (replicas <= 7), so the index is always one character.
_RAFT_ENDPOINT_RULE = {
    "rule": "2 * size(self.metadata.name) + 17 + size(string(self.spec.peeringPort))"
    " + size(string(self.spec.apiPort)) <= 64",
    "message": "metadata.name is too long: the raft endpoint "
    "{name}-sts-N.{name}-sts-svc:{peeringPort}:{apiPort} must fit in 64 characters; "
    "choose a name of at most 19 characters with the default ports",
}

TYPESENSE_CLUSTER = CustomResource(
    group=GROUP,
    version=VERSION,
    kind="TypesenseCluster",
    plural="typesenseclusters",
    spec_model=TypesenseClusterSpec,
    status_model=TypesenseClusterStatus,
    description="A Typesense raft cluster managed by the Typesense operator.",
    short_names=("ts",),
    categories=("typesense",),
    printer_columns=(
        PrinterColumn("Image", ".spec.image", description="Typesense image"),
        PrinterColumn("Replicas", ".spec.replicas", "integer", "Desired number of nodes"),
        PrinterColumn(
            "Ready", '.status.conditions[?(@.type=="Ready")].status', description="Ready condition"
        ),
        PrinterColumn("Status", ".status.phase", description="Quorum state"),
        PrinterColumn("Age", ".metadata.creationTimestamp", "date"),
    ),
    scale=ScaleSubresource(".spec.replicas", ".status.replicas"),
    validations=(_RAFT_ENDPOINT_RULE,),
)
