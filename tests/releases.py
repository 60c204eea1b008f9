"""Cluster stack releases for the tests, and the Cluster API objects around them: the test kit's builders
(operator_testkit.drivers.clusterstack)."""

from operator_testkit.drivers.clusterstack import (
    ONE_STAGE,
    capi_cluster,
    dependency_chart,
    dependency_on,
    kubeconfig_secret,
    package_cluster_class,
    publish_release,
    push_release,
)

__all__ = [
    "ONE_STAGE",
    "capi_cluster",
    "dependency_chart",
    "dependency_on",
    "kubeconfig_secret",
    "package_cluster_class",
    "publish_release",
    "push_release",
]
