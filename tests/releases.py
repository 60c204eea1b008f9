"""Cluster stack releases for the tests: the test kit's builder (operator_testkit.drivers.clusterstack)."""

from operator_testkit.drivers.clusterstack import package_cluster_class, publish_release, push_release

__all__ = ["package_cluster_class", "publish_release", "push_release"]
