"""Cluster stack releases for the tests, and the Cluster API objects around them: the test kit's builders
(operator_testkit.drivers.clusterstack)."""

from operator_testkit.drivers.clusterstack import (
    capi_cluster,
    kubeconfig_secret,
    package_cluster_class,
    publish_release,
    push_release,
)

__all__ = ["capi_cluster", "kubeconfig_secret", "package_cluster_class", "publish_release", "push_release"]
