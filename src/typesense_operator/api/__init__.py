"""The Typesense operator's API: TypesenseCluster and TypesenseBackup, their spec and status models, and
the CRDs they generate.

TypesenseScheduledBackup's models (:mod:`.backups`) are written and tested, and join ``CUSTOM_RESOURCES``
(their CRD served) with the controller that acts on them: a kind nothing reconciles is not offered.
"""

from typesense_operator.api.backups import TYPESENSE_BACKUP, TypesenseBackupSpec, TypesenseBackupStatus
from typesense_operator.api.v1alpha1 import TYPESENSE_CLUSTER, TypesenseClusterSpec, TypesenseClusterStatus

CUSTOM_RESOURCES = [TYPESENSE_CLUSTER, TYPESENSE_BACKUP]

__all__ = [
    "CUSTOM_RESOURCES",
    "TYPESENSE_BACKUP",
    "TYPESENSE_CLUSTER",
    "TypesenseBackupSpec",
    "TypesenseBackupStatus",
    "TypesenseClusterSpec",
    "TypesenseClusterStatus",
]
