"""Quorum paths that real Typesense servers cannot show here, tested at the HTTP boundary.

- OUT_OF_DISK on /health: QuorumNeedsIntervention, one Warning Event, and no
  quorum surgery. typesense-server 0.24.1 (the only server these machines can
  run) never puts ``resource_error`` in its /health answer: with
  ``--disk-used-max-percentage`` exceeded it refuses writes with 422 and keeps
  answering ``{"ok": true}`` (see docs/typesense-quorum.md).
- The operator cut off from nodes that are fine: their kubelets still see them
  Ready, so no member is fenced and nothing is downgraded until the views agree.
  Cutting one process off from another on a shared loopback needs a network
  namespace per node; stopping the answers while the pods stay Ready is the same
  observation for the operator.

The operator runs for real, as its own ServiceAccount, and probes three small
HTTP servers on loopback addresses that answer /status and /health as Typesense
does. The pods' status (IP, Ready) is written here, as a kubelet would.
"""

from __future__ import annotations

import json
import random
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web

from operator_core.kube import Kube
from operator_testkit.assertions import (
    events_for,
    operator_requests,
    wait_for_condition,
    wait_for_events,
    writes_since,
)
from operator_testkit.controlplane import ControlPlane
from operator_testkit.fixtures import wait_until

pytestmark = pytest.mark.usefixtures("typesense_operator")

API = "ts.opentelekomcloud.com/v1alpha1"
API_PORT = 8108
OPERATOR_USER = "system:serviceaccount:typesense-system:typesense-operator"

LOOKS_TO_WATCH = 2
"""How many more quorum decisions a test watches to prove that nothing more happens (no second
Warning, no surgery). Neither out-of-disk nor a hold has a timer in the decision: each look at the
same answers repeats the same plan, so looks, not seconds, are what count. The operator looks at an
unhealthy 3-node cluster every 5 s (``requeue_seconds(3, unhealthy=True)``): two looks take about 10 s."""


class FakeNode:
    """One node's /status and /health answers, changeable while it serves."""

    def __init__(self, ip: str, state: str) -> None:
        self.ip = ip
        self.status: dict[str, Any] = {"committed_index": 7, "queued_writes": 0, "state": state}
        self.health: tuple[int, dict[str, Any]] = (200, {"ok": True})
        self.looks = 0
        """/status requests answered: the operator probes every node once per quorum decision."""
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/status", self._status)
        app.router.add_get("/health", self._health)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, self.ip, API_PORT).start()

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _status(self, _: web.Request) -> web.Response:
        self.looks += 1
        return web.Response(text=json.dumps(self.status), content_type="application/json")

    async def _health(self, _: web.Request) -> web.Response:
        code, body = self.health
        return web.Response(status=code, text=json.dumps(body), content_type="application/json")


@pytest.fixture
async def nodes() -> AsyncIterator[list[FakeNode]]:
    base = f"127.61.{random.randrange(1, 250)}"  # noqa: S311 - an address, not a secret
    fakes = [FakeNode(f"{base}.{i + 1}", "LEADER" if i == 0 else "FOLLOWER") for i in range(3)]
    for fake in fakes:
        await fake.start()
    try:
        yield fakes
    finally:
        for fake in fakes:
            await fake.stop()


async def kubelet_reports(kube: Kube, namespace: str, pod: str, fake: FakeNode, *, ready: bool) -> None:
    status = {
        "phase": "Running",
        "podIP": fake.ip,
        "podIPs": [{"ip": fake.ip}],
        "conditions": [{"type": "Ready", "status": str(ready)}],
    }
    await kube.patch_status("v1", "Pod", pod, namespace, status)


async def running_cluster(kube: Kube, namespace: str, name: str, nodes: list[FakeNode]) -> dict[str, str]:
    """A 3-node cluster whose pods are the fake nodes, once it is Ready; its pods' UIDs by name."""
    await kube.apply(
        {
            "apiVersion": API,
            "kind": "TypesenseCluster",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"image": "typesense/typesense:27.1", "replicas": 3},
        }
    )

    async def pods() -> list[dict[str, Any]] | None:
        found = await kube.list("v1", "Pod", namespace, labels={"app.kubernetes.io/instance": name})
        return found if len(found) == 3 else None

    created = await wait_until(pods, timeout=60, interval=0.5, what="the StatefulSet's three pods")
    assert isinstance(created, list)
    for ordinal, fake in enumerate(nodes):
        await kubelet_reports(kube, namespace, f"{name}-sts-{ordinal}", fake, ready=True)
    await wait_for_condition(kube, API, "TypesenseCluster", name, namespace, "Ready", "True", timeout=60)
    return {pod["metadata"]["name"]: pod["metadata"]["uid"] for pod in created}


async def watch_the_operator_look_again(
    control_plane: ControlPlane, namespace: str, answering: FakeNode
) -> list[dict[str, Any]]:
    """Until the operator has probed ``answering`` LOOKS_TO_WATCH more times; its writes to pods and
    ConfigMaps (the nodes list) meanwhile, from the audit log: surgery is made of those."""
    since = len(operator_requests(control_plane, OPERATOR_USER, namespace))
    seen = answering.looks
    await wait_until(
        lambda: answering.looks >= seen + LOOKS_TO_WATCH,
        timeout=15 * LOOKS_TO_WATCH,
        what=f"{LOOKS_TO_WATCH} more quorum decisions (probes of {answering.ip})",
    )
    writes = writes_since(control_plane, OPERATOR_USER, namespace, since)
    return [e for e in writes if e["objectRef"].get("resource") in ("pods", "configmaps")]


async def assert_no_surgery(kube: Kube, namespace: str, name: str, uids: dict[str, str]) -> None:
    """No downgrade, no fencing, the same pods, and every node still in the nodes list."""
    assert not await events_for(kube, namespace, "QuorumDowngraded")
    assert not await events_for(kube, namespace, "QuorumMemberFenced")
    found = await kube.list("v1", "Pod", namespace, labels={"app.kubernetes.io/instance": name})
    assert {pod["metadata"]["name"]: pod["metadata"]["uid"] for pod in found} == uids
    nodes_list = await kube.get("v1", "ConfigMap", f"{name}-nodeslist", namespace)
    assert nodes_list is not None
    assert len(nodes_list["data"]["nodes"].split(",")) == 3


async def test_out_of_disk_needs_a_person_and_gets_no_surgery(
    kube: Kube, namespace: str, nodes: list[FakeNode], control_plane: ControlPlane
) -> None:
    uids = await running_cluster(kube, namespace, "full", nodes)

    nodes[2].health = (503, {"ok": False, "resource_error": "OUT_OF_DISK"})
    ready = await wait_for_condition(
        kube,
        API,
        "TypesenseCluster",
        "full",
        namespace,
        "Ready",
        "False",
        "QuorumNeedsIntervention",
        timeout=60,
    )
    assert "node 2: OUT_OF_DISK" in ready["message"]

    # Several looks later: still one Warning, no downgrade, no pod touched, the list intact.
    await wait_for_events(kube, namespace, "QuorumNeedsIntervention")
    assert await watch_the_operator_look_again(control_plane, namespace, nodes[2]) == []
    (warning,) = await events_for(kube, namespace, "QuorumNeedsIntervention")
    assert warning["type"] == "Warning"
    assert "OUT_OF_DISK" in warning["message"]
    await assert_no_surgery(kube, namespace, "full", uids)

    nodes[2].health = (200, {"ok": True})
    await wait_for_condition(kube, API, "TypesenseCluster", "full", namespace, "Ready", "True", timeout=60)


async def test_an_operator_cut_off_from_ready_nodes_holds_its_surgery_until_the_kubelets_agree(
    kube: Kube, namespace: str, nodes: list[FakeNode], control_plane: ControlPlane
) -> None:
    uids = await running_cluster(kube, namespace, "cutoff", nodes)

    # The leader and one follower stop answering the operator; their kubelets still see them Ready.
    await nodes[0].stop()
    await nodes[2].stop()
    (held,) = await wait_for_events(kube, namespace, "QuorumSurgeryHeld", timeout=90)
    assert held["type"] == "Warning"
    assert "node(s) 0, 2 pass their kubelet's readiness probe" in held["message"]
    # The Event comes first, the status at the end of the same reconcile.
    await wait_for_condition(
        kube,
        API,
        "TypesenseCluster",
        "cutoff",
        namespace,
        "Ready",
        "False",
        "QuorumNotReady",
        message="no surgery until the two views agree",
        timeout=10,
    )
    assert await watch_the_operator_look_again(control_plane, namespace, nodes[1]) == []
    await assert_no_surgery(kube, namespace, "cutoff", uids)
    assert len(await events_for(kube, namespace, "QuorumSurgeryHeld")) == 1

    # The kubelets agree now: the two are down. The survivor is kept and the two are fenced.
    for ordinal in (0, 2):
        await kubelet_reports(kube, namespace, f"cutoff-sts-{ordinal}", nodes[ordinal], ready=False)
    fenced = await wait_for_events(kube, namespace, "QuorumMemberFenced", 2, timeout=60)
    assert len(fenced) == 2
    for ordinal in (0, 2):
        assert any(f"deleted pod cutoff-sts-{ordinal}:" in event["message"] for event in fenced), fenced
    (downgrade,) = await events_for(kube, namespace, "QuorumDowngraded")
    assert "keeping node 1" in downgrade["message"]
