"""The TypesenseCluster API: spec and status models, and the CRD they generate."""

from typesense_operator.api.v1alpha1 import (
    CUSTOM_RESOURCES,
    TYPESENSE_CLUSTER,
    TypesenseClusterSpec,
    TypesenseClusterStatus,
)

__all__ = ["CUSTOM_RESOURCES", "TYPESENSE_CLUSTER", "TypesenseClusterSpec", "TypesenseClusterStatus"]
