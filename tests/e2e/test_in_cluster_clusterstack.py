"""The Cluster Stack operator installed as its users install it, and running inside the cluster.

As in ``test_in_cluster.py``: the real helm installs ``charts/cluster-stack-operator`` (its CRDs
too) onto a control plane of this module's own, and the node agent runs the operator's pod from the
image of this checkout, as the chart runs it: user 65532, a read-only root, /tmp and the release
volume its only writable places, the in-cluster configuration, the chart's RBAC, and the image's own
helm. Cluster API's CRDs are there, as they are wherever the operator is used. Its releases come from
an OCI registry on loopback, which the pod reaches as any registry: the pod shares the machine's
network, not its filesystem.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from in_cluster import assert_runs_from_the_image_as_the_chart_says, environment, operator_process_on_agent
from operator_core import errors
from operator_core.kube import Kube
from operator_testkit.charts import install_chart, uninstall_chart
from operator_testkit.clusterstack_tools import ClusterStackTools
from operator_testkit.controlplane import ENDPOINT_CONTROLLERS, ControlPlane
from operator_testkit.fixtures import crd_documents, install_crds, wait_until, worker_slice
from operator_testkit.image import Image
from operator_testkit.nodeagent.harness import AgentProcess, start_agent
from operator_testkit.registry import RunningRegistry
from releases import publish_release, push_release

pytestmark = pytest.mark.e2e

API = "clusterstack.x-k8s.io/v1alpha1"
COMMAND = "cluster-stack-operator"
RELEASE, NAMESPACE = "cso", "cso-system"
REPOSITORY = "kaas/cluster-stacks"
TAG = "docker-inpod-1-30-v1"
STACKS = "stacks"


@pytest.fixture(scope="module")
def plane(start_control_plane: Any, clusterstack_tools: ClusterStackTools) -> ControlPlane:
    """A control plane of this module's own, with Cluster API's and the Docker provider's CRDs."""
    control_plane: ControlPlane = start_control_plane(
        "in-cluster-clusterstack",
        service_cidr=worker_slice("127.104.0.0/16"),
        disabled_controllers=ENDPOINT_CONTROLLERS,
    )
    documents = [*crd_documents(clusterstack_tools.capi_crds), *crd_documents(clusterstack_tools.capd_crds)]
    asyncio.run(install_crds(control_plane, documents))
    return control_plane


@pytest.fixture(scope="module")
def agent(plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[AgentProcess]:
    started = start_agent(
        plane,
        tmp_path_factory.mktemp("in-cluster-clusterstack-agent"),
        "--pod-cidr",
        worker_slice("127.54.0.0/16"),
    )
    try:
        yield started
    finally:
        started.stop()


@pytest_asyncio.fixture
async def kube(plane: ControlPlane) -> AsyncIterator[Kube]:
    client = Kube.connect(plane.kubeconfig)
    try:
        yield client
    finally:
        await client.close()


def chart_values(path: Path, image: Image, registry: RunningRegistry) -> Path:
    """The chart's values: the image of this checkout, and the registry as the release source."""
    repository, tag = image.name.rsplit(":", 1)
    values = {
        "image": {"repository": repository, "tag": tag},
        "env": [
            {"name": "OPERATOR_SUITE_RELEASE_SOURCE", "value": "oci"},
            {"name": "OPERATOR_SUITE_OCI_REPOSITORY", "value": f"{registry.host}/{REPOSITORY}"},
            {"name": "OPERATOR_SUITE_OCI_PLAIN_HTTP", "value": "true"},
        ],
    }
    path.write_text(json.dumps(values))  # JSON is YAML
    return path


def operator_log(agent: AgentProcess, lines: int = 40) -> str:
    """The last lines the operator's container wrote (the agent keeps them under its state directory)."""
    logs = sorted((agent.state_dir / "logs").glob(f"{NAMESPACE}_*/operator/*.log"))
    text = "\n".join(path.read_text(errors="replace") for path in logs)
    return "\n".join(text.splitlines()[-lines:]) or "(the operator wrote nothing)"


@contextlib.contextmanager
def with_the_operators_log(agent: AgentProcess) -> Iterator[None]:
    """A wait that times out says what the operator logged meanwhile."""
    try:
        yield
    except pytest.fail.Exception as failure:
        pytest.fail(f"{failure}\n--- the operator's log:\n{operator_log(agent)}")


def condition(obj: dict[str, Any] | None, kind: str) -> dict[str, Any]:
    for entry in ((obj or {}).get("status") or {}).get("conditions") or []:
        if entry["type"] == kind:
            return dict(entry)
    return {}


async def test_the_chart_runs_the_operator_from_the_image_and_it_reconciles_a_cluster_stack(
    plane: ControlPlane,
    agent: AgentProcess,
    kube: Kube,
    suite_image: Image,
    clusterstack_tools: ClusterStackTools,
    oci_registry: RunningRegistry,
    tmp_path: Path,
) -> None:
    _, published = publish_release(tmp_path / "published", TAG, helm=clusterstack_tools.helm)
    await asyncio.to_thread(push_release, oci_registry, published, REPOSITORY)
    helm_home = tmp_path / "helm"
    values = chart_values(tmp_path / "values.json", suite_image, oci_registry)
    install_chart(
        helm_home, plane.kubeconfig, RELEASE, "cluster-stack-operator", NAMESPACE, ["-f", str(values)]
    )

    pid = operator_process_on_agent(agent, COMMAND)
    assert_runs_from_the_image_as_the_chart_says(pid, COMMAND)

    plane.kubectl("create", "namespace", STACKS)
    # The chart's webhooks answer through the chart's Service, with the chart's own certificate: the
    # API server refuses, in the webhook's words, what only the webhook refuses.
    elsewhere = {
        "apiVersion": API,
        "kind": "ClusterAddon",
        "metadata": {"name": "probe", "namespace": STACKS},
        "spec": {
            "clusterRef": {
                "apiVersion": "cluster.x-k8s.io/v1beta2",
                "kind": "Cluster",
                "name": "x",
                "namespace": "other",
            }
        },
    }

    async def refused_by_the_webhook() -> str | None:
        try:
            await kube.create(elsewhere)
        except errors.Forbidden as error:
            return str(error) if "clusteraddons.clusterstack.x-k8s.io" in str(error) else None
        await kube.delete(API, "ClusterAddon", "probe", STACKS)
        return None

    with with_the_operators_log(agent):
        refusal: Any = await wait_until(refused_by_the_webhook, timeout=60, what="the webhook to answer")
    assert "a ClusterAddon lives beside its Cluster" in refusal
    created = await kube.create(
        {
            "apiVersion": API,
            "kind": "ClusterStack",
            "metadata": {"name": "inpod", "namespace": STACKS},
            "spec": {
                "provider": "docker",
                "name": "inpod",
                "kubernetesVersion": "1.30",
                "versions": ["v1"],
                "autoSubscribe": False,
                "noProvider": True,
            },
        }
    )
    generation = created["metadata"]["generation"]

    # The operator reconciles the stack: it creates the release of the version it lists, and reports.
    async def reported() -> dict[str, Any] | None:
        found = await kube.get(API, "ClusterStack", "inpod", STACKS)
        status = (found or {}).get("status") or {}
        return found if status.get("observedGeneration") == generation and status.get("summary") else None

    with with_the_operators_log(agent):
        stack: Any = await wait_until(reported, timeout=60, what="the ClusterStack's status")
    assert condition(stack, "ClusterStackReleasesSynced")["status"] == "True"
    assert [entry["name"] for entry in stack["status"]["summary"]] == ["v1"]
    release = await kube.get(API, "ClusterStackRelease", TAG, STACKS)
    assert release is not None, "the ClusterStackRelease of the listed version"
    assert {o["kind"] for o in release["metadata"]["ownerReferences"]} == {"ClusterStack"}

    # The release is downloaded from the registry into the chart's release volume, rendered by the
    # image's own helm, and applied: Ready.
    async def ready() -> dict[str, Any] | None:
        found = await kube.get(API, "ClusterStackRelease", TAG, STACKS)
        return found if (found or {}).get("status", {}).get("ready") else None

    with with_the_operators_log(agent):
        settled: Any = await wait_until(ready, timeout=90, what="the release to be Ready")
    status = json.dumps(settled["status"], indent=1)
    assert condition(settled, "ClusterStackReleaseDownloaded")["status"] == "True", status
    assert settled["status"]["kubernetesVersion"] == "v1.30.10", "read from the downloaded metadata"
    assert condition(settled, "HelmChartApplied")["status"] == "True", status
    assert condition(settled, "Ready")["status"] == "True", status
    assert await kube.get("cluster.x-k8s.io/v1beta2", "ClusterClass", TAG, STACKS) is not None, (
        "the cluster-class chart's ClusterClass, rendered by the image's helm"
    )
    assert environment(pid)["OPERATOR_SUITE_RELEASE_DIR"] == "/var/cache/cluster-stack-operator/releases"

    uninstall_chart(helm_home, plane.kubeconfig, RELEASE, NAMESPACE)

    async def operator_gone() -> bool:
        return not await kube.list("v1", "Pod", NAMESPACE)

    await wait_until(operator_gone, timeout=60, interval=0.5, what="the operator's pod to go")
    assert await kube.get(API, "ClusterStack", "inpod", STACKS) is not None, "the stacks stay"
