"""The Monocle operator installed as users install it, and running inside the cluster.

The real helm installs the Monocle chart onto a real node of this module's own (the CRDs come from
the chart), with the image built from this checkout; a real kubelet, containerd and runc run the
operator's pod as the chart says (user 65532, a read-only root, a token bound to the pod, the API
server through the ``kubernetes`` Service). The instance it brings to Ready runs on the test kit's
stand-ins for Elasticsearch and Monocle (:mod:`operator_testkit.nodes.standins`), which cannot be had
here. (The Typesense chart: ``test_in_cluster.py``.)
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from in_cluster import (
    assert_runs_from_the_image_as_the_chart_says,
    environment,
    ready_condition,
    token_claims,
)
from operator_core.kube import Kube
from operator_testkit.charts import install_chart, uninstall_chart
from operator_testkit.controlplane import ControlPlane
from operator_testkit.fixtures import wait_until
from operator_testkit.image import Image
from operator_testkit.nodes.cluster import LocalCluster
from operator_testkit.nodes.images import NodeImage
from operator_testkit.nodes.standins import monocle_standins

pytestmark = pytest.mark.e2e

MONOCLE = "monocle.monocle.change-metrics.io/v1alpha1"


@pytest.fixture(scope="module")
def nodes(tmp_path_factory: pytest.TempPathFactory, suite_image: Image) -> Iterator[LocalCluster]:
    """A real node and a control plane of this module's own: helm installs the CRDs there, and no
    operator of the session's runs beside the installed one. One node is enough (a Monocle instance
    asks for no spreading) and starts in half the time of three."""
    cluster = LocalCluster(
        tmp_path_factory.mktemp("in-cluster-monocle"),
        count=1,
        extra_images=[*monocle_standins(), NodeImage(suite_image.name, (suite_image.name,))],
    )
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def plane(nodes: LocalCluster) -> ControlPlane:
    assert nodes.control_plane is not None
    return nodes.control_plane


@pytest_asyncio.fixture
async def kube(plane: ControlPlane) -> Any:
    client = Kube.connect(plane.kubeconfig)
    try:
        yield client
    finally:
        await client.close()


async def operator_process(nodes: LocalCluster, kube: Kube, namespace: str) -> int:
    """The host pid of the operator's process, once its pod's container runs."""

    async def running_pod() -> str | None:
        for pod in await kube.list("v1", "Pod", namespace):
            statuses = (pod.get("status") or {}).get("containerStatuses") or []
            if statuses and "running" in (statuses[0].get("state") or {}):
                return str(pod["metadata"]["name"])
        return None

    pod = await wait_until(running_pod, timeout=60, interval=0.5, what=f"the operator's pod in {namespace}")
    return await nodes.faults(kube).pid(namespace, str(pod))


async def test_monocle_chart_installs_a_cluster_wide_operator_that_brings_a_sample_to_ready(
    plane: ControlPlane,
    nodes: LocalCluster,
    kube: Kube,
    samples: dict[str, list[dict[str, Any]]],
    tmp_path: Path,
    suite_image: Image,
) -> None:
    repository, tag = suite_image.name.rsplit(":", 1)
    image_values = ["--set", f"image.repository={repository}", "--set", f"image.tag={tag}"]
    helm_home = tmp_path / "helm"
    install_chart(helm_home, plane.kubeconfig, "mon", "monocle-operator", "monocle-system", image_values)

    # The pod runs the image's command from the image, with the in-cluster configuration.
    pid = await operator_process(nodes, kube, "monocle-system")
    assert_runs_from_the_image_as_the_chart_says(pid, "monocle-operator")
    env = environment(pid)
    assert env["KUBERNETES_SERVICE_HOST"] == str(plane.service_cidr[1])
    assert env["KUBERNETES_SERVICE_PORT"] == "443"
    claims = token_claims(pid)
    assert claims["sub"] == "system:serviceaccount:monocle-system:mon-monocle-operator"
    (pod,) = await kube.list("v1", "Pod", "monocle-system")
    assert claims["kubernetes.io"]["pod"]["name"] == pod["metadata"]["name"], "a token bound to the pod"

    # Watching every namespace, it brings the sample up in one it was never told of.
    plane.kubectl("create", "namespace", "metrics")
    (sample,) = samples["monocle_v1alpha1_monocle"]
    await kube.apply({**sample, "metadata": {**sample["metadata"], "namespace": "metrics"}})
    await ready_condition(kube, MONOCLE, "Monocle", sample["metadata"]["name"], "metrics")

    uninstall_chart(helm_home, plane.kubeconfig, "mon", "monocle-system")
    assert await kube.get("apps/v1", "Deployment", "mon-monocle-operator", "monocle-system") is None
    assert await kube.get(MONOCLE, "Monocle", sample["metadata"]["name"], "metrics") is not None
