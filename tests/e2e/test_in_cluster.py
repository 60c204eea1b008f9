"""The operators installed as users install them, and running inside the cluster.

The real helm installs a chart onto a local control plane of this module's own (the CRDs come from
the chart too), with the image built from this checkout. The node agent runs the operator's pod from
that image's own root filesystem, as the chart runs it: user 65532, a read-only root, the image's
``ENV`` and only what a kubelet adds, the pod's volumes at their paths and a ServiceAccount token
bound to the pod. The operator finds the API server as in any cluster, through
``KUBERNETES_SERVICE_HOST`` (the ``kubernetes`` Service) and the token file, with no kubeconfig, so
it can do exactly what the chart's RBAC grants.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from operator_core.kube import Kube
from operator_testkit.assertions import wait_for_condition
from operator_testkit.charts import install_chart, uninstall_chart
from operator_testkit.controlplane import ENDPOINT_CONTROLLERS, ControlPlane
from operator_testkit.drivers.typesense import (
    TypesenseCluster,
    assert_each_node_once_and_the_leader_last,
    first_restart,
    restarts_in_order,
    roll_under_writes,
    rolled_by_the_operator,
)
from operator_testkit.fixtures import wait_until, worker_slice
from operator_testkit.image import Image
from operator_testkit.nodeagent.harness import AgentProcess, processes_under, start_agent

pytestmark = pytest.mark.e2e

TYPESENSE = "ts.opentelekomcloud.com/v1alpha1"
MONOCLE = "monocle.monocle.change-metrics.io/v1alpha1"
# /var/run is a symlink to /run, which /proc/PID/root would resolve in the caller's mount namespace.
TOKEN_DIR = "run/secrets/kubernetes.io/serviceaccount"


@pytest.fixture(scope="module")
def plane(start_control_plane: Any) -> ControlPlane:
    """A control plane of this module's own: helm installs the CRDs here, and no operator of the
    session's runs beside the installed one."""
    control_plane: ControlPlane = start_control_plane(
        "in-cluster",
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


@pytest.fixture(scope="module")
def helm_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("helm")


@pytest.fixture(scope="module")
def image_values(suite_image: Image) -> list[str]:
    """The chart's image values naming the image of this checkout."""
    repository, tag = suite_image.name.rsplit(":", 1)
    return ["--set", f"image.repository={repository}", "--set", f"image.tag={tag}"]


@pytest_asyncio.fixture
async def kube(plane: ControlPlane) -> Any:
    client = Kube.connect(plane.kubeconfig)
    try:
        yield client
    finally:
        await client.close()


def operator_process(agent: AgentProcess, command: str) -> int:
    """The pid of the operator the agent runs for a pod (its process's working directory is the pod's)."""
    for pid in processes_under(agent.state_dir):
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        if any(Path(word.decode()).name == command for word in argv[:2] if word):
            return pid
    raise AssertionError(f"no {command} process under {agent.state_dir}")


def token_claims(pid: int) -> dict[str, Any]:
    """The claims of the token the process sees at the in-cluster path (in its own mount namespace)."""
    token = Path(f"/proc/{pid}/root/{TOKEN_DIR}/token").read_text()
    payload = token.split(".")[1]
    claims: dict[str, Any] = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    return claims


def environment(pid: int) -> dict[str, str]:
    entries = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(entry.decode().split("=", 1) for entry in entries if b"=" in entry)


IMAGE_ENV = {"PATH", "PYTHONDONTWRITEBYTECODE", "PYTHONUNBUFFERED"}  # the Dockerfile's ENV


def from_a_kubelet(name: str) -> bool:
    """A variable a kubelet gives a container: HOSTNAME, a Service link, or the chart's own env."""
    links = ("_SERVICE_HOST", "_SERVICE_PORT", "_PORT", "_PROTO", "_ADDR")
    return (
        name == "HOSTNAME"
        or name.startswith("OPERATOR_SUITE_")
        or "_SERVICE_PORT_" in name
        or (name.endswith(links) or "_PORT_" in name)
    )


def assert_runs_from_the_image_as_the_chart_says(pid: int, command: str) -> None:
    """The process is the image's program in the image's root, as 65532 with a read-only root, no
    privilege to gain, and nothing in its environment but the image's and a kubelet's."""
    status = dict(line.split(":\t", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines())
    assert status["Uid"].split() == ["65532"] * 4
    assert status["Gid"].split() == ["65532"] * 4
    assert status["NoNewPrivs"] == "1"
    assert int(status["CapEff"], 16) == int(status["CapBnd"], 16) == 0
    root = Path(f"/proc/{pid}/root")
    assert (root / "opt/operator-suite/bin" / command).is_file(), "the image's own program"
    assert not (root / "root/.cache/operator-suite").exists(), "nothing of this machine's filesystem"
    (root_mount,) = [line.split() for line in Path(f"/proc/{pid}/mountinfo").read_text().splitlines()
                     if line.split()[4] == "/"]  # fmt: skip
    assert "ro" in root_mount[5].split(","), "a read-only root filesystem"
    env = environment(pid)
    assert "KUBECONFIG" not in env
    assert env["HOME"] == "/home/nonroot", "from the image's passwd, as a runtime sets it"
    strays = sorted(name for name in env if name not in IMAGE_ENV | {"HOME"} and not from_a_kubelet(name))
    assert strays == [], f"variables no kubelet gives: {strays}"


async def ready_condition(kube: Kube, api: str, kind: str, name: str, namespace: str) -> dict[str, Any]:
    """The Ready=True condition, once there."""
    return await wait_for_condition(kube, api, kind, name, namespace, "Ready", "True", timeout=180)


async def test_typesense_chart_installs_a_namespaced_operator_that_runs_a_cluster_in_its_namespace_only(
    plane: ControlPlane,
    agent: AgentProcess,
    helm_home: Path,
    kube: Kube,
    samples: dict[str, list[dict[str, Any]]],
    image_values: list[str],
) -> None:
    for namespace in ("search", "elsewhere"):
        plane.kubectl("create", "namespace", namespace)
    install_chart(
        helm_home, plane.kubeconfig, "ts", "typesense-operator", "typesense-system",
        [*image_values, "--set", "watchNamespaces={search}", "--set", "logFormat=json"],
    )  # fmt: skip

    # The pod runs the image's command from the image, with the in-cluster configuration.
    pid = operator_process(agent, "typesense-operator")
    assert_runs_from_the_image_as_the_chart_says(pid, "typesense-operator")
    env = environment(pid)
    assert env["KUBERNETES_SERVICE_HOST"] == str(plane.service_cidr[1])
    assert env["KUBERNETES_SERVICE_PORT"] == "443"
    claims = token_claims(pid)
    assert claims["sub"] == "system:serviceaccount:typesense-system:ts-typesense-operator"
    pods = await kube.list("v1", "Pod", "typesense-system")
    assert claims["kubernetes.io"]["pod"]["name"] == pods[0]["metadata"]["name"], "a token bound to the pod"

    (sample,) = samples["ts_v1alpha1_typesensecluster_aws"]
    for namespace in ("search", "elsewhere"):
        await kube.apply({**sample, "metadata": {**sample["metadata"], "namespace": namespace}})
    await ready_condition(kube, TYPESENSE, "TypesenseCluster", "cluster-1", "search")
    cluster = await kube.get(TYPESENSE, "TypesenseCluster", "cluster-1", "search")
    assert cluster is not None
    assert cluster["status"]["quorum"]["state"] == "OK"
    members = await kube.list("v1", "Pod", "search", labels={"app.kubernetes.io/instance": "cluster-1"})
    assert len(members) == 3

    # The cluster in a namespace it does not watch was never touched: no status, no children.
    ignored = await kube.get(TYPESENSE, "TypesenseCluster", "cluster-1", "elsewhere")
    assert ignored is not None
    assert not ignored.get("status")
    assert not ignored["metadata"].get("finalizers")
    assert await kube.list("apps/v1", "StatefulSet", "elsewhere") == []
    assert await kube.list("v1", "Secret", "elsewhere") == []

    claims_before = {p["metadata"]["name"] for p in await kube.list("v1", "PersistentVolumeClaim", "search")}
    assert len(claims_before) == 3
    uninstall_chart(helm_home, plane.kubeconfig, "ts", "typesense-system")

    async def operator_gone() -> bool:
        return not await kube.list("v1", "Pod", "typesense-system")

    await wait_until(operator_gone, timeout=60, interval=0.5, what="the operator's pod to go")
    assert await kube.get("apps/v1", "Deployment", "ts-typesense-operator", "typesense-system") is None
    claims_after = {p["metadata"]["name"] for p in await kube.list("v1", "PersistentVolumeClaim", "search")}
    assert claims_after == claims_before, "uninstalling the operator keeps the clusters' data"
    assert await kube.get(TYPESENSE, "TypesenseCluster", "cluster-1", "search") is not None


async def test_monocle_chart_installs_a_cluster_wide_operator_that_brings_a_sample_to_ready(
    plane: ControlPlane,
    agent: AgentProcess,
    helm_home: Path,
    kube: Kube,
    samples: dict[str, list[dict[str, Any]]],
    image_values: list[str],
) -> None:
    install_chart(helm_home, plane.kubeconfig, "mon", "monocle-operator", "monocle-system", image_values)
    pid = operator_process(agent, "monocle-operator")
    assert_runs_from_the_image_as_the_chart_says(pid, "monocle-operator")
    assert token_claims(pid)["sub"] == "system:serviceaccount:monocle-system:mon-monocle-operator"

    plane.kubectl("create", "namespace", "metrics")
    (sample,) = samples["monocle_v1alpha1_monocle"]
    await kube.apply({**sample, "metadata": {**sample["metadata"], "namespace": "metrics"}})
    # Monocle and Elasticsearch run as the agent's stand-ins: Ready is as far as they go.
    await ready_condition(kube, MONOCLE, "Monocle", sample["metadata"]["name"], "metrics")

    uninstall_chart(helm_home, plane.kubeconfig, "mon", "monocle-system")
    assert await kube.get("apps/v1", "Deployment", "mon-monocle-operator", "monocle-system") is None


async def test_two_replicas_hand_over_mid_roll_and_the_new_leader_completes_it_without_repeating_a_step(
    plane: ControlPlane, agent: AgentProcess, helm_home: Path, kube: Kube, image_values: list[str]
) -> None:
    plane.kubectl("create", "namespace", "ha-watched")
    install_chart(
        helm_home, plane.kubeconfig, "ha", "typesense-operator", "ha-system",
        [*image_values, "--set", "replicas=2", "--set", "watchNamespaces={ha-watched}"],
    )  # fmt: skip
    cluster = TypesenseCluster(kube, "ha-watched")
    await cluster.create(replicas=3)
    await cluster.wait_ready()
    await cluster.create_collection()
    lease_name = "ha-typesense-operator-leader"

    async def holder() -> str | None:
        lease = await kube.get("coordination.k8s.io/v1", "Lease", lease_name, "ha-system")
        return ((lease or {}).get("spec") or {}).get("holderIdentity") or None

    replicas = {p["metadata"]["name"] for p in await kube.list("v1", "Pod", "ha-system")}
    handover: list[float] = []

    async def change_then_delete_the_leaders_pod() -> None:
        await cluster.create(replicas=3, resources={"requests": {"cpu": "110m"}})
        await first_restart(cluster)
        leader = await holder()
        assert leader is not None
        leader_pod = leader.rsplit("_", 1)[0]  # the identity is the pod's host name, then the process id
        assert leader_pod in replicas, f"the Lease names a pod: {leader} among {replicas}"
        started = time.monotonic()
        plane.kubectl("delete", "pod", leader_pod, "-n", "ha-system", "--wait=false")

        async def taken_over() -> str | None:
            now = await holder()
            return now if now is not None and not now.startswith(leader_pod + "_") else None

        successor = await wait_until(
            taken_over, timeout=30, interval=0.1, what="the standby to take the Lease"
        )
        handover.append(time.monotonic() - started)
        assert str(successor).rsplit("_", 1)[0] in replicas, "the standby, not the Deployment's new pod"

    try:
        roll = await roll_under_writes(cluster, change_then_delete_the_leaders_pod, timeout=240)
        await rolled_by_the_operator(cluster, roll.revision)
        # The new leader carried on from the revisions the pods run: no node restarted twice.
        assert_each_node_once_and_the_leader_last(await restarts_in_order(cluster))
        await cluster.assert_nothing_lost(roll.acknowledged)
    finally:
        await cluster.http.aclose()
    assert handover[0] < 8, f"handover took {handover[0]:.1f} s"
    print(f"in-cluster handover after deleting the leader's pod mid-roll: {handover[0]:.1f} s")
    uninstall_chart(helm_home, plane.kubeconfig, "ha", "ha-system")
