"""API models of the Cluster Stack operator; each kind here also generates its CRD."""

from clusterstack_operator.api.v1alpha1 import (
    CLUSTER_ADDON,
    CLUSTER_STACK,
    CLUSTER_STACK_RELEASE,
    CUSTOM_RESOURCES,
    ClusterAddonSpec,
    ClusterAddonStatus,
    ClusterStackReleaseSpec,
    ClusterStackReleaseStatus,
    ClusterStackSpec,
    ClusterStackStatus,
)

__all__ = [
    "CLUSTER_ADDON",
    "CLUSTER_STACK",
    "CLUSTER_STACK_RELEASE",
    "CUSTOM_RESOURCES",
    "ClusterAddonSpec",
    "ClusterAddonStatus",
    "ClusterStackReleaseSpec",
    "ClusterStackReleaseStatus",
    "ClusterStackSpec",
    "ClusterStackStatus",
]
