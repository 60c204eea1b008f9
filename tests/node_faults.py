"""What the node-fault tests share (issue 66): a cluster's members, its raft leader moved where a test
wants it, whether it is whole, and a node powered again whatever the test did. (One member per node is
the test kit's ``TypesenseCluster.one_member_per_node``, which the chaos soak uses too.)"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

from operator_core.kube import Kube
from operator_testkit.drivers.typesense import TypesenseCluster
from operator_testkit.fixtures import wait_until
from operator_testkit.nodes.cluster import LocalCluster
from operator_testkit.nodes.faults import NodeFaults

LOST_NODE_STATES = ("Unreachable", "NotReady")
DESTRUCTIVE = ("QuorumMemberFenced", "QuorumSurvivorRestarted", "ErroredNodeRestarted", "MemberReplaced")


async def member_pods(cluster: TypesenseCluster) -> dict[str, dict[str, Any]]:
    """The cluster's member pods by name."""
    pods = await cluster.kube.list(
        "v1",
        "Pod",
        cluster.namespace,
        labels={"app.kubernetes.io/instance": cluster.name, "app.kubernetes.io/component": "node"},
    )
    return {pod["metadata"]["name"]: pod for pod in pods}


async def pods_ready(cluster: TypesenseCluster) -> bool:
    """Every member's pod has its Ready condition True (its kubelet's readiness probe passed)."""
    pods = await member_pods(cluster)
    return bool(pods) and all(
        any(
            c["type"] == "Ready" and c["status"] == "True"
            for c in (p.get("status") or {}).get("conditions") or []
        )
        for p in pods.values()
    )


async def elect_anew(cluster: TypesenseCluster, faults: NodeFaults) -> str:
    """One raft election, and the member that won it: the leader's container is killed (SIGKILL), the
    other two elect one of themselves, and the killed member is back as a follower with the cluster
    whole before this returns. (typesense-server 0.24.1's ``POST /operations/vote`` to a follower did
    not move the leadership here in 60 s, so which of the two wins is raft's choice.)

    Whole first, and whole again at the end: a member back as a follower may still be catching up, and
    a second kill of it soon after is a crash-loop back-off its kubelet holds it in (seen on a loaded
    machine: the fault a test then made took a majority, and the operator rightly downgraded the
    cluster)."""
    await wait_until(lambda: whole(cluster), timeout=120, interval=1, what="the cluster whole")
    leader = await raft_leader(cluster)
    await faults.kill(cluster.namespace, leader, "typesense")
    await wait_until(
        lambda: _follows_again(cluster, leader),
        timeout=90,
        interval=1,
        what=f"a new leader, and {leader} back as a follower",
    )
    await wait_until(lambda: whole(cluster), timeout=120, interval=1, what="the cluster whole")
    return await raft_leader(cluster)


async def _follows_again(cluster: TypesenseCluster, killed: str) -> bool:
    states = await cluster.states()
    whole = sorted(states.values()) == ["FOLLOWER", "FOLLOWER", "LEADER"]
    return whole and states.get(killed) != "LEADER"


async def raft_leader(cluster: TypesenseCluster) -> str:
    async def found() -> str | None:
        return next((pod for pod, state in (await cluster.states()).items() if state == "LEADER"), None)

    leader: str = await wait_until(found, timeout=60, what="a raft leader")
    return leader


async def node_views(cluster: TypesenseCluster) -> list[dict[str, Any]]:
    return list(((await cluster.get()).get("status") or {}).get("nodes") or [])


async def whole(cluster: TypesenseCluster, members: int = 3) -> bool:
    """Ready, and every member answering, healthy and on a Ready node, as the status says."""
    obj = await cluster.get()
    ready = next((c for c in obj.get("status", {}).get("conditions", []) if c["type"] == "Ready"), {})
    views = (obj.get("status") or {}).get("nodes") or []
    return (
        ready.get("status") == "True"
        and len(views) == members
        and all(v.get("answering") and v.get("healthy") and v.get("k8sNodeState") == "Ready" for v in views)
    )


async def events(kube: Kube, namespace: str, reasons: tuple[str, ...]) -> list[dict[str, Any]]:
    return [e for e in await kube.list("v1", "Event", namespace) if e.get("reason") in reasons]


async def destructive_steps(kube: Kube, namespace: str) -> list[tuple[str, str]]:
    """(reason, message) of the namespace's Events of a destructive step: a failed assertion says why
    each was taken."""
    return [(e["reason"], e.get("message") or "") for e in await events(kube, namespace, DESTRUCTIVE)]


@contextlib.asynccontextmanager
async def power_cut(nodes: LocalCluster, node: str) -> AsyncIterator[float]:
    """``node``'s power cut, giving the moment of the cut (:func:`time.monotonic`); whatever the test
    does meanwhile, the node is rebooted at the end if it still is cut."""
    cut_at = time.monotonic()
    try:
        await asyncio.to_thread(nodes.power_cut, node)
        yield cut_at
    finally:
        await asyncio.to_thread(nodes.reboot_if_cut, node)


async def node_named_lost(cluster: TypesenseCluster, member: str) -> None:
    """Until the status says the node of ``member`` (a pod) is lost: Unreachable or NotReady."""

    async def lost() -> bool:
        views = {v["pod"]: v for v in await node_views(cluster)}
        return views.get(member, {}).get("k8sNodeState") in LOST_NODE_STATES

    await wait_until(lost, timeout=60, interval=1, what=f"the status to name {member}'s node lost")
