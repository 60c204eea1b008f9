"""Where Typesense backups go, and where a restore reads one: S3-compatible object storage or a
PersistentVolumeClaim. Shared by TypesenseBackup, TypesenseScheduledBackup and a TypesenseCluster's
spec.bootstrap.fromBackup.location (a module of its own: the cluster's API and the backups' both use it)."""

from __future__ import annotations

from pydantic import ConfigDict, Field

from operator_core.apimodel import ApiModel, cel

__all__ = ["BackupDestination", "S3Credentials", "S3Destination", "SecretKeyReference", "VolumeDestination"]

# S3's bucket naming rules: 3 to 63 lower-case letters, digits, dots and hyphens, a letter or digit
# at each end.
_BUCKET = r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$"


class SecretKeyReference(ApiModel):
    """A key of a Secret in the same namespace."""

    name: str = Field(min_length=1, max_length=253)
    """Name of the Secret."""
    key: str = Field(min_length=1, max_length=253)
    """Key within the Secret."""


class S3Credentials(ApiModel):
    """The access key of an S3 user, from Secrets. Only the backup's Job reads them (as environment
    variables); the operator never does, and they appear in no log, Event or status."""

    access_key_id: SecretKeyReference
    """The access key id."""
    secret_access_key: SecretKeyReference
    """The secret access key."""


class S3Destination(ApiModel):
    """A bucket of an S3-compatible object storage."""

    bucket: str = Field(
        max_length=63,
        json_schema_extra=cel(
            (f"self.matches('{_BUCKET}')", "bucket must be an S3 bucket name: 3 to 63 of a-z, 0-9, . and -")
        ),
    )
    """Bucket name."""
    prefix: str = Field(default="", max_length=512)
    """Key prefix under which backups go: <prefix>/<namespace>/<cluster>/<backup name>/."""
    endpoint: str | None = Field(
        default=None,
        max_length=512,
        json_schema_extra=cel(
            (
                "self.matches('^https?://[^/]+/?$')",
                "endpoint must be an http(s) URL with no path, such as https://s3.example.com",
            )
        ),
    )
    """The endpoint of an S3-compatible service (https://host:port); AWS's own when not set."""
    region: str = Field(default="us-east-1", min_length=1, max_length=64)
    """Region of the bucket."""
    credentials: S3Credentials
    """Where the access key is."""
    ca: SecretKeyReference | None = None
    """A CA certificate (PEM) to trust for the endpoint, besides the system's: a private endpoint's."""


class VolumeDestination(ApiModel):
    """A PersistentVolumeClaim, for clusters without object storage. Backups go into
    <subPath>/<namespace>/<cluster>/<backup name>/ on it. A ReadWriteOnce claim ties the backup Jobs
    to the node it is attached to."""

    claim_name: str = Field(min_length=1, max_length=253)
    """Name of the PersistentVolumeClaim, in the cluster's namespace."""
    sub_path: str = Field(
        default="",
        max_length=512,
        json_schema_extra=cel(
            ("!self.startsWith('/') && !self.contains('..')", "subPath must be a relative path without '..'")
        ),
    )
    """Folder on the volume under which backups go."""


class BackupDestination(ApiModel):
    """Where backups go: exactly one of s3 and volume."""

    s3: S3Destination | None = None
    """An S3-compatible bucket."""
    volume: VolumeDestination | None = None
    """A PersistentVolumeClaim."""

    model_config = ConfigDict(
        json_schema_extra=cel(
            ("has(self.s3) != has(self.volume)", "a destination is exactly one of s3 and volume"),
        )
    )
