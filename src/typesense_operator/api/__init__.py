"""The Typesense operator's API: TypesenseCluster's spec and status models, and the CRD they generate.

The backup kinds' models (:mod:`.backups`) are written and tested, and join ``CUSTOM_RESOURCES`` (their
CRDs served) with the controller that acts on them: a kind nothing reconciles is not offered.
"""

from typesense_operator.api.v1alpha1 import TYPESENSE_CLUSTER, TypesenseClusterSpec, TypesenseClusterStatus

CUSTOM_RESOURCES = [TYPESENSE_CLUSTER]

__all__ = ["CUSTOM_RESOURCES", "TYPESENSE_CLUSTER", "TypesenseClusterSpec", "TypesenseClusterStatus"]
