"""The Typesense operator's API: TypesenseCluster, TypesenseBackup and TypesenseScheduledBackup, the
content kinds (TypesenseCollection, TypesenseAlias, TypesenseSynonym, TypesenseOverride), their spec
and status models, and the CRDs they generate.

A kind joins ``CUSTOM_RESOURCES`` (its CRD served) with the controller that acts on it: a kind nothing
reconciles is not offered. TypesenseScheduledBackup's is
:mod:`typesense_operator.controller.schedule.reconcile`.
"""

from typesense_operator.api.backups import (
    TYPESENSE_BACKUP,
    TYPESENSE_SCHEDULED_BACKUP,
    TypesenseBackupSpec,
    TypesenseBackupStatus,
)
from typesense_operator.api.content import CONTENT_RESOURCES
from typesense_operator.api.v1alpha1 import TYPESENSE_CLUSTER, TypesenseClusterSpec, TypesenseClusterStatus

CUSTOM_RESOURCES = [TYPESENSE_CLUSTER, TYPESENSE_BACKUP, TYPESENSE_SCHEDULED_BACKUP, *CONTENT_RESOURCES]

__all__ = [
    "CONTENT_RESOURCES",
    "CUSTOM_RESOURCES",
    "TYPESENSE_BACKUP",
    "TYPESENSE_CLUSTER",
    "TYPESENSE_SCHEDULED_BACKUP",
    "TypesenseBackupSpec",
    "TypesenseBackupStatus",
    "TypesenseClusterSpec",
    "TypesenseClusterStatus",
]
