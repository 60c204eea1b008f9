"""The operators installed as users install them, and running inside the cluster.

The real helm installs a chart onto a cluster of real nodes of this module's own (the CRDs come from
the chart too), with the image built from this checkout. A real kubelet, containerd and runc run the
operator's pod as the chart says: user 65532, a read-only root, the image's ``ENV`` and only what a
kubelet adds, the pod's volumes at their paths and a ServiceAccount token bound to the pod. The
operator finds the API server as in any cluster, through ``KUBERNETES_SERVICE_HOST`` (the
``kubernetes`` Service, through kube-proxy) and the token file, with no kubeconfig, so it can do
exactly what the chart's RBAC grants.

The Monocle chart's operator watches every namespace and brings its sample up on a real OpenSearch
(:mod:`operator_testkit.nodes.opensearch`) and the test kit's stand-in for Monocle
(:mod:`operator_testkit.nodes.standins`), which cannot be had here.

The Cluster Stack operator's chart runs here too, with Cluster API's CRDs (as wherever it is used):
its releases come from an OCI registry on this machine, which the pod reaches as any registry, at the
address where the nodes reach this machine; its webhooks answer the API server through the chart's
Service, with the chart's own certificate.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import yaml

from in_cluster import (
    assert_runs_from_the_image_as_the_chart_says,
    environment,
    ready_condition,
    token_claims,
)
from node_faults import (
    destructive_steps,
    elect_anew,
    member_pods,
    node_named_lost,
    power_cut,
    raft_leader,
    whole,
)
from operator_core import errors
from operator_core.kube import Kube
from operator_testkit.assertions import condition
from operator_testkit.charts import install_chart, uninstall_chart
from operator_testkit.clusterstack_tools import ClusterStackTools
from operator_testkit.controlplane import ControlPlane
from operator_testkit.drivers.typesense import (
    TypesenseCluster,
    Writer,
    assert_each_node_once_and_the_leader_last,
    first_restart,
    restarts_in_order,
    roll_under_writes,
    rolled_by_the_operator,
)
from operator_testkit.fixtures import crd_documents, install_crds, wait_until
from operator_testkit.image import Image
from operator_testkit.nodes.cluster import LocalCluster
from operator_testkit.nodes.faults import FaultError
from operator_testkit.nodes.images import NodeImage, typesense_image
from operator_testkit.nodes.standins import monocle_images
from operator_testkit.registry import RunningRegistry, running_registry
from releases import capi_cluster, kubeconfig_secret, publish_release, push_release
from stack_operator import hook_writes, ready_release, stages_of

pytestmark = pytest.mark.e2e

TYPESENSE = "ts.opentelekomcloud.com/v1alpha1"
MONOCLE = "monocle.monocle.change-metrics.io/v1alpha1"


@pytest.fixture(scope="module")
def nodes(tmp_path_factory: pytest.TempPathFactory, suite_image: Image) -> Iterator[LocalCluster]:
    """Real nodes and a control plane of this module's own: helm installs the CRDs there, and no
    operator of the session's runs beside the installed one."""
    cluster = LocalCluster(
        tmp_path_factory.mktemp("in-cluster"),
        extra_images=[
            typesense_image(),
            *monocle_images(),
            NodeImage(suite_image.name, (suite_image.name,)),
        ],
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


async def operator_process(nodes: LocalCluster, kube: Kube, namespace: str) -> tuple[int, str]:
    """The host pid of an operator's process in its pod (the first listed of its replicas), once the
    pod runs, and the pod's name."""
    faults = nodes.faults(kube)

    async def started() -> tuple[int, str] | None:
        pods = sorted(p["metadata"]["name"] for p in await kube.list("v1", "Pod", namespace))
        try:
            return (await faults.pid(namespace, pods[0]), pods[0]) if pods else None
        except FaultError:
            return None

    found: tuple[int, str] = await wait_until(
        started, timeout=60, interval=0.5, what=f"the operator's pod in {namespace}"
    )
    return found


async def assert_runs_in_cluster(
    nodes: LocalCluster, kube: Kube, namespace: str, command: str, service_account: str
) -> int:
    """The operator's pod runs the image's command from the image as the chart says, with the
    in-cluster configuration (the ``kubernetes`` Service, a token bound to the pod); its host pid.
    The chart runs two replicas, spread over the nodes."""
    assert nodes.control_plane is not None
    pid, pod_name = await operator_process(nodes, kube, namespace)
    assert_runs_from_the_image_as_the_chart_says(pid, command)
    env = environment(pid)
    assert env["KUBERNETES_SERVICE_HOST"] == str(nodes.control_plane.service_cidr[1])
    assert env["KUBERNETES_SERVICE_PORT"] == "443"
    claims = token_claims(pid)
    assert claims["sub"] == f"system:serviceaccount:{namespace}:{service_account}"
    assert claims["kubernetes.io"]["pod"]["name"] == pod_name, "a token bound to the pod"

    async def both_replicas() -> list[dict[str, Any]] | None:
        pods = await kube.list("v1", "Pod", namespace)
        return pods if len(pods) == 2 and all((p.get("spec") or {}).get("nodeName") for p in pods) else None

    replicas: Any = await wait_until(both_replicas, timeout=60, what=f"two replicas in {namespace}")
    hosts = {p["spec"]["nodeName"] for p in replicas}
    assert len(hosts) == 2, f"the replicas spread over two nodes, not {hosts}"
    budget = await kube.list("policy/v1", "PodDisruptionBudget", namespace)
    assert [b["spec"].get("maxUnavailable") for b in budget] == [1], budget
    return pid


async def test_typesense_chart_installs_a_namespaced_operator_that_runs_a_cluster_in_its_namespace_only(
    plane: ControlPlane,
    nodes: LocalCluster,
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

    await assert_runs_in_cluster(
        nodes, kube, "typesense-system", "typesense-operator", "ts-typesense-operator"
    )

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


async def test_two_replicas_hand_over_mid_roll_and_the_new_leader_completes_it_without_repeating_a_step(
    plane: ControlPlane, nodes: LocalCluster, helm_home: Path, kube: Kube, image_values: list[str]
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
    holder = WatchingOperator(kube, "ha").holder
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
        await cluster.aclose()
    assert handover[0] < 8, f"handover took {handover[0]:.1f} s"
    print(f"in-cluster handover after deleting the leader's pod mid-roll: {handover[0]:.1f} s")
    uninstall_chart(helm_home, plane.kubeconfig, "ha", "ha-system")


@dataclasses.dataclass(frozen=True)
class WatchingOperator:
    """The Typesense chart's operator installed as release ``release`` in ``<release>-system``, two
    replicas (the chart's defaults), watching ``<release>-watched``."""

    kube: Kube
    release: str

    @property
    def namespace(self) -> str:
        return f"{self.release}-system"

    @property
    def watched(self) -> str:
        return f"{self.release}-watched"

    async def holder(self) -> str | None:
        """Who holds the leader Lease: the pod's host name, then the process id."""
        lease_name = f"{self.release}-typesense-operator-leader"
        lease = await self.kube.get("coordination.k8s.io/v1", "Lease", lease_name, self.namespace)
        return ((lease or {}).get("spec") or {}).get("holderIdentity") or None

    async def leading(self) -> tuple[str, str]:
        """The pod of the replica that leads, and its node."""
        leading: Any = await wait_until(self.holder, timeout=60, what="an operator replica to lead")
        pod = str(leading).rsplit("_", 1)[0]
        replicas = {p["metadata"]["name"]: p for p in await self.kube.list("v1", "Pod", self.namespace)}
        return pod, replicas[pod]["spec"]["nodeName"]


def install_watching_operator(
    plane: ControlPlane, helm_home: Path, kube: Kube, image_values: list[str], release: str
) -> WatchingOperator:
    operator = WatchingOperator(kube, release)
    plane.kubectl("create", "namespace", operator.watched)
    install_chart(
        helm_home, plane.kubeconfig, release, "typesense-operator", operator.namespace,
        [*image_values, "--set", f"watchNamespaces={{{operator.watched}}}"],
    )  # fmt: skip
    return operator


async def raft_leader_beside_the_operator(
    operator: WatchingOperator, cluster: TypesenseCluster, nodes: LocalCluster
) -> tuple[str, str, dict[str, Any]]:
    """The leading operator replica's pod and node, with the raft leader on that node; the member's
    pod name, the node, and the members' pods before.

    Two steps at most, none left to chance: three nodes run one member each, and the operator's two
    replicas run on two of them. When the raft leader's node runs no replica, one election is enough,
    for either member that can win runs beside a replica. When it is the standby that runs there, the
    leading replica is stopped (SIGTERM: it releases the Lease, and its kubelet starts it again as the
    standby), and the replica beside the raft leader leads. (Moving the raft leader to the leading
    replica's node instead took an election per try, each won by either remaining member: the test
    took 134 to 216 s in runs here, and over its 300 s once in CI.)"""
    faults = nodes.faults(operator.kube)
    replica_nodes = {
        pod["spec"]["nodeName"]: pod["metadata"]["name"]
        for pod in await operator.kube.list("v1", "Pod", operator.namespace)
        if pod["spec"].get("nodeName")
    }
    before = await member_pods(cluster)
    leader = await raft_leader(cluster)
    if before[leader]["spec"]["nodeName"] not in replica_nodes:
        leader = await elect_anew(cluster, faults)
    node = before[leader]["spec"]["nodeName"]
    operator_pod, operator_node = await operator.leading()
    if operator_node != node:
        await faults.kill(operator.namespace, operator_pod, signal="TERM")
        beside = replica_nodes[node]

        async def led_from_beside() -> bool:
            return str(await operator.holder()).startswith(beside + "_")

        await wait_until(led_from_beside, timeout=60, interval=0.5, what=f"{beside} to take the Lease")
        operator_pod = beside
    assert await raft_leader(cluster) == leader, "the raft leader stayed"
    return operator_pod, node, {"member": leader, "pods": before}


async def test_the_operator_survives_a_power_cut_of_its_own_node_which_also_ran_the_raft_leader(
    plane: ControlPlane, nodes: LocalCluster, helm_home: Path, kube: Kube, image_values: list[str]
) -> None:
    """The chart's defaults (two replicas on two nodes): the node of the replica that leads, which
    also runs the Typesense leader, loses power under writes. The standby leads within the Lease's
    duration, not after Kubernetes' 300 s eviction; writes go on (raft elects by itself); the status
    names the lost node within 60 s; nothing is deleted; rebooted, the node's member is whole again."""
    operator = install_watching_operator(plane, helm_home, kube, image_values, "lost")
    cluster = TypesenseCluster(kube, operator.watched)
    writer = Writer(cluster)
    try:
        await cluster.create(replicas=3, topologySpreadConstraints=cluster.one_member_per_node)
        await cluster.wait_ready()
        await cluster.create_collection()
        operator_pod, node, moved = await raft_leader_beside_the_operator(operator, cluster, nodes)
        member = moved["member"]
        writer.start("operator-node")
        await writer.warmed_up()
        async with power_cut(nodes, node) as cut_at:

            async def taken_over() -> str | None:
                now = await operator.holder()
                return now if now is not None and not now.startswith(operator_pod + "_") else None

            await wait_until(taken_over, timeout=30, interval=0.5, what="the standby to take the Lease")
            handover = time.monotonic() - cut_at
            await writer.acknowledged_after(cut_at, timeout=30)
            await node_named_lost(cluster, member)
            named_after = time.monotonic() - cut_at
            assert await destructive_steps(kube, "lost-watched") == []
            gap = writer.longest_gap(cut_at)
            await asyncio.to_thread(nodes.reboot, node)
            back_at = time.monotonic()
        await wait_until(lambda: whole(cluster), timeout=30, interval=0.5, what="whole after the reboot")
        whole_after = time.monotonic() - back_at
        await writer.stop()
        await cluster.assert_nothing_lost(writer.acknowledged)
    finally:
        await writer.stop()
        await cluster.aclose()
    assert handover < 25, f"the standby led {handover:.1f} s after the power cut"
    print(
        f"power cut of the operator's and the raft leader's node {node}: the standby led after "
        f"{handover:.1f} s, longest write gap {gap:.1f} s, the status named the node after "
        f"{named_after:.1f} s, whole {whole_after:.1f} s after the reboot; "
        f"{len(writer.acknowledged)} acknowledged writes, 0 lost"
    )
    uninstall_chart(helm_home, plane.kubeconfig, "lost", "lost-system")


async def test_the_operators_and_the_leaders_node_lost_for_good_has_its_member_replaced_with_nothing_lost(
    plane: ControlPlane, nodes: LocalCluster, helm_home: Path, kube: Kube, image_values: list[str]
) -> None:
    """spec.nodeLoss Replace (30 s): the node that runs the leading operator replica and the raft
    leader loses power under writes and stays off. The standby leads; the status names the node within
    60 s; the member is replaced on a remaining node within the delay and 60 s more, its volume made
    anew by the provisioner (which leaves a lost node in 10 s, as a cluster's critical add-ons do);
    every acknowledged write is on all three members, and the replacement is the only destructive
    step."""
    operator = install_watching_operator(plane, helm_home, kube, image_values, "gone")
    cluster = TypesenseCluster(kube, operator.watched)
    writer = Writer(cluster)
    try:
        await cluster.create(
            replicas=3,
            topologySpreadConstraints=cluster.one_member_per_node,
            nodeLoss={"policy": "Replace", "delaySeconds": 30},
        )
        await cluster.wait_ready()
        await cluster.create_collection()
        operator_pod, node, moved = await raft_leader_beside_the_operator(operator, cluster, nodes)
        member, before = moved["member"], moved["pods"]
        writer.start("gone")
        await writer.warmed_up()
        async with power_cut(nodes, node) as cut_at:
            await writer.acknowledged_after(cut_at, timeout=30)
            await node_named_lost(cluster, member)
            lost_at = time.monotonic()
            named_after = lost_at - cut_at

            async def replaced_elsewhere() -> bool:
                moved = (await member_pods(cluster)).get(member)
                return bool(
                    moved
                    and moved["metadata"]["uid"] != before[member]["metadata"]["uid"]
                    and moved["spec"].get("nodeName") not in (None, node)
                ) and await whole(cluster)

            await wait_until(replaced_elsewhere, timeout=30 + 60, interval=1, what="three healthy members")
            whole_after = time.monotonic() - lost_at
            steps = await destructive_steps(kube, "gone-watched")
            assert [reason for reason, _ in steps] == ["MemberReplaced"], steps
            successor = await operator.holder()
            assert successor is not None
            assert not successor.startswith(operator_pod + "_"), "the standby leads"
            gap = writer.longest_gap(cut_at)
            await writer.stop()
            await cluster.assert_nothing_lost(writer.acknowledged)
    finally:
        await writer.stop()
        await cluster.aclose()
    print(
        f"power cut for good of the operator's and the raft leader's node {node} (nodeLoss Replace, 30 s): "
        f"the status named it after {named_after:.1f} s, three healthy members again {whole_after:.1f} s "
        f"after that, longest write gap {gap:.1f} s; {len(writer.acknowledged)} acknowledged writes, 0 lost"
    )
    uninstall_chart(helm_home, plane.kubeconfig, "gone", "gone-system")


# ---------------------------------------------------------------- the Monocle operator


async def test_monocle_chart_installs_a_cluster_wide_operator_that_brings_a_sample_to_ready(
    plane: ControlPlane,
    nodes: LocalCluster,
    kube: Kube,
    samples: dict[str, list[dict[str, Any]]],
    helm_home: Path,
    image_values: list[str],
) -> None:
    install_chart(helm_home, plane.kubeconfig, "mon", "monocle-operator", "monocle-system", image_values)

    await assert_runs_in_cluster(nodes, kube, "monocle-system", "monocle-operator", "mon-monocle-operator")

    # Watching every namespace, it brings the sample up in one it was never told of.
    plane.kubectl("create", "namespace", "metrics")
    (sample,) = samples["monocle_v1alpha1_monocle"]
    await kube.apply({**sample, "metadata": {**sample["metadata"], "namespace": "metrics"}})
    await ready_condition(kube, MONOCLE, "Monocle", sample["metadata"]["name"], "metrics")

    uninstall_chart(helm_home, plane.kubeconfig, "mon", "monocle-system")
    assert await kube.get("apps/v1", "Deployment", "mon-monocle-operator", "monocle-system") is None
    assert await kube.get(MONOCLE, "Monocle", sample["metadata"]["name"], "metrics") is not None


# ---------------------------------------------------------------- the Cluster Stack operator

CLUSTERSTACK = "clusterstack.x-k8s.io/v1alpha1"
CSO_RELEASE, CSO_NAMESPACE, CSO_COMMAND = "cso", "cso-system", "cluster-stack-operator"
REPOSITORY, TAG, STACKS = "kaas/cluster-stacks", "docker-inpod-1-30-v1", "stacks"


@pytest.fixture(scope="module")
def nodes_registry(
    nodes: LocalCluster, clusterstack_tools: ClusterStackTools, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningRegistry]:
    """A plain-HTTP registry where the nodes' pods reach this machine."""
    assert nodes.plan is not None
    with running_registry(
        tmp_path_factory.mktemp("registry"),
        binary=clusterstack_tools.registry,
        address=str(nodes.plan.api_address),
    ) as running:
        yield running


async def install_the_cluster_stack_chart(
    plane: ControlPlane,
    nodes: LocalCluster,
    kube: Kube,
    image_values: list[str],
    tools: ClusterStackTools,
    registry: RunningRegistry,
    helm_home: Path,
) -> int:
    """Cluster API's CRDs, then the chart's operator over the nodes' registry (:data:`REPOSITORY`),
    running in the cluster as the chart says; its host pid."""
    await install_crds(plane, [*crd_documents(tools.capi_crds), *crd_documents(tools.capd_crds)])
    settings = {
        "env": [
            {"name": "OPERATOR_SUITE_RELEASE_SOURCE", "value": "oci"},
            {"name": "OPERATOR_SUITE_OCI_REPOSITORY", "value": f"{registry.host}/{REPOSITORY}"},
            {"name": "OPERATOR_SUITE_OCI_PLAIN_HTTP", "value": "true"},
        ]
    }
    values = helm_home.with_name("cso-values.json")
    values.write_text(json.dumps(settings))  # JSON is YAML
    install_chart(
        helm_home, plane.kubeconfig, CSO_RELEASE, "cluster-stack-operator", CSO_NAMESPACE,
        [*image_values, "-f", str(values)],
    )  # fmt: skip
    return await assert_runs_in_cluster(
        nodes, kube, CSO_NAMESPACE, CSO_COMMAND, f"{CSO_RELEASE}-{CSO_COMMAND}"
    )


@contextlib.contextmanager
def with_the_operators_log(plane: ControlPlane, namespace: str) -> Iterator[None]:
    """A wait that times out says what the operator logged meanwhile."""
    try:
        yield
    except pytest.fail.Exception as failure:
        try:
            logs = plane.kubectl("logs", "-n", namespace, "--tail=40", "-l", "app.kubernetes.io/instance=cso")
        except Exception as error:  # what went wrong first is the news; the log is a courtesy
            logs = f"(no log: {error})"
        pytest.fail(f"{failure}\n--- the operator's log:\n{logs}")


async def test_cluster_stack_chart_runs_the_operator_from_the_image_and_it_reconciles_a_cluster_stack(
    plane: ControlPlane,
    nodes: LocalCluster,
    kube: Kube,
    image_values: list[str],
    clusterstack_tools: ClusterStackTools,
    nodes_registry: RunningRegistry,
    tmp_path: Path,
) -> None:
    _, published = publish_release(tmp_path / "published", TAG, helm=clusterstack_tools.helm)
    await asyncio.to_thread(push_release, nodes_registry, published, REPOSITORY)
    helm_home = tmp_path / "helm"
    pid = await install_the_cluster_stack_chart(
        plane, nodes, kube, image_values, clusterstack_tools, nodes_registry, helm_home
    )

    plane.kubectl("create", "namespace", STACKS)
    # The API server refuses, in the webhook's words, what only the webhook refuses.
    elsewhere = {
        "apiVersion": CLUSTERSTACK,
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
        await kube.delete(CLUSTERSTACK, "ClusterAddon", "probe", STACKS)
        return None

    with with_the_operators_log(plane, CSO_NAMESPACE):
        refusal: Any = await wait_until(refused_by_the_webhook, timeout=60, what="the webhook to answer")
    assert "a ClusterAddon lives beside its Cluster" in refusal
    created = await kube.create(
        {
            "apiVersion": CLUSTERSTACK,
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
        found = await kube.get(CLUSTERSTACK, "ClusterStack", "inpod", STACKS)
        status = (found or {}).get("status") or {}
        return found if status.get("observedGeneration") == generation and status.get("summary") else None

    with with_the_operators_log(plane, CSO_NAMESPACE):
        stack: Any = await wait_until(reported, timeout=60, what="the ClusterStack's status")
    assert (condition(stack, "ClusterStackReleasesSynced") or {})["status"] == "True"
    assert [entry["name"] for entry in stack["status"]["summary"]] == ["v1"]
    release = await kube.get(CLUSTERSTACK, "ClusterStackRelease", TAG, STACKS)
    assert release is not None, "the ClusterStackRelease of the listed version"
    assert {o["kind"] for o in release["metadata"]["ownerReferences"]} == {"ClusterStack"}

    # The release is downloaded from the registry into the chart's release volume, rendered by the
    # image's own helm, and applied: Ready.
    async def ready() -> dict[str, Any] | None:
        found = await kube.get(CLUSTERSTACK, "ClusterStackRelease", TAG, STACKS)
        return found if (found or {}).get("status", {}).get("ready") else None

    with with_the_operators_log(plane, CSO_NAMESPACE):
        settled: Any = await wait_until(ready, timeout=90, what="the release to be Ready")
    status = json.dumps(settled["status"], indent=1)
    for kind in ("ClusterStackReleaseDownloaded", "HelmChartApplied", "Ready"):
        assert (condition(settled, kind) or {})["status"] == "True", status
    assert settled["status"]["kubernetesVersion"] == "v1.30.10", "read from the downloaded metadata"
    assert await kube.get("cluster.x-k8s.io/v1beta2", "ClusterClass", TAG, STACKS) is not None, (
        "the cluster-class chart's ClusterClass, rendered by the image's helm"
    )
    assert environment(pid)["OPERATOR_SUITE_RELEASE_DIR"] == "/var/cache/cluster-stack-operator/releases"

    uninstall_chart(helm_home, plane.kubeconfig, CSO_RELEASE, CSO_NAMESPACE)

    async def operator_gone() -> bool:
        return not await kube.list("v1", "Pod", CSO_NAMESPACE)

    await wait_until(operator_gone, timeout=60, interval=0.5, what="the operator's pod to go")
    assert await kube.get(CLUSTERSTACK, "ClusterStack", "inpod", STACKS) is not None, "the stacks stay"


RESUMED = "resume"
"""The stack of the upgrade that the operator's pods are killed in."""
UPGRADE_JOB = "Job kube-system/stage-two-upgrade-job"
UPGRADE_HOOKS = ("stage-two-upgraded-", "stage-two-upgrade-job")
"""The names of stage two's pre-upgrade hooks: a ConfigMap of the version, then the Job."""


def in_cluster_kubeconfig_secret(cluster_name: str, namespace: str, plane: ControlPlane) -> dict[str, Any]:
    """The workload cluster's kubeconfig Secret (:func:`kubeconfig_secret`), naming the API server where
    a pod reaches it: the ``kubernetes`` Service's address (which its certificate names)."""
    secret = kubeconfig_secret(cluster_name, namespace, plane)
    config = yaml.safe_load(plane.kubeconfig.read_text())
    config["clusters"][0]["cluster"]["server"] = f"https://{plane.service_cidr[1]}:443"
    secret["data"]["value"] = base64.b64encode(yaml.safe_dump(config).encode()).decode()
    return secret


async def test_cluster_stack_operators_killed_mid_staged_upgrade_and_mid_hook_finish_it_running_no_hook_twice(
    plane: ControlPlane,
    nodes: LocalCluster,
    kube: Kube,
    image_values: list[str],
    clusterstack_tools: ClusterStackTools,
    nodes_registry: RunningRegistry,
    tmp_path: Path,
) -> None:
    """Upstream's most asked issue (#272): an addon upgrade interrupted by an operator restart leaves the
    Cluster stuck. Here both of the chart's operator pods are killed (SIGKILL of their containers, as a
    power cut) while a staged upgrade is in its second stage, waiting for that stage's pre-upgrade Job
    on a real node, after the stage's first pre-upgrade hook ran. The new pods carry the upgrade on
    from the ClusterAddon's status: the running Job is waited for, not made again; the hook done
    before the kill and the stage done before it are not run again."""
    namespace = f"stacks-{RESUMED}"
    tags = [f"docker-{RESUMED}-1-30-v{n}" for n in (1, 2)]
    for number, tag in enumerate(tags, 1):
        _, published = publish_release(
            tmp_path / "published",
            tag,
            helm=clusterstack_tools.helm,
            staged=True,
            addon_version=f"v{number}",
            stage_values={"stage-two": {"upgradeJobCommand": "sleep 30"}},
        )
        await asyncio.to_thread(push_release, nodes_registry, published, REPOSITORY)
    helm_home = tmp_path / "helm"
    await install_the_cluster_stack_chart(
        plane, nodes, kube, image_values, clusterstack_tools, nodes_registry, helm_home
    )
    plane.kubectl("create", "namespace", namespace)
    spec = {"provider": "docker", "name": RESUMED, "kubernetesVersion": "1.30", "versions": ["v1", "v2"]}
    await kube.create(
        {
            "apiVersion": CLUSTERSTACK,
            "kind": "ClusterStack",
            "metadata": {"name": RESUMED, "namespace": namespace},
            "spec": {**spec, "autoSubscribe": False, "noProvider": True},
        }
    )
    with with_the_operators_log(plane, CSO_NAMESPACE):
        for tag in tags:
            await ready_release(kube, namespace, tag, timeout=90)

    # The workload cluster is the nodes' own: its hook Jobs run on the real kubelets. Stage two's
    # pre-condition holds from the start.
    go_ahead = {"name": "go-ahead", "namespace": "kube-system"}
    await kube.create(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": go_ahead, "data": {"ready": "yes"}}
    )
    await kube.create(capi_cluster(RESUMED, namespace, tags[0], endpoint_port=6443))
    await kube.create(in_cluster_kubeconfig_secret(RESUMED, namespace, plane))

    async def addon_where(check: Any) -> dict[str, Any] | None:
        found = await kube.get(CLUSTERSTACK, "ClusterAddon", f"cluster-addon-{RESUMED}", namespace)
        return found if found is not None and check(found) else None

    def done(version: str, hook: str) -> Any:
        def check(addon: dict[str, Any]) -> bool:
            status = addon.get("status") or {}
            return (
                addon["spec"].get("version") == version
                and status.get("hook") == hook
                and stages_of(addon) == [("stage-one", "done"), ("stage-two", "done")]
                and bool(status.get("ready"))
            )

        return check

    def waiting_for_the_job(addon: dict[str, Any]) -> bool:
        stages = (addon.get("status") or {}).get("stages") or []
        hooks = (stages[1].get("helmHooks") or {}) if len(stages) == 2 else {}
        # spec.version names the addons applied, v1 until the upgrade is over; hookRelease, v2's.
        hook_release = (addon.get("status") or {}).get("hookRelease")
        return hook_release == tags[1] and hooks.get("running") == UPGRADE_JOB

    with with_the_operators_log(plane, CSO_NAMESPACE):
        await wait_until(
            lambda: addon_where(done("v1", "AfterControlPlaneInitialized")), timeout=120, what="v1's stages"
        )
        mark = len(hook_writes(plane, names=UPGRADE_HOOKS))
        await kube.patch("cluster.x-k8s.io/v1beta2", "Cluster", RESUMED, namespace,
                         {"spec": {"topology": {"classRef": {"name": tags[1]}}}})  # fmt: skip
        mid: Any = await wait_until(
            lambda: addon_where(waiting_for_the_job), timeout=120, what="stage two's pre-upgrade Job to run"
        )
    stage_two = mid["status"]["stages"][1]["helmHooks"]
    assert stage_two["completed"] == ["ConfigMap kube-system/stage-two-upgraded-v2"], stage_two
    job = await kube.get_live("batch/v1", "Job", "stage-two-upgrade-job", "kube-system")
    assert job is not None
    assert not (job.get("status") or {}).get("succeeded"), "killed while the Job runs"

    operators = [p["metadata"]["name"] for p in await kube.list("v1", "Pod", CSO_NAMESPACE)]
    await nodes.faults(kube).crash_pods(CSO_NAMESPACE, operators)
    killed = time.monotonic()

    with with_the_operators_log(plane, CSO_NAMESPACE):
        upgraded: Any = await wait_until(
            lambda: addon_where(done("v2", "BeforeClusterUpgrade")), timeout=180, what="the upgrade finished"
        )
    print(f"staged upgrade finished {time.monotonic() - killed:.1f} s after both operator pods were killed")
    hooks = upgraded["status"]["stages"][1]["helmHooks"]
    assert (hooks["version"], hooks["event"]) == ("v2", "done"), hooks
    # Every hook of the upgrade made once: the running Job waited for across the kill, not made again,
    # then deleted by its hook-succeeded policy once the stage's hooks ran.
    writes = hook_writes(plane, names=UPGRADE_HOOKS)[mark:]
    assert writes == [
        ("create", "stage-two-upgraded-v2"),
        ("create", "stage-two-upgrade-job"),
        ("delete", "stage-two-upgrade-job"),
    ], writes
    # The stage done before the kill was not applied again.
    said = [e for e in await kube.list("v1", "Event", namespace) if e.get("reason") == "StageDone"]
    stage_one = [e for e in said if "(stage-one) of BeforeClusterUpgrade" in e.get("message", "")]
    assert sum(e.get("count") or 1 for e in stage_one) == 1, stage_one
    stage_one_v2 = await kube.get_live("v1", "ConfigMap", "stage-one-v2", "kube-system")
    assert stage_one_v2 is not None

    await kube.delete("cluster.x-k8s.io/v1beta2", "Cluster", RESUMED, namespace)

    async def addon_gone() -> bool:
        return await addon_where(lambda _: True) is None

    await wait_until(addon_gone, timeout=60, what="the ClusterAddon to go with its Cluster")
    for name in ("go-ahead", "stage-one", "stage-two", "stage-two-installed", "stage-two-upgraded-v2"):
        await kube.delete("v1", "ConfigMap", name, "kube-system")
    uninstall_chart(helm_home, plane.kubeconfig, CSO_RELEASE, CSO_NAMESPACE)
