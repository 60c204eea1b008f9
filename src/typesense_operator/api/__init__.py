"""The Typesense operator's API: TypesenseCluster, TypesenseBackup and TypesenseScheduledBackup, their
spec and status models, and the CRDs they generate.

A kind joins ``CUSTOM_RESOURCES`` (its CRD served) with the controller that acts on it: a kind nothing
reconciles is not offered. TypesenseScheduledBackup's is :mod:`typesense_operator.controller.schedule`.
"""

from typesense_operator.api.backups import (
    TYPESENSE_BACKUP,
    TYPESENSE_SCHEDULED_BACKUP,
    TypesenseBackupSpec,
    TypesenseBackupStatus,
)
from typesense_operator.api.v1alpha1 import TYPESENSE_CLUSTER, TypesenseClusterSpec, TypesenseClusterStatus

CUSTOM_RESOURCES = [TYPESENSE_CLUSTER, TYPESENSE_BACKUP, TYPESENSE_SCHEDULED_BACKUP]

__all__ = [
    "CUSTOM_RESOURCES",
    "TYPESENSE_BACKUP",
    "TYPESENSE_CLUSTER",
    "TYPESENSE_SCHEDULED_BACKUP",
    "TypesenseBackupSpec",
    "TypesenseBackupStatus",
    "TypesenseClusterSpec",
    "TypesenseClusterStatus",
]
