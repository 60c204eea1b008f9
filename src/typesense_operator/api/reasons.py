"""The words a user sees: condition types, condition reasons and Event reasons of the Typesense operator."""

from __future__ import annotations

from enum import StrEnum

from operator_core.children import CHILDREN_APPLIED

__all__ = [
    "BackupReason",
    "CertificateReason",
    "ConditionType",
    "ContentReason",
    "EventReason",
    "ReadyReason",
    "RestoreReason",
    "ScheduleReason",
]


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
    RESTORED = "Restored"
    """spec.bootstrap.fromBackup: the first node's volume holds the whole backup (False while it is
    filled, or when that failed)."""
    CERTIFICATE_READY = "CertificateReady"
    """spec.tls: the certificate was checked and is given to the nodes (True, Served or ExpiresSoon), or
    why not (False: the nodes keep serving what they had, and nothing is rolled onto a broken one)."""
    SUSPENDED = "Suspended"
    """A TypesenseScheduledBackup's: True while spec.suspend holds its new backups (False once resumed)."""


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
    ERRORED_NODE_RESTARTED = "ErroredNodeRestarted"
    HELD_BACK_NODE_RESTARTED = "HeldBackNodeRestarted"
    MEMBER_NODE_LOST = "MemberNodeLost"
    MEMBER_REPLACED = "MemberReplaced"
    MEMBER_REPLACEMENT_HELD = "MemberReplacementHeld"
    MEMBER_REPLACEMENT_DONE = "MemberReplacementDone"
    TOOK_OVER = "TookOver"
    ROLL_PAUSED = "RollPaused"
    STORAGE_EXPANDED = "StorageExpanded"
    STORAGE_NOT_EXPANDABLE = "StorageNotExpandable"
    STORAGE_AUTO_GROWN = "StorageAutoGrown"
    STORAGE_AUTO_GROW_LIMIT_REACHED = "StorageAutoGrowLimitReached"
    BACKUP_STARTED = "BackupStarted"
    BACKUP_COMPLETED = "BackupCompleted"
    BACKUP_FAILED = "BackupFailed"
    BACKUP_DATA_REMOVED = "BackupDataRemoved"
    BACKUP_DATA_LEFT = "BackupDataLeft"
    RESTORE_STARTED = "RestoreStarted"
    RESTORE_COMPLETED = "RestoreCompleted"
    RESTORE_FAILED = "RestoreFailed"
    BACKUP_SCHEDULED = "BackupScheduled"
    BACKUP_SKIPPED = "BackupSkipped"
    BACKUP_PRUNED = "BackupPruned"
    INVALID_SCHEDULE = "InvalidSchedule"
    CLUSTER_NOT_FOUND = "ClusterNotFound"
    CONTENT_APPLIED = "ContentApplied"
    CONTENT_REFUSED = "ContentRefused"
    CONTENT_DELETED = "ContentDeleted"
    CONTENT_MIGRATED = "ContentMigrated"
    CONTENT_NOT_DELETED = "ContentNotDeleted"
    CONTENT_WAITING = "ContentWaiting"
    CERTIFICATE_SERVED = "CertificateServed"
    CERTIFICATE_REFUSED = "CertificateRefused"
    CERTIFICATE_EXPIRES_SOON = "CertificateExpiresSoon"


class CertificateReason(StrEnum):
    """Reasons of a TypesenseCluster's CertificateReady condition; a refused certificate's are
    :class:`typesense_operator.tls.check.Refusal`'s."""

    NOT_REQUESTED = "NotRequested"
    SERVED = "Served"
    EXPIRES_SOON = "ExpiresSoon"
    SECRET_NOT_FOUND = "SecretNotFound"  # noqa: S105 (a reason's name, not a password)
    NOT_ISSUED_YET = "NotIssuedYet"
    WRONG_SECRET_TYPE = "WrongSecretType"  # noqa: S105
    KEYS_MISSING = "KeysMissing"
    CERT_MANAGER_MISSING = "CertManagerMissing"


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


class RestoreReason(StrEnum):
    """Reasons of a TypesenseCluster's Restored condition (spec.bootstrap.fromBackup)."""

    RESTORING = "Restoring"
    RESTORED = "Restored"
    BACKUP_NOT_FOUND = "BackupNotFound"
    BACKUP_NOT_COMPLETED = "BackupNotCompleted"
    NO_BACKUP_IMAGE = "NoBackupImage"
    RESTORE_FAILED = "RestoreFailed"


class ScheduleReason(StrEnum):
    """Reasons of a TypesenseScheduledBackup's Ready and Suspended conditions."""

    SCHEDULED = "Scheduled"
    SUSPENDED = "Suspended"
    RESUMED = "Resumed"
    INVALID_SCHEDULE = "InvalidSchedule"
    NAME_TOO_LONG = "NameTooLong"
    CLUSTER_NOT_FOUND = "ClusterNotFound"


class ContentReason(StrEnum):
    """Reasons of the Ready condition of a collection, alias, synonym or override."""

    IN_SYNC = "InSync"
    CLUSTER_NOT_FOUND = "ClusterNotFound"
    CLUSTER_NOT_READY = "ClusterNotReady"
    ADMIN_KEY_MISSING = "AdminKeyMissing"
    NODES_UNREACHABLE = "NodesUnreachable"
    REJECTED = "RejectedByTypesense"
    NOT_CHANGEABLE_IN_PLACE = "NotChangeableInPlace"
    TYPE_CHANGE_NOT_IN_PLACE = "TypeChangeNotInPlace"
    MIGRATING = "Migrating"
    MIGRATION_FAILED = "MigrationFailed"
    SECRET_NOT_OURS = "SecretNotOurs"  # noqa: S105 (a reason's name, not a password)
    VALUE_SOURCE_MISSING = "ValueSourceMissing"
    NOT_IN_THIS_VERSION = "NotInThisVersion"
