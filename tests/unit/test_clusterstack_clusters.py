"""Which Clusters use a namespace's ClusterClasses, read in both versions Cluster API serves: each Cluster
once, in the view that names its class."""

from __future__ import annotations

from typing import Any

from clusterstack_operator.controller.clusters import clusters_by_class, clusters_using
from operator_core import errors

V1BETA1, V1BETA2 = "cluster.x-k8s.io/v1beta1", "cluster.x-k8s.io/v1beta2"


class TwoViews:
    """A Kube whose Clusters list differently in each version, as an API server without Cluster API's
    conversion webhook lists them; a version left out is not served."""

    def __init__(self, views: dict[str, list[dict[str, Any]]]) -> None:
        self.views = views

    async def list(self, api_version: str, kind: str, namespace: str | None = None) -> list[dict[str, Any]]:
        if api_version not in self.views:
            raise errors.NotFound(f"{kind} of {api_version} is not served")
        return [
            cluster
            for cluster in self.views[api_version]
            if namespace in ("*", cluster["metadata"]["namespace"])
        ]


def a_cluster(name: str, topology: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "stacks"}, "spec": {"topology": topology}}


async def test_a_cluster_written_as_v1beta1_holds_its_release_though_its_v1beta2_view_names_no_class() -> (
    None
):
    # Written as v1beta1 with topology.class; without a conversion webhook its v1beta2 view lacks the
    # field (v1beta2 spells it classRef), and v1beta2 is listed first.
    kube = TwoViews(
        {
            V1BETA2: [a_cluster("old", {"version": "v1.30.0"})],
            V1BETA1: [a_cluster("old", {"class": "docker-ferrol-1-30-v1", "version": "v1.30.0"})],
        }
    )
    clusters = await clusters_using(kube, "stacks")  # type: ignore[arg-type]
    assert [c["metadata"]["name"] for c in clusters] == ["old"]
    assert clusters_by_class(clusters, "stacks") == {"docker-ferrol-1-30-v1": {"old"}}


async def test_a_cluster_is_read_once_and_as_v1beta2_when_both_views_name_its_class() -> None:
    kube = TwoViews(
        {
            V1BETA2: [a_cluster("new", {"classRef": {"name": "docker-ferrol-1-30-v2"}})],
            V1BETA1: [a_cluster("new", {"class": "docker-ferrol-1-30-v2"})],
        }
    )
    clusters = await clusters_using(kube, "stacks")  # type: ignore[arg-type]
    assert [c["apiVersion"] for c in clusters] == [V1BETA2]


async def test_a_version_not_served_is_passed_over() -> None:
    kube = TwoViews({V1BETA1: [a_cluster("only", {"class": "docker-ferrol-1-30-v1"})]})
    clusters = await clusters_using(kube, "stacks")  # type: ignore[arg-type]
    assert [(c["metadata"]["name"], c["apiVersion"]) for c in clusters] == [("only", V1BETA1)]
