"""A Typesense cluster through faults of a whole Kubernetes node, on real nodes, under a steady writer
with every acknowledged write read back from every node (issue 66): a power cut of the leader's node
(the node goes NotReady as Kubernetes decides), its reboot, a node lost for good and replaced
(``spec.nodeLoss``), and drains.

Each test leaves every node powered, Ready and uncordoned: the session's nodes serve the worker's next
tests. The node faults are the test kit's (:mod:`operator_testkit.nodes.power`): a power cut SIGKILLs a
node's kubelet, containerd, shims and containers at once; a reboot starts its daemons again.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest

from node_faults import (
    LOST_NODE_STATES,
    destructive_steps,
    events,
    member_pods,
    node_named_lost,
    node_views,
    pods_ready,
    power_cut,
    raft_leader,
    whole,
)
from operator_core.kube import Kube
from operator_testkit.drivers.typesense import TypesenseCluster, Writer
from operator_testkit.fixtures import wait_until
from operator_testkit.nodes.cluster import LocalCluster
from operator_testkit.operators import OperatorProcess

pytestmark = pytest.mark.e2e

DRAIN_GAP_BOUND_SECONDS = 6.0


@pytest.fixture
async def writing(
    kube: Kube, namespace: str, typesense_operator: OperatorProcess
) -> AsyncIterator[tuple[TypesenseCluster, Writer]]:
    """A Ready 3-member cluster, one member per node, and a writer at about 5 writes a second."""
    cluster = TypesenseCluster(kube, namespace)
    await cluster.create(replicas=3, topologySpreadConstraints=cluster.one_member_per_node)
    await cluster.wait_ready()
    await cluster.create_collection()
    # Every member's pod Ready as its kubelet says, before any node is cut: a pod its kubelet never
    # called Ready, on a node cut within the node controller's grace, is one the operator cannot tell
    # from a hung process (seen once in CI: cut 2 s after the cluster was Ready, its pod deleted).
    await wait_until(lambda: pods_ready(cluster), timeout=60, what="every member's pod Ready")
    writer = Writer(cluster)
    writer.start("node-fault")
    try:
        await writer.warmed_up()
        yield cluster, writer
    finally:
        await writer.stop()
        await cluster.aclose()


async def test_a_power_cut_of_the_leaders_node_loses_no_write_names_the_node_and_deletes_nothing(
    writing: tuple[TypesenseCluster, Writer], real_cluster: LocalCluster, kube: Kube, namespace: str
) -> None:
    """spec.nodeLoss left out (Wait): raft elects a new leader by itself, the status names the lost
    node within 60 s, nothing is deleted; rebooted, the node's member is whole again within 30 s."""
    cluster, writer = writing
    leader = await raft_leader(cluster)
    before = await member_pods(cluster)
    node = before[leader]["spec"]["nodeName"]
    async with power_cut(real_cluster, node) as cut_at:
        await writer.acknowledged_after(cut_at, timeout=30)

        async def named() -> str | None:
            views = {v["pod"]: v for v in await node_views(cluster)}
            obj = await cluster.get()
            ready = next((c for c in obj["status"]["conditions"] if c["type"] == "Ready"), {})
            lost = views.get(leader, {}).get("k8sNodeState") in LOST_NODE_STATES
            return (
                ready.get("message") if lost and f"its node {node} is" in ready.get("message", "") else None
            )

        said = await wait_until(
            named, timeout=60, interval=1, what=f"the status to name the lost node {node}"
        )
        named_after = time.monotonic() - cut_at
        assert "spec.nodeLoss.policy is Wait: nothing is replaced" in said, said
        assert "leader elected" in said, said
        await asyncio.sleep(10)  # more looks of the operator: still nothing destructive
        assert await destructive_steps(kube, namespace) == []
        after = await member_pods(cluster)
        assert {p: o["metadata"]["uid"] for p, o in after.items()} == {
            p: o["metadata"]["uid"] for p, o in before.items()
        }, "no member's pod deleted"
        gap = writer.longest_gap(cut_at)
        await asyncio.to_thread(real_cluster.reboot, node)
        back_at = time.monotonic()
    await wait_until(
        lambda: whole(cluster), timeout=30, interval=0.5, what="the cluster whole after the reboot"
    )
    whole_after = time.monotonic() - back_at
    await writer.stop()
    await cluster.assert_nothing_lost(writer.acknowledged)
    print(
        f"power cut of the leader's node {node}: longest write gap {gap:.1f} s, the status named it after "
        f"{named_after:.1f} s; rebooted, whole {whole_after:.1f} s after its node was Ready; "
        f"{len(writer.acknowledged)} acknowledged writes, 0 lost"
    )


async def test_a_node_lost_for_good_has_its_member_replaced_on_another_node_with_nothing_lost(
    writing: tuple[TypesenseCluster, Writer],
    real_cluster: LocalCluster,
    kube: Kube,
    namespace: str,
) -> None:
    """spec.nodeLoss Replace with a 30 s delay: the leader's node loses power and does not come back.
    The member is replaced on a remaining node within the delay plus 60 s of the node going
    NotReady, recorded first and said in an Event, and every acknowledged write is on all three
    members again. The lost node may be the one that runs the volume provisioner (the replacement needs
    a new volume): the provisioner is made on another node 10 s after its node is lost, as Kubernetes'
    critical add-ons are set, well within the delay."""
    cluster, writer = writing
    await cluster.create(
        replicas=3,
        topologySpreadConstraints=cluster.one_member_per_node,
        nodeLoss={"policy": "Replace", "delaySeconds": 30},
    )
    leader = await raft_leader(cluster)
    before = await member_pods(cluster)
    node = before[leader]["spec"]["nodeName"]
    async with power_cut(real_cluster, node) as cut_at:
        await writer.acknowledged_after(cut_at, timeout=30)
        await node_named_lost(cluster, leader)
        lost_at = time.monotonic()
        (replaced,) = await wait_until(
            lambda: events(kube, namespace, ("MemberReplaced",)), timeout=90, what="the member replaced"
        )
        assert f"its node {node} is Unreachable" in replaced["message"], replaced["message"]

        async def replaced_elsewhere() -> bool:
            pods = await member_pods(cluster)
            moved = pods.get(leader)
            return bool(
                moved
                and moved["metadata"]["uid"] != before[leader]["metadata"]["uid"]
                and moved["spec"].get("nodeName") not in (None, node)
            ) and await whole(cluster)

        await wait_until(replaced_elsewhere, timeout=30 + 60, interval=1, what="three healthy members")
        whole_after = time.monotonic() - lost_at
        status = (await cluster.get())["status"]["nodeLoss"]
        assert status["lastReplaced"]["member"] == int(leader.rsplit("-", 1)[1])
        assert status["lastReplaced"]["node"] == node
        assert not status.get("replacing")
        steps = await destructive_steps(kube, namespace)
        assert [reason for reason, _ in steps] == ["MemberReplaced"], steps
        gap = writer.longest_gap(cut_at)
        await writer.stop()
        await cluster.assert_nothing_lost(writer.acknowledged)
    print(
        f"node {node} lost for good: longest write gap {gap:.1f} s; three healthy members again "
        f"{whole_after:.1f} s after the status named it lost (delay 30 s); "
        f"{len(writer.acknowledged)} acknowledged writes, 0 lost"
    )


async def test_a_drained_leaders_node_keeps_writes_going_and_a_second_drain_waits_for_the_budget(
    writing: tuple[TypesenseCluster, Writer], real_cluster: LocalCluster
) -> None:
    """``kubectl drain`` of the leader's node: the longest write gap stays short; a second drain,
    of another member's node while the first member cannot come back (its volume is on the cordoned
    node), is held by the PodDisruptionBudget; uncordoned, the cluster is whole again."""
    cluster, writer = writing
    leader = await raft_leader(cluster)
    pods = await member_pods(cluster)
    first = pods[leader]["spec"]["nodeName"]
    second = next(p["spec"]["nodeName"] for name, p in pods.items() if name != leader)
    drained_at = time.monotonic()
    try:
        drained = await asyncio.to_thread(real_cluster.drain, first, 60.0)
        assert drained["drained"], drained
        await writer.acknowledged_after(drained_at, timeout=30)
        held = await asyncio.to_thread(real_cluster.drain, second, 20.0)
        assert not held["drained"], "the second drain is held while a member is away"
        assert "disruption budget" in (held.get("output") or "").lower(), held
        gap = writer.longest_gap(drained_at)
        # 0.87 s on an idle machine; 4.4 s beside an image build on the same two cores (a new leader
        # answered 503 "Not Ready or Lagging" while it caught up). The bound is the loaded machine's.
        assert gap <= DRAIN_GAP_BOUND_SECONDS, f"longest write gap {gap:.1f} s; {writer.story(drained_at)}"
    finally:
        for node in (second, first):
            await asyncio.to_thread(real_cluster.uncordon, node)
    uncordoned_at = time.monotonic()
    await wait_until(lambda: whole(cluster), timeout=90, interval=0.5, what="the cluster whole again")
    whole_after = time.monotonic() - uncordoned_at
    await writer.stop()
    await cluster.assert_nothing_lost(writer.acknowledged)
    print(
        f"drain of the leader's node {first}: longest write gap {gap:.2f} s; the second drain held; "
        f"whole {whole_after:.1f} s after uncordon; {len(writer.acknowledged)} acknowledged writes, 0 lost"
    )
