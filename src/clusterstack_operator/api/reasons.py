"""The words the Cluster Stack operator writes: condition types, their reasons, and Event reasons.

Upstream's own names (cluster-stack-operator's ``conditions_const.go``) wherever upstream has one, so
that a user's alerts and ``kubectl wait --for=condition=...`` keep working after a switch.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["SEVERITY_OF_REASON", "ConditionType", "EventReason", "Reason", "Severity"]


class ConditionType(StrEnum):
    READY = "Ready"
    """ClusterStack: its wanted releases exist and the source answered. ClusterStackRelease: its
    ClusterClass is applied and its provider object is ready."""
    RELEASES_SYNCED = "ReleasesSynced"
    """ClusterStack: the release source was listed (only with autoSubscribe)."""
    CLUSTER_STACK_RELEASES_SYNCED = "ClusterStackReleasesSynced"
    """ClusterStack: every wanted ClusterStackRelease exists, and every unwanted one is deleted."""
    PROVIDER_RELEASES_SYNCED = "ProviderClusterStackReleasesSynced"
    """ClusterStack: every release's provider object exists as its template says (not with noProvider)."""
    RELEASE_AVAILABLE = "ClusterStackReleaseAvailable"
    """ClusterStack: at least one release is ready to be used by a Cluster."""
    RELEASES_READY = "ClusterStackReleasesReady"
    """ClusterStack: every release it wants (listed in spec.versions, or the newest of its channel) is
    ready; False names those that are not, with their own reason (ours: upstream has none)."""
    DOWNLOADED = "ClusterStackReleaseDownloaded"
    """ClusterStackRelease: its assets are downloaded and whole."""
    PROVIDER_READY = "ProviderClusterStackReleaseReady"
    """ClusterStackRelease: its provider object reports status.ready (True at once with no provider)."""
    HELM_CHART_APPLIED = "HelmChartApplied"
    """ClusterStackRelease: every object of its cluster-class chart is applied as rendered; ClusterAddon:
    every object of its cluster-addon chart, in the workload cluster."""
    CONFIG_VALIDATED = "ClusterAddonConfigValidated"
    """ClusterAddon of a staged release: its clusteraddon.yaml can be followed (stages, charts, CEL)."""
    EVALUATED_CEL = "EvaluatedCEL"
    """ClusterAddon of a staged release: the running stage's pre- or post-condition holds."""
    CLUSTER_READY = "ClusterReady"
    """ClusterAddon: its Cluster exists, uses a cluster stack's class, and its workload API server answers."""
    PAUSED = "Paused"
    """ClusterAddon: its Cluster is paused (Cluster API's own condition name): nothing is written for it
    until it is unpaused, its other conditions as they were."""


class Reason(StrEnum):
    ALL_TRUE = "AllConditionsTrue"
    SYNCED = "Synced"
    FAILED_TO_SYNC = "FailedToSync"
    FAILED_TO_CREATE_OR_UPDATE = "FailedToCreateOrUpdate"
    PROVIDER_TEMPLATE_NOT_FOUND = "ProviderTemplateNotFound"
    PROVIDER_KIND_NOT_SERVED = "ProviderKindNotServed"
    INVALID_PROVIDER_TEMPLATE = "InvalidProviderTemplate"
    NO_PROVIDER = "NoProvider"
    NO_READY_RELEASE = "NoReadyRelease"
    RELEASE_READY = "ReleaseReady"
    RELEASES_READY = "ReleasesReady"
    NOT_DOWNLOADED_YET = "ReleaseAssetsNotDownloadedYet"
    ISSUE_WITH_ASSETS = "IssueWithReleaseAssets"
    DOWNLOADED = "Downloaded"
    PROCESS_ONGOING = "ProcessOngoing"
    PROVIDER_READY = "ProviderReady"
    FAILED_TO_APPLY = "FailedToApplyObjects"
    TEMPLATE_FAILED = "HelmTemplateFailed"
    APPLIED = "ObjectsApplied"
    IN_USE = "ClusterClassInUse"
    CLUSTER_NOT_FOUND = "ClusterNotFound"
    NO_CLUSTER_STACK_CLASS = "NoClusterStackClass"
    WAITING_FOR_KUBECONFIG = "WaitingForKubeconfig"
    INVALID_KUBECONFIG = "InvalidKubeconfig"
    CONTROL_PLANE_NOT_READY = "ControlPlaneNotReady"
    CLUSTER_READY = "ClusterReady"
    CONFIG_FAILED = "ParsingClusterAddonConfigFailed"
    HELM_CHART_MISSING = "HelmChartMissing"
    INVALID_CONDITION = "InvalidCondition"
    PRE_CONDITION_PENDING = "FailedToEvaluatePreCondition"
    POST_CONDITION_PENDING = "FailedToEvaluatePostCondition"
    CONDITIONS_HOLD = "ConditionsHold"
    CONFIG_VALID = "ConfigValid"
    STAGES_RUNNING = "StagesRunning"
    HOOK_RUNNING = "HelmHookRunning"
    HOOK_FAILED = "HelmHookFailed"
    PAUSED = "Paused"
    NOT_PAUSED = "NotPaused"


class Severity(StrEnum):
    """How bad a False condition is, as Cluster API grades it."""

    ERROR = "Error"
    WARNING = "Warning"
    INFO = "Info"


SEVERITY_OF_REASON = {
    "IssueWithReleaseAssets": Severity.ERROR,
    "FailedToApplyObjects": Severity.ERROR,
    "HelmTemplateFailed": Severity.ERROR,
    "ProviderTemplateNotFound": Severity.ERROR,
    "InvalidProviderTemplate": Severity.ERROR,
    "ProviderKindNotServed": Severity.ERROR,
    "ReleaseAssetsNotDownloadedYet": Severity.INFO,
    "ProcessOngoing": Severity.INFO,
    "ClusterClassInUse": Severity.INFO,
    "NoReadyRelease": Severity.INFO,
    "InvalidKubeconfig": Severity.ERROR,
    "NoClusterStackClass": Severity.INFO,
    "WaitingForKubeconfig": Severity.INFO,
    "ControlPlaneNotReady": Severity.INFO,
    "ParsingClusterAddonConfigFailed": Severity.ERROR,
    "HelmChartMissing": Severity.ERROR,
    "InvalidCondition": Severity.ERROR,
    "FailedToEvaluatePreCondition": Severity.INFO,
    "FailedToEvaluatePostCondition": Severity.INFO,
    "StagesRunning": Severity.INFO,
    "HelmHookRunning": Severity.INFO,
    "HelmHookFailed": Severity.ERROR,
    "WatchForbidden": Severity.ERROR,
}
"""A False condition's severity by its reason (Error for what needs someone to act, Info for what is
under way); any other reason's is Warning."""


class EventReason(StrEnum):
    """Event reasons; the children's (Created, Updated, Deleted) are every operator's own."""

    RELEASE_SOURCE_FAILED = "ReleaseSourceFailed"
    PROVIDER_TEMPLATE_NOT_FOUND = "ProviderTemplateNotFound"
    CLUSTER_STACK_RELEASE_CREATED = "ClusterStackReleaseCreated"
    CLUSTER_STACK_RELEASE_DELETED = "ClusterStackReleaseDeleted"
    CLUSTER_ADDON_CREATED = "ClusterAddonCreated"
    CREATE_PROVIDER_STACK_RELEASE = "CreateProviderStackRelease"
    VALIDATE_HELM_CHART_FAILED = "ValidateHelmChartFailed"
    DOWNLOAD_FAILED = "DownloadFailed"
    APPLY_FAILED = "ApplyFailed"
    RELEASE_READY = "ReleaseReady"
    RELEASE_NOT_READY = "ReleaseNotReady"
    DELETION_BLOCKED = "DeletionBlocked"
    OBJECTS_DELETED = "ObjectsDeleted"
    INVALID_KUBECONFIG = "InvalidKubeconfig"
    ADDONS_APPLIED = "ClusterAddonApplied"
    ADDONS_READY = "ClusterAddonReady"
    ADDONS_NOT_READY = "ClusterAddonNotReady"
    CONFIG_FAILED = "ParsingClusterAddonConfigFailed"
    STAGE_DONE = "StageDone"
    HOOK_FAILED = "HelmHookFailed"
    HOOKS_RAN = "HelmHooksRan"
    HOOKS_SKIPPED = "HelmHooksSkipped"
    HOOKS_RETRIED = "HelmHooksRetried"
    ADDONS_UNINSTALLED = "ClusterAddonUninstalled"
    DELETE_HOOKS_NOT_RUN = "HelmDeleteHooksNotRun"
