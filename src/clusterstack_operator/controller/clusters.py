"""The Clusters a Cluster Stack object concerns, read in both versions Cluster API serves: the one lookup
of the release finalizer's in-use check, the stack's ClusterAddon creation, the addon's own Cluster and
the admission webhooks.

A Cluster is listed once per version, and the views can differ: without Cluster API's conversion webhook,
a Cluster written as v1beta1 reads as v1beta2 without its ``topology.class`` (v1beta2 spells it
``classRef``). Each Cluster is kept once, in the first version whose view names its ClusterClass, so a
view that names none never hides one that does: a release in use is never let go for want of a field.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from typing import Any

from clusterstack_operator.releases.decide import class_namespace_of, cluster_class_of, cluster_in
from operator_core import errors
from operator_core.kube import Kube

__all__ = [
    "CLUSTER_KINDS",
    "class_namespaces",
    "clusters_by_class",
    "clusters_of",
    "clusters_using",
    "one_view_each",
]

CLUSTER_KINDS = (("cluster.x-k8s.io/v1beta2", "Cluster"), ("cluster.x-k8s.io/v1beta1", "Cluster"))
"""Both versions Cluster API serves, the current one first: a Cluster names its class in v1beta2's
``spec.topology.classRef.name`` or v1beta1's ``spec.topology.class``, and either may be the one a Cluster
was written and read in."""


def one_view_each(listings: list[tuple[str, list[dict[str, Any]]]]) -> list[dict[str, Any]]:
    """Each Cluster of ``listings`` ((apiVersion, Clusters) in :data:`CLUSTER_KINDS`' order) once, with its
    ``apiVersion``: the first view that names a ClusterClass, else the first view."""
    seen: dict[tuple[str, str], dict[str, Any]] = {}
    for api_version, clusters in listings:
        for cluster in clusters:
            metadata = cluster["metadata"]
            key = (metadata.get("namespace") or "", metadata["name"])
            if key not in seen or cluster_class_of(seen[key]) is None:
                seen[key] = {**cluster, "apiVersion": api_version}
    return list(seen.values())


async def _read(
    kube: Kube, namespace: str, wanted: Callable[[Mapping[str, Any]], bool], *, everywhere: bool
) -> list[dict[str, Any]]:
    """The Clusters ``wanted`` keeps, of every namespace when ``everywhere`` (only ``namespace``'s where
    RBAC grants no more: a namespaced installation), one view each. A version not served has none."""
    listings = []
    for api_version, kind in CLUSTER_KINDS:
        listed: list[dict[str, Any]] = []
        with contextlib.suppress(errors.NotFound):
            try:
                listed = await kube.list(api_version, kind, "*" if everywhere else namespace)
            except errors.Forbidden:
                if not everywhere:
                    raise
                listed = await kube.list(api_version, kind, namespace)
        listings.append((api_version, [cluster for cluster in listed if wanted(cluster)]))
    return one_view_each(listings)


async def clusters_of(kube: Kube, namespace: str) -> list[dict[str, Any]]:
    """The Clusters of ``namespace`` (none without Cluster API), each once (:func:`one_view_each`)."""
    return await _read(kube, namespace, lambda _: True, everywhere=False)


async def clusters_using(kube: Kube, namespace: str) -> list[dict[str, Any]]:
    """The Clusters that use the ClusterClasses of ``namespace``: its own, and tenants' in any namespace
    the operator may list whose topology names it as the class namespace, each once
    (:func:`one_view_each`)."""
    return await _read(
        kube, namespace, lambda cluster: class_namespace_of(cluster) == namespace, everywhere=True
    )


def class_namespaces(cluster: Mapping[str, Any]) -> list[str]:
    """The namespace whose stacks and releases a Cluster's change concerns, besides its own."""
    return [class_namespace_of(cluster)]


def clusters_by_class(clusters: list[dict[str, Any]], namespace: str) -> dict[str, set[str]]:
    """ClusterClass name -> the ``clusters`` whose topology uses it, named as :func:`cluster_in` says."""
    used: dict[str, set[str]] = {}
    for cluster in clusters:
        name = cluster_class_of(cluster)
        if name is not None:
            used.setdefault(name, set()).add(cluster_in(cluster, namespace))
    return used
