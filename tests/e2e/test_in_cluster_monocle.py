"""The Monocle operator installed as users install it, and running inside the cluster: the real helm
installs its chart onto a control plane of this module's own, with the image built from this
checkout, and the node agent runs the operator's pod from that image's own root filesystem, as the
chart says. It moves to real nodes (``tests/e2e/nodes/test_in_cluster.py``) once Monocle's stand-in
images (Elasticsearch, the API, the crawler) exist there."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from in_cluster import (
    assert_runs_from_the_image_as_the_chart_says,
    operator_process_on_agent,
    ready_condition,
    token_claims,
)
from operator_core.kube import Kube
from operator_testkit.charts import install_chart, uninstall_chart
from operator_testkit.controlplane import ENDPOINT_CONTROLLERS, ControlPlane
from operator_testkit.fixtures import worker_slice
from operator_testkit.image import Image
from operator_testkit.nodeagent.harness import AgentProcess, start_agent

MONOCLE = "monocle.monocle.change-metrics.io/v1alpha1"


@pytest.fixture(scope="module")
def plane(start_control_plane: Any) -> ControlPlane:
    control_plane: ControlPlane = start_control_plane(
        "in-cluster-monocle",
        service_cidr=worker_slice("127.103.0.0/16"),
        disabled_controllers=ENDPOINT_CONTROLLERS,
    )
    return control_plane


@pytest.fixture(scope="module")
def agent(plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[AgentProcess]:
    started = start_agent(
        plane, tmp_path_factory.mktemp("in-cluster-agent"), "--pod-cidr", worker_slice("127.53.0.0/16")
    )
    try:
        yield started
    finally:
        started.stop()


@pytest_asyncio.fixture
async def kube(plane: ControlPlane) -> Any:
    client = Kube.connect(plane.kubeconfig)
    try:
        yield client
    finally:
        await client.close()


async def test_monocle_chart_installs_a_cluster_wide_operator_that_brings_a_sample_to_ready(
    plane: ControlPlane,
    agent: AgentProcess,
    kube: Kube,
    samples: dict[str, list[dict[str, Any]]],
    tmp_path: Path,
    suite_image: Image,
) -> None:
    repository, tag = suite_image.name.rsplit(":", 1)
    image_values = ["--set", f"image.repository={repository}", "--set", f"image.tag={tag}"]
    helm_home = tmp_path / "helm"
    install_chart(helm_home, plane.kubeconfig, "mon", "monocle-operator", "monocle-system", image_values)
    pid = operator_process_on_agent(agent, "monocle-operator")
    assert_runs_from_the_image_as_the_chart_says(pid, "monocle-operator")
    assert token_claims(pid)["sub"] == "system:serviceaccount:monocle-system:mon-monocle-operator"

    plane.kubectl("create", "namespace", "metrics")
    (sample,) = samples["monocle_v1alpha1_monocle"]
    await kube.apply({**sample, "metadata": {**sample["metadata"], "namespace": "metrics"}})
    # Monocle and Elasticsearch run as the agent's stand-ins: Ready is as far as they go.
    await ready_condition(kube, MONOCLE, "Monocle", sample["metadata"]["name"], "metrics")

    uninstall_chart(helm_home, plane.kubeconfig, "mon", "monocle-system")
    assert await kube.get("apps/v1", "Deployment", "mon-monocle-operator", "monocle-system") is None
