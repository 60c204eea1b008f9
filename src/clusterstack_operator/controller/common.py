"""Reads and writes both Cluster Stack controllers share: the ClusterClasses Clusters use, and status."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from clusterstack_operator.releases.decide import cluster_class_of
from clusterstack_operator.resources import capi_conditions, conditions_of
from operator_core.crdgen import CustomResource
from operator_core.events import EventRecorder
from operator_core.kube import Kube
from operator_core.manifests import merge_patch
from operator_core.reconciling import ConditionBook, write_status

__all__ = ["CLUSTER_KINDS", "capi_book", "clusters_by_class", "clusters_of", "write_capi_status"]

CLUSTER_KINDS = (("cluster.x-k8s.io/v1beta2", "Cluster"), ("cluster.x-k8s.io/v1beta1", "Cluster"))
"""Both versions Cluster API serves: a Cluster names its class in v1beta2's ``spec.topology.classRef.name``
or v1beta1's ``spec.topology.class``, and either may be the one a Cluster was written and read in."""


async def clusters_of(kube: Kube, namespace: str) -> list[dict[str, Any]]:
    """The Clusters of ``namespace`` (none without Cluster API), each once: as v1beta2 when that is
    served, else as v1beta1."""
    seen: dict[str, dict[str, Any]] = {}
    for api_version, kind in CLUSTER_KINDS:
        for cluster in await kube.list(api_version, kind, namespace):
            seen.setdefault(cluster["metadata"]["name"], {**cluster, "apiVersion": api_version})
    return list(seen.values())


def clusters_by_class(clusters: list[dict[str, Any]]) -> dict[str, set[str]]:
    """ClusterClass name -> the ``clusters`` whose topology uses it."""
    used: dict[str, set[str]] = {}
    for cluster in clusters:
        name = cluster_class_of(cluster)
        if name is not None:
            used.setdefault(name, set()).add(cluster["metadata"]["name"])
    return used


def capi_book(obj: Mapping[str, Any], recorder: EventRecorder) -> ConditionBook:
    """The condition book of one reconcile, from conditions in Cluster API's shape."""
    return ConditionBook(obj, recorder, conditions_of(obj))


async def write_capi_status(
    kube: Kube,
    resource: CustomResource,
    obj: Mapping[str, Any],
    book: ConditionBook,
    fields: Mapping[str, Any],
) -> None:
    """Status ``fields`` and the book's conditions in Cluster API's shape: only what changed, if anything."""
    current = dict(obj.get("status") or {})
    wanted = {**current, **fields, "conditions": capi_conditions(book.conditions)}
    patch = merge_patch(current, wanted)
    if patch:
        await write_status(kube, resource, obj, patch)
