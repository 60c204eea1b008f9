"""ClusterStack, ClusterStackRelease and ClusterAddon, version v1alpha1, in upstream's group
clusterstack.x-k8s.io.

The seed's YAML examples apply unchanged (apart from its two typos), so manifests
written for the Go operator are accepted here. CEL rules refuse at admission what
upstream checks in its webhooks: the identity of a stack (provider, name,
Kubernetes version) never changes, a provider is named unless ``noProvider`` is
set, and every listed version follows the version grammar
(:mod:`clusterstack_operator.releases.versions`).

Conditions follow Cluster API's conventions (type, status, severity, reason,
message, lastTransitionTime), with a summarised Ready, so that ``clusterctl
describe`` and people used to Cluster API read them as they read a Cluster's.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import ConfigDict, Field

from clusterstack_operator.api.reasons import SEVERITY_OF_REASON, Severity
from operator_core.apimodel import ApiModel, cel, immutable
from operator_core.conditions import Condition, ConditionShape
from operator_core.crdgen import CustomResource, PrinterColumn

__all__ = [
    "CAPI_CONDITIONS",
    "CLUSTER_ADDON",
    "CLUSTER_STACK",
    "CLUSTER_STACK_RELEASE",
    "CUSTOM_RESOURCES",
    "ClusterAddonSpec",
    "ClusterAddonStatus",
    "ClusterApiCondition",
    "ClusterStackReleaseSpec",
    "ClusterStackReleaseStatus",
    "ClusterStackSpec",
    "ClusterStackStatus",
    "GitHubReleaseSource",
    "OciReleaseSource",
    "ReleaseSourceSpec",
    "SecretKeyReference",
]

GROUP = "clusterstack.x-k8s.io"
CATEGORIES = ("cluster-api",)
"""Cluster API's own category (``kubectl get cluster-api`` lists these with Clusters and classes). No
category of their own: kubectl reads a category before a resource's name, so one named ``clusterstack``
made ``kubectl get clusterstack NAME`` ask for the name in all three kinds, and fail."""
VERSION = "v1alpha1"
# The version grammar of clusterstack_operator.releases.versions, as the API server's RE2 sees it: vN,
# vN-<word>.<number> or vN-<word>-<number>, vN-sha.<hash>. What it admits, the parser reads (a unit
# test holds them together): a version refused here is refused with the object, not dropped later.
VERSION_PATTERN = r"^v(0|[1-9][0-9]*)(-([a-z]+[.-][0-9]+|sha[.-][0-9a-z]+))?$"
_PART_PATTERN = r"^[a-z0-9]+$"


class ObjectReference(ApiModel):
    """A reference to an object of any kind, as Kubernetes' ObjectReference."""

    api_version: str = Field(min_length=1)
    """API version of the referent, such as infrastructure.clusterstack.x-k8s.io/v1alpha1."""
    kind: str = Field(min_length=1)
    """Kind of the referent."""
    name: str = Field(min_length=1, max_length=253)
    """Name of the referent."""
    namespace: str | None = None
    """Namespace of the referent; the referring object's own when left out."""


class ClusterApiCondition(ApiModel):
    """One aspect of the object's state, as Cluster API writes its conditions (v1beta1)."""

    type: str = Field(min_length=1)
    """Type of condition in CamelCase, such as Ready or ClusterStackReleaseDownloaded."""
    status: Literal["True", "False", "Unknown"]
    """Status of the condition."""
    severity: Literal["", "Error", "Warning", "Info"] | None = None
    """How bad a False condition is: Error, Warning or Info; empty when True."""
    reason: str | None = None
    """A CamelCase word for the last transition, for machines."""
    message: str | None = None
    """A human-readable explanation of the last transition."""
    observed_generation: int | None = None
    """The .metadata.generation the condition was set from."""
    last_transition_time: datetime
    """When the status last changed from one value to another."""


class SecretKeyReference(ApiModel):
    """A key of a Secret in the ClusterStack's namespace."""

    name: str = Field(min_length=1, max_length=253)
    """The Secret's name."""
    key: str | None = Field(default=None, min_length=1, max_length=253)
    """The key within it; each field that takes one says its default."""


class OciReleaseSource(ApiModel):
    """An OCI repository holding one tag per release, as csctl or plain ``oras push`` publishes them."""

    repository: str = Field(min_length=3, max_length=512, pattern=r"^[^/\s]+/[^\s]+$")
    """host[:port]/path of the repository, such as registry.example.com/kaas/cluster-stacks (upstream's
    OCI_REGISTRY and OCI_REPOSITORY in one)."""
    credentials_secret_ref: SecretKeyReference | None = None
    """A Secret with the keys username and password, or accessToken (sent as a bearer token, as
    upstream's OCI_ACCESS_TOKEN). Without it the registry is read anonymously. Read when the stack first
    needs the registry, and again after the registry refuses it: a corrected password is used at the
    next retry. key is not used."""
    ca_secret_ref: SecretKeyReference | None = None
    """A CA bundle to trust for the registry's certificate besides the system's: a Secret's key (ca.crt
    when key is left out), such as the Secret of a cert-manager Certificate."""
    plain_http: bool = Field(default=False, alias="plainHTTP")
    """Speak plain HTTP to the registry (a registry without TLS); HTTPS otherwise."""


class GitHubReleaseSource(ApiModel):
    """A GitHub repository whose releases are the stack's releases."""

    organization: str = Field(min_length=1, max_length=100)
    """The organisation or user owning the repository (upstream's GIT_ORG_NAME)."""
    repository: str = Field(min_length=1, max_length=100)
    """The repository (upstream's GIT_REPOSITORY_NAME)."""
    token_secret_ref: SecretKeyReference | None = None
    """A Secret's key holding a token (token when key is left out), for a private repository or for
    GitHub's higher rate limit. Read as the OCI credentials are."""
    api_url: str | None = Field(default=None, alias="apiURL", max_length=512, pattern=r"^https?://[^\s]+$")
    """GitHub's API base URL: left out for api.github.com; GitHub Enterprise's otherwise."""


class ReleaseSourceSpec(ApiModel):
    """Where a stack's releases come from: one of oci or github."""

    model_config = ConfigDict(
        json_schema_extra=cel(
            (
                "[has(self.oci), has(self.github)].filter(x, x).size() == 1",
                "name exactly one release source: oci or github",
            )
        )
    )

    oci: OciReleaseSource | None = None
    """An OCI repository."""
    github: GitHubReleaseSource | None = None
    """A GitHub repository's releases."""


class ClusterStackSpec(ApiModel):
    """Which cluster stack to provide, and which of its releases to keep ready."""

    provider: str = Field(
        min_length=1,
        pattern=_PART_PATTERN,
        json_schema_extra=immutable("spec.provider"),
    )
    """The infrastructure provider of the stack, such as openstack or docker: lowercase letters and
    digits, the first part of every release name. Immutable."""
    name: str = Field(min_length=1, pattern=_PART_PATTERN, json_schema_extra=immutable("spec.name"))
    """The name of the cluster stack, such as scs: lowercase letters and digits, the second part of
    every release name. Immutable."""
    kubernetes_version: str = Field(
        pattern=r"^\d+\.\d+$",
        json_schema_extra=immutable("spec.kubernetesVersion"),
    )
    """The Kubernetes minor version the stack is built for, such as "1.30" (quoted in YAML: without
    quotes 1.30 is a number). Immutable."""
    channel: Literal["stable", "custom"] = Field("stable", json_schema_extra=immutable("spec.channel"))
    """The release channel auto-subscribe follows: stable (versions v1, v2, ...) or custom (versions
    such as v1-alpha.5). Immutable, as upstream's: another channel is another stack."""
    versions: list[Annotated[str, Field(pattern=VERSION_PATTERN, max_length=63)]] = Field(
        default_factory=list, max_length=100
    )
    """Versions to provide and keep, whether or not newer ones exist: v6, v1-alpha.5, v0-sha.hdl6pjy."""
    auto_subscribe: bool = True
    """Poll the release source and provide the newest release of the channel as it is published (on by
    default, as upstream's)."""
    no_provider: bool = False
    """The provider has no operator of its own: no ProviderClusterStackRelease is created or awaited."""
    provider_ref: ObjectReference | None = None
    """The provider's ProviderClusterStackReleaseTemplate, whose spec.template.spec each release's
    provider object copies. Required unless noProvider is true."""
    source: ReleaseSourceSpec | None = None
    """Where this stack's releases come from. Left out, the operator's own source (its environment:
    GIT_* or OCI_*, as upstream's). Set, this stack follows its own registry or repository with its own
    credentials, so that one management cluster follows stacks from several; a source that cannot be
    reached or refuses its credentials is said on this stack alone."""


_PROVIDER_REF_RULE = cel(
    {
        "rule": "self.spec.noProvider || has(self.spec.providerRef)",
        "message": "spec.providerRef is required unless spec.noProvider is true: name the provider's "
        "ProviderClusterStackReleaseTemplate, or set noProvider: true for a provider without an operator",
        "fieldPath": ".spec.providerRef",
        "reason": "FieldValueRequired",
    }
)


class ClusterStackReleaseSummary(ApiModel):
    """One release of the stack, as its ClusterStackRelease reports it."""

    name: str
    """The release's version, such as v6."""
    ready: bool = False
    """Whether its ClusterClass is applied and usable."""
    phase: str = ""
    """Where the release is: downloading, providerNotReady, applying, done or failed."""
    message: str = ""
    """Why it is not ready, when it is not."""


class ClusterStackStatus(ApiModel):
    """The releases of the stack, and the newest one a Cluster can use."""

    latest_release: str | None = None
    """The newest ready release: its ClusterClass is the one to name in a Cluster's topology."""
    usable_versions: str | None = None
    """The versions whose release is ready, comma-separated, in dot form."""
    summary: list[ClusterStackReleaseSummary] = Field(default_factory=list)
    """One entry per release of the stack."""
    conditions: list[ClusterApiCondition] = Field(default_factory=list)
    """Cluster API conditions, with a summarised Ready."""
    observed_generation: int | None = None
    """The .metadata.generation the status was written from."""


class ClusterStackReleaseSpec(ApiModel):
    """One release of a cluster stack; created by the ClusterStack controller."""

    provider_ref: ObjectReference | None = None
    """The release's ProviderClusterStackRelease, whose status.ready is awaited before the
    ClusterClass is applied; none for a provider without an operator."""


class AppliedResource(ApiModel):
    """One object of the release's cluster-class chart, and whether it is applied as rendered."""

    group: str = ""
    """API group of the object (empty for the core group)."""
    version: str
    """API version of the object, such as v1beta1."""
    kind: str
    """Kind of the object, such as ClusterClass."""
    namespace: str = ""
    """Namespace of the object (empty for a cluster-scoped one)."""
    name: str
    """Name of the object."""
    status: Literal["synced", "not-synced"]
    """synced: applied as rendered; not-synced: the last apply failed, see error."""
    error: str | None = None
    """Why the last apply failed."""


class HelmHooksStatus(ApiModel):
    """The Helm hooks of the addons' last install or upgrade (the chart's helm.sh/hook objects), run as
    helm install and helm upgrade run them: pre hooks, the chart's objects, post hooks."""

    version: str = Field(max_length=253)
    """The addon version whose install or upgrade this is (on a ClusterStackRelease: the release, or
    deletion)."""
    event: str = Field(max_length=63)
    """The event whose hooks run now (pre-install, post-install, pre-upgrade, post-upgrade), or done."""
    completed: list[str] = Field(default_factory=list)
    """The hooks of that event that succeeded, as "Kind namespace/name"."""
    running: str | None = None
    """The hook waited for now."""
    failed: str | None = None
    """The hook that failed, and why (its Job's reason); nothing after it runs until the addons change,
    or the ClusterAddon's annotation clusterstack.x-k8s.io/retry-helm-hooks gets a new value."""
    retried: str | None = Field(default=None, max_length=253)
    """The value of the annotation clusterstack.x-k8s.io/retry-helm-hooks that last started a failed
    event over."""


class ClusterStackReleaseStatus(ApiModel):
    """Whether the release is downloaded, its provider ready and its ClusterClass applied."""

    ready: bool = False
    """Whether the release's ClusterClass is applied and its provider object ready."""
    kubernetes_version: str | None = None
    """The Kubernetes version of the release, with its patch, from its metadata.yaml (v1.30.10)."""
    resources: list[AppliedResource] = Field(default_factory=list)
    """Each object rendered from the cluster-class chart, and its sync status."""
    helm_hooks: HelmHooksStatus | None = None
    """The Helm hooks of the cluster-class chart: its install hooks when the release is first applied
    (version: the release), its delete hooks when the release is deleted (version: deletion)."""
    conditions: list[ClusterApiCondition] = Field(default_factory=list)
    """ClusterStackReleaseDownloaded, ProviderClusterStackReleaseReady, HelmChartApplied and Ready."""
    observed_generation: int | None = None
    """The .metadata.generation the status was written from."""


class ClusterReference(ApiModel):
    """The Cluster API Cluster whose workload cluster gets the addons."""

    api_version: str = "cluster.x-k8s.io/v1beta2"
    """API version of the Cluster: cluster.x-k8s.io/v1beta1 or v1beta2."""
    kind: Literal["Cluster"] = "Cluster"
    """Always Cluster."""
    name: str = Field(min_length=1, max_length=253)
    """Name of the Cluster."""
    namespace: str | None = None
    """Namespace of the Cluster: the ClusterAddon's own (a Cluster's addons live beside it)."""
    uid: str | None = None
    """UID of the Cluster, when the reference was made from the object itself."""


class ClusterAddonSpec(ApiModel):
    """Which Cluster gets the addons, and which addons it has; made by the operator for every Cluster
    whose ClusterClass comes from a cluster stack."""

    cluster_ref: ClusterReference = Field(json_schema_extra=immutable("spec.clusterRef"))
    """The Cluster whose workload cluster the addons are applied to. Immutable: a ClusterAddon belongs
    to one Cluster for its whole life."""
    cluster_stack: str | None = Field(default=None, max_length=253)
    """The cluster stack release whose addons are applied (<provider>-<name>-<major>-<minor>-<version>),
    set by the operator; it matches the Cluster's ClusterClass once the addons are up to date."""
    version: str | None = Field(default=None, max_length=63)
    """The cluster-addon version applied, from the release's metadata.yaml, set by the operator: a new
    cluster stack release with the same addon version applies nothing."""
    hook: str | None = Field(default=None, max_length=63)
    """Ignored, and accepted only so that ClusterAddons made by the upstream operator (whose hook server
    sets it to start a hook's stages) can be taken over unchanged. This operator starts a hook's stages
    itself, from the Cluster's state, and shows the running hook in status.hook. Its webhook warns
    whoever sets this field."""


class StageStatus(ApiModel):
    """One stage of the running hook (one chart of a staged cluster-addon release)."""

    name: str
    """Name of the stage: its chart's folder in the cluster-addon archive."""
    action: Literal["apply", "delete"] = "apply"
    """Whether the stage applies its objects or deletes them."""
    phase: Literal[
        "Pending", "waitingForPreCondition", "applyingOrDeleting", "waitingForPostCondition", "done"
    ]
    """Where the stage stands; a stage starts only once the one before it is done."""
    helm_hooks: HelmHooksStatus | None = None
    """The Helm hooks of the stage's chart, run as helm runs them: install hooks for the
    AfterControlPlaneInitialized stages, upgrade hooks for BeforeClusterUpgrade's."""


class ClusterAddonStatus(ApiModel):
    """Whether the addons are applied in the workload cluster, object by object and stage by stage."""

    ready: bool = False
    """Whether every addon object is applied as rendered in the workload cluster."""
    resources: list[AppliedResource] = Field(default_factory=list)
    """Each object rendered from the cluster-addon chart, and its sync status in the workload cluster."""
    hook: str | None = Field(default=None, max_length=63)
    """The lifecycle hook whose stages status.stages shows (a release with clusteraddon.yaml only):
    AfterControlPlaneInitialized for a Cluster's first addons, BeforeClusterUpgrade for a move to a
    release with other addons."""
    hook_release: str | None = Field(default=None, max_length=253)
    """The release whose stages status.stages shows."""
    stages: list[StageStatus] = Field(default_factory=list)
    """The stages of the hook, in order, and where each stands. Kept here, not in the operator's
    memory, so that an operator restart resumes the stage it was in."""
    helm_hooks: HelmHooksStatus | None = None
    """The chart's Helm hooks in the last install or upgrade of the addons (a release without stages),
    or in their uninstall (version: deletion)."""
    delete_hooks: list[str] | None = None
    """The pre-delete and post-delete hooks of the applied chart, as "Kind namespace/name": run when the
    ClusterAddon is deleted while its Cluster and workload cluster are still there (its finalizer
    clusterstack.x-k8s.io/helm-delete-hooks is on it only while there are some)."""
    conditions: list[ClusterApiCondition] = Field(default_factory=list)
    """ClusterReady, ClusterStackReleaseDownloaded, HelmChartApplied and Ready, among others."""
    observed_generation: int | None = None
    """The .metadata.generation the status was written from."""


_READY = '.status.conditions[?(@.type=="Ready")].status'
_READY_REASON = '.status.conditions[?(@.type=="Ready")].reason'


def _severity(condition: Condition) -> dict[str, str]:
    """Cluster API's severity of a condition that is not True (none on a True one)."""
    if condition.status == "True":
        return {}
    return {"severity": str(SEVERITY_OF_REASON.get(condition.reason, Severity.WARNING))}


CAPI_CONDITIONS = ConditionShape(added=_severity)
"""Conditions as Cluster API writes them (and upstream's operator does): with a severity when not True."""


CLUSTER_STACK = CustomResource(
    group=GROUP,
    version=VERSION,
    kind="ClusterStack",
    conditions=CAPI_CONDITIONS,
    plural="clusterstacks",
    spec_model=ClusterStackSpec,
    status_model=ClusterStackStatus,
    description="A cluster stack of one provider and Kubernetes version, and the releases of it kept ready.",
    short_names=("csk",),
    categories=CATEGORIES,
    printer_columns=(
        PrinterColumn("Provider", ".spec.provider", description="Infrastructure provider"),
        PrinterColumn("ClusterStack", ".spec.name", description="Name of the cluster stack"),
        PrinterColumn("K8s", ".spec.kubernetesVersion", description="Kubernetes minor version"),
        PrinterColumn("Channel", ".spec.channel", description="Release channel"),
        PrinterColumn("Autosubscribe", ".spec.autoSubscribe", "boolean", "Follows new releases"),
        PrinterColumn("Usable", ".status.usableVersions", description="Ready versions", priority=1),
        PrinterColumn("Latest", ".status.latestRelease", description="Newest ready release"),
        PrinterColumn("Ready", _READY, description="Ready condition"),
        PrinterColumn("Reason", _READY_REASON, description="Why not ready", priority=1),
        PrinterColumn("Age", ".metadata.creationTimestamp", "date"),
    ),
    validations=tuple(_PROVIDER_REF_RULE["x-kubernetes-validations"]),
)

CLUSTER_STACK_RELEASE = CustomResource(
    group=GROUP,
    version=VERSION,
    kind="ClusterStackRelease",
    conditions=CAPI_CONDITIONS,
    plural="clusterstackreleases",
    spec_model=ClusterStackReleaseSpec,
    status_model=ClusterStackReleaseStatus,
    description="One release of a cluster stack: its assets, its provider object and its ClusterClass.",
    short_names=("cskr",),
    categories=CATEGORIES,
    printer_columns=(
        PrinterColumn(
            "K8s Version", ".status.kubernetesVersion", description="Kubernetes version with patch"
        ),
        PrinterColumn("Ready", ".status.ready", "boolean", "ClusterClass applied and provider ready"),
        PrinterColumn("Reason", _READY_REASON, description="Why not ready"),
        PrinterColumn("Age", ".metadata.creationTimestamp", "date"),
    ),
    spec_required=False,
)

CLUSTER_ADDON = CustomResource(
    group=GROUP,
    version=VERSION,
    kind="ClusterAddon",
    conditions=CAPI_CONDITIONS,
    plural="clusteraddons",
    spec_model=ClusterAddonSpec,
    status_model=ClusterAddonStatus,
    description="The cluster addons of one Cluster API Cluster, applied in its workload cluster.",
    short_names=("caddon",),
    categories=CATEGORIES,
    printer_columns=(
        PrinterColumn("Cluster", ".spec.clusterRef.name", description="The Cluster the addons are for"),
        PrinterColumn("ClusterStack", ".spec.clusterStack", description="Release whose addons are applied"),
        PrinterColumn("Version", ".spec.version", description="Cluster-addon version applied"),
        PrinterColumn("Hook", ".status.hook", description="Hook of the stages shown", priority=1),
        PrinterColumn("Ready", ".status.ready", "boolean", "Addons applied in the workload cluster"),
        PrinterColumn("Reason", _READY_REASON, description="Why not ready"),
        PrinterColumn(
            "Message", '.status.conditions[?(@.type=="Ready")].message', description="Why", priority=1
        ),
        PrinterColumn("Age", ".metadata.creationTimestamp", "date"),
    ),
)

CUSTOM_RESOURCES = [CLUSTER_STACK, CLUSTER_STACK_RELEASE, CLUSTER_ADDON]
