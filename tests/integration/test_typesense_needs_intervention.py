"""OUT_OF_DISK on /health: QuorumNeedsIntervention, one Warning Event, and no quorum surgery.

typesense-server 0.24.1 (the only server these machines can run) never puts
``resource_error`` in its /health answer: with ``--disk-used-max-percentage``
exceeded it refuses writes with 422 and keeps answering ``{"ok": true}`` (see
docs/typesense-quorum.md). So this path is tested at the HTTP boundary: the
operator runs for real, as its own ServiceAccount, and probes three small HTTP
servers on loopback addresses that answer /status and /health as newer Typesense
releases do. The pods' status (their IPs) is written here, as a kubelet would.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web

from operator_core.kube import Kube
from operator_core.testing.assertions import events_for, wait_for_condition
from operator_core.testing.fixtures import wait_until

pytestmark = pytest.mark.usefixtures("typesense_operator")

API = "ts.opentelekomcloud.com/v1alpha1"
API_PORT = 8108


class FakeNode:
    """One node's /status and /health answers, changeable while it serves."""

    def __init__(self, ip: str, state: str) -> None:
        self.ip = ip
        self.status: dict[str, Any] = {"committed_index": 7, "queued_writes": 0, "state": state}
        self.health: tuple[int, dict[str, Any]] = (200, {"ok": True})
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

    async def _status(self, _: web.Request) -> web.Response:
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


async def test_out_of_disk_needs_a_person_and_gets_no_surgery(
    kube: Kube, namespace: str, nodes: list[FakeNode]
) -> None:
    await kube.apply(
        {
            "apiVersion": API,
            "kind": "TypesenseCluster",
            "metadata": {"name": "full", "namespace": namespace},
            "spec": {"image": "typesense/typesense:27.1", "replicas": 3},
        }
    )

    async def pods() -> list[dict[str, Any]] | None:
        found = await kube.list("v1", "Pod", namespace, labels={"app.kubernetes.io/instance": "full"})
        return found if len(found) == 3 else None

    created = await wait_until(pods, timeout=60, interval=0.5, what="the StatefulSet's three pods")
    assert isinstance(created, list)
    uids = {pod["metadata"]["name"]: pod["metadata"]["uid"] for pod in created}
    for ordinal, fake in enumerate(nodes):
        status = {"phase": "Running", "podIP": fake.ip, "podIPs": [{"ip": fake.ip}]}
        await kube.patch_status("v1", "Pod", f"full-sts-{ordinal}", namespace, status)

    await wait_for_condition(kube, API, "TypesenseCluster", "full", namespace, "Ready", "True", timeout=60)

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

    # Several reconciles later: still one Warning, no downgrade, no pod touched, the list intact.
    async def several_reconciles_later() -> bool:
        return len(await events_for(kube, namespace, "QuorumNeedsIntervention")) >= 1

    await wait_until(several_reconciles_later, timeout=30, interval=0.5, what="the Warning Event")
    await asyncio.sleep(15)
    (warning,) = await events_for(kube, namespace, "QuorumNeedsIntervention")
    assert warning["type"] == "Warning"
    assert "OUT_OF_DISK" in warning["message"]
    assert not await events_for(kube, namespace, "QuorumDowngraded")
    assert not await events_for(kube, namespace, "QuorumMemberFenced")
    still = await kube.list("v1", "Pod", namespace, labels={"app.kubernetes.io/instance": "full"})
    assert {pod["metadata"]["name"]: pod["metadata"]["uid"] for pod in still} == uids
    nodes_list = await kube.get("v1", "ConfigMap", "full-nodeslist", namespace)
    assert nodes_list is not None
    assert len(nodes_list["data"]["nodes"].split(",")) == 3

    nodes[2].health = (200, {"ok": True})
    await wait_for_condition(kube, API, "TypesenseCluster", "full", namespace, "Ready", "True", timeout=60)
