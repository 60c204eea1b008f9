"""TypesenseBackup and TypesenseScheduledBackup, version v1alpha1: backups of a TypesenseCluster to
S3-compatible object storage or a volume (docs/typesense-backup.md). The Go operator has none; the
shape follows CloudNativePG's Backup and ScheduledBackup, which users of operators know."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import ConfigDict, Field

from operator_core.apimodel import ApiModel, cel, immutable
from operator_core.conditions import Condition
from operator_core.crdgen import CustomResource, PrinterColumn
from typesense_operator.api.destinations import BackupDestination
from typesense_operator.api.v1alpha1 import GROUP, VERSION, cron_schedule

__all__ = [
    "TYPESENSE_BACKUP",
    "TYPESENSE_SCHEDULED_BACKUP",
    "BackupDestination",
    "TypesenseBackupSpec",
    "TypesenseBackupStatus",
    "TypesenseScheduledBackupSpec",
    "TypesenseScheduledBackupStatus",
]

# A duration as Kubernetes and Go write them, in hours, minutes or seconds, or days (720h, 30d).
_DURATION = r"^[0-9]+(d|h|m|s)$"


class ClusterReference(ApiModel):
    """A TypesenseCluster in the same namespace."""

    name: str = Field(min_length=1, max_length=253)
    """Name of the TypesenseCluster."""


class TypesenseBackupSpec(ApiModel):
    """One backup of one cluster: what to back up and where. A backup is not changed once asked for."""

    cluster: ClusterReference
    """The cluster to back up."""
    destination: BackupDestination
    """Where the backup goes."""
    deletion_policy: Literal["Delete", "Retain"] = "Delete"
    """What deleting this object does to the backup's data: Delete removes it from the destination,
    Retain keeps it there (restorable by its location)."""

    model_config = ConfigDict(json_schema_extra=immutable("spec"))


BackupPhase = Literal["Pending", "Running", "Completed", "Failed"]


class TypesenseBackupStatus(ApiModel):
    """What the backup did, written by the operator."""

    phase: BackupPhase | None = None
    """Pending (waiting to start), Running (snapshot and upload), Completed, or Failed (see the Ready
    condition's reason and message)."""
    started_at: datetime | None = None
    """When the snapshot was asked for."""
    completed_at: datetime | None = None
    """When the backup's manifest was in the destination, or when it failed."""
    node: str | None = None
    """The pod whose snapshot this is (a caught-up follower where there is one)."""
    location: str | None = None
    """Where the backup is: s3://bucket/prefix/... or the claim and folder."""
    size_bytes: int | None = None
    """Total size of the backup's files."""
    files: int | None = None
    """Number of files in the backup."""
    typesense_version: str | None = None
    """The Typesense version that took the snapshot."""
    collections: int | None = None
    """Number of collections when the snapshot was taken."""
    documents: int | None = None
    """Number of documents when the snapshot was taken."""
    attempts: int | None = None
    """Upload attempts made (bounded)."""
    conditions: list[Condition] | None = Field(
        default=None,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
    )
    """Ready is True once the backup is whole in its destination; False with the reason while it is
    made or when it failed."""
    observed_generation: int | None = None
    """The .metadata.generation the status was last computed from."""


class Retention(ApiModel):
    """Which backups a schedule keeps: the newest keep, and none older than maxAge. Older ones are
    deleted, with their data unless their deletionPolicy is Retain."""

    keep: int | None = Field(default=None, ge=1, le=1000)
    """How many completed backups to keep."""
    max_age: str | None = Field(
        default=None,
        max_length=16,
        json_schema_extra=cel(
            (f"self.matches('{_DURATION}')", "maxAge must be a number of d, h, m or s, such as 30d or 720h")
        ),
    )
    """The age beyond which a backup goes, such as 30d or 720h."""

    model_config = ConfigDict(
        json_schema_extra=cel(("has(self.keep) || has(self.maxAge)", "retention needs keep, maxAge or both"))
    )


class TypesenseScheduledBackupSpec(ApiModel):
    """Backups of a cluster on a schedule, and how many of them to keep."""

    cluster: ClusterReference
    """The cluster to back up."""
    destination: BackupDestination
    """Where its backups go."""
    schedule: str = cron_schedule()
    """When to back up: a cron expression of five fields, in UTC, or @daily, @hourly and the like."""
    retention: Retention | None = None
    """Which backups to keep; all of them when not set."""
    suspend: bool = False
    """Make no new backup while true (the ones made are kept, and retention still applies)."""
    deletion_policy: Literal["Delete", "Retain"] = "Delete"
    """The deletionPolicy of the backups this schedule makes."""
    immediate: bool = False
    """Also take a backup as soon as the schedule is created (once its cluster is QuorumReady), not
    only at the first time the schedule fires."""


class TypesenseScheduledBackupStatus(ApiModel):
    """What the schedule did, written by the operator."""

    last_schedule_time: datetime | None = None
    """When the last backup was made."""
    next_schedule_time: datetime | None = None
    """When the next one is due (none while suspended)."""
    last_backup: str | None = None
    """The TypesenseBackup made last."""
    conditions: list[Condition] | None = Field(
        default=None,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
    )
    """Ready: the schedule is valid and its cluster exists; Suspended while spec.suspend is true."""
    observed_generation: int | None = None
    """The .metadata.generation the status was last computed from."""


TYPESENSE_BACKUP = CustomResource(
    group=GROUP,
    version=VERSION,
    kind="TypesenseBackup",
    plural="typesensebackups",
    spec_model=TypesenseBackupSpec,
    status_model=TypesenseBackupStatus,
    description="One backup of a TypesenseCluster: a caught-up node's snapshot, in S3 or on a volume.",
    short_names=("tsbackup",),
    categories=("typesense",),
    printer_columns=(
        PrinterColumn("Cluster", ".spec.cluster.name", description="The cluster backed up"),
        PrinterColumn("Phase", ".status.phase", description="Pending, Running, Completed or Failed"),
        PrinterColumn("Node", ".status.node", description="The node snapshotted"),
        PrinterColumn("Size", ".status.sizeBytes", "integer", "Bytes in the destination"),
        PrinterColumn("Documents", ".status.documents", "integer", "Documents backed up", priority=1),
        PrinterColumn("Location", ".status.location", description="Where the backup is", priority=1),
        PrinterColumn("Age", ".metadata.creationTimestamp", "date"),
    ),
)

TYPESENSE_SCHEDULED_BACKUP = CustomResource(
    group=GROUP,
    version=VERSION,
    kind="TypesenseScheduledBackup",
    plural="typesensescheduledbackups",
    spec_model=TypesenseScheduledBackupSpec,
    status_model=TypesenseScheduledBackupStatus,
    description="TypesenseBackups of a cluster on a cron schedule, pruned by a retention policy.",
    short_names=("tsschedule",),
    categories=("typesense",),
    printer_columns=(
        PrinterColumn("Cluster", ".spec.cluster.name", description="The cluster backed up"),
        PrinterColumn("Schedule", ".spec.schedule", description="Cron schedule (UTC)"),
        PrinterColumn("Suspended", ".spec.suspend", "boolean", "No new backups while true"),
        PrinterColumn("Last", ".status.lastScheduleTime", "date", "When the last backup was made"),
        PrinterColumn("Next", ".status.nextScheduleTime", "date", "When the next one is due", priority=1),
        PrinterColumn("Age", ".metadata.creationTimestamp", "date"),
    ),
)
