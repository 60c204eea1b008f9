"""The words a user sees: condition types, condition reasons and Event reasons of the Typesense operator."""

from __future__ import annotations

from enum import StrEnum

from operator_core.children import CHILDREN_APPLIED

__all__ = ["BackupReason", "ConditionType", "EventReason", "ReadyReason"]


class ConditionType(StrEnum):
    READY = "Ready"
    """The cluster serves reads and writes (the specification's ConditionReady)."""
    ADMIN_KEY_READY = "AdminKeyReady"
    """The admin API key Secret exists and holds typesense-api-key."""
    CONFIGURATION_VALID = "ConfigurationValid"
    """Everything in the spec that CEL cannot check (scraper configs are JSON objects) is valid."""
    CHILDREN_APPLIED = CHILDREN_APPLIED
    """Every child object was applied on the last reconcile (set by the shared apply-report-prune step)."""
    METRICS_READY = "MetricsReady"
    """The PodMonitor exists, or metrics are not requested."""
    PROGRESSING = "Progressing"
    """A change that needs new pods is being rolled, one node at a time (False once every node runs it)."""
    ROUTES_READY = "RoutesReady"
    """The HTTPRoutes (and ReferenceGrants) of spec.httpRoutes are applied, or none are requested."""
    STORAGE_READY = "StorageReady"
    """Every node's volume has the size spec.storage.size asks for, or is being grown to it."""


class ReadyReason(StrEnum):
    """Reasons of the Ready condition, exactly the specification's status table."""

    QUORUM_READY = "QuorumReady"
    QUORUM_NOT_READY = "QuorumNotReady"
    QUORUM_DEGRADED = "QuorumDegraded"
    QUORUM_UPGRADED = "QuorumUpgraded"
    QUORUM_NEEDS_INTERVENTION = "QuorumNeedsIntervention"


class EventReason(StrEnum):
    """The operator's own Event reasons; the children's (Created, Updated, Deleted, ApplyFailed) are
    every operator's: :class:`operator_core.children.StepEventReason`."""

    ADMIN_KEY_MISSING = "AdminKeyMissing"
    INVALID_CONFIGURATION = "InvalidConfiguration"
    POD_MONITOR_UNAVAILABLE = "PodMonitorUnavailable"
    ROUTES_UNAVAILABLE = "RoutesUnavailable"
    QUORUM_READY = "QuorumReady"
    QUORUM_NOT_READY = "QuorumNotReady"
    QUORUM_DOWNGRADED = "QuorumDowngraded"
    QUORUM_UPGRADED = "QuorumUpgraded"
    QUORUM_NEEDS_INTERVENTION = "QuorumNeedsIntervention"
    QUORUM_SURVIVOR_RESTARTED = "QuorumSurvivorRestarted"
    QUORUM_MEMBER_FENCED = "QuorumMemberFenced"
    QUORUM_SURGERY_HELD = "QuorumSurgeryHeld"
    NODE_RESTARTED = "NodeRestarted"
    ROLL_PAUSED = "RollPaused"
    STORAGE_EXPANDED = "StorageExpanded"
    STORAGE_NOT_EXPANDABLE = "StorageNotExpandable"
    BACKUP_STARTED = "BackupStarted"
    BACKUP_COMPLETED = "BackupCompleted"
    BACKUP_FAILED = "BackupFailed"
    BACKUP_DATA_REMOVED = "BackupDataRemoved"
    BACKUP_DATA_LEFT = "BackupDataLeft"


class BackupReason(StrEnum):
    """Reasons of a TypesenseBackup's Ready condition."""

    PENDING = "Pending"
    UPLOADING = "Uploading"
    COMPLETED = "Completed"
    CLUSTER_NOT_FOUND = "ClusterNotFound"
    CLUSTER_NOT_READY = "ClusterNotReady"
    NO_LEADER = "NoLeader"
    ADMIN_KEY_MISSING = "AdminKeyMissing"
    NO_BACKUP_IMAGE = "NoBackupImage"
    SNAPSHOT_FAILED = "SnapshotFailed"
    UPLOAD_FAILED = "UploadFailed"
    JOB_LOST = "JobLost"
