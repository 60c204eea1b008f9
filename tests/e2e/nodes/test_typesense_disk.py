"""A Typesense node's disk on real nodes: filled under a steady writer, and grown before it fills
(spec.storage.autoGrow). The volumes are the size-limited class's tmpfs (a full one answers ENOSPC),
which the test kit's resizer grows in place when a claim asks for more."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from operator_core.kube import Kube
from operator_testkit.assertions import wait_for_condition
from operator_testkit.drivers.typesense import API, TypesenseCluster, Writer
from operator_testkit.fixtures import wait_until
from operator_testkit.nodes.faults import NodeFaults
from operator_testkit.nodes.storage import SIZE_LIMITED_CLASS
from operator_testkit.operators import OperatorProcess

pytestmark = pytest.mark.usefixtures("typesense_operator")


async def _cluster(kube: Kube, namespace: str, storage: dict[str, Any]) -> TypesenseCluster:
    cluster = TypesenseCluster(kube, namespace)
    await cluster.create(replicas=3, storage={"storageClassName": SIZE_LIMITED_CLASS, **storage})
    await cluster.wait_ready(timeout=240)
    await cluster.create_collection()
    return cluster


@pytest.fixture
async def small_disks(kube: Kube, namespace: str) -> AsyncIterator[TypesenseCluster]:
    """128Mi volumes that autoGrow may not grow: its maximum is their size."""
    auto_grow = {"enabled": True, "thresholdPercent": 90, "maxSize": "128Mi"}
    cluster = await _cluster(kube, namespace, {"size": "128Mi", "autoGrow": auto_grow})
    try:
        yield cluster
    finally:
        await cluster.aclose()


@pytest.mark.timeout(420)
async def test_a_full_disk_on_the_leader_stops_writes_for_less_than_20_seconds(
    small_disks: TypesenseCluster, faults: NodeFaults, namespace: str, typesense_operator: OperatorProcess
) -> None:
    cluster = small_disks
    writer = Writer(cluster)
    writer.start("full")
    await writer.warmed_up()
    leader = next(pod for pod, state in (await cluster.states()).items() if state == "LEADER")
    filled_at = time.monotonic()
    await faults.fill_volume(namespace, f"data-{leader}")
    await writer.acknowledged_after(filled_at, timeout=30)
    await asyncio.sleep(15)  # the writer goes on
    gap = writer.longest_gap(filled_at)
    story = writer.story(filled_at)
    print(f"leader's disk full: longest write gap {gap:.1f} s; {story}")
    # autoGrow at its maximum says so (the condition, and a Warning when it turns False).
    limit = await wait_for_condition(
        cluster.kube, API, "TypesenseCluster", cluster.name, namespace, "StorageReady", "False",
        "AutoGrowLimitReached", timeout=60,
    )  # fmt: skip
    assert "autoGrow.maxSize (128Mi) already" in limit["message"], limit["message"]
    await faults.free_volume(namespace, f"data-{leader}")
    await cluster.wait_ready(timeout=180)
    await writer.stop()
    assert gap < 20, story
    warnings = await cluster.events("StorageAutoGrowLimitReached")
    assert warnings, "a Warning Event says the maximum is reached"
    assert {w["type"] for w in warnings} == {"Warning"}
    await cluster.assert_nothing_lost(writer.acknowledged)
    assert "Traceback" not in typesense_operator.log()


@pytest.mark.timeout(420)
async def test_auto_grow_grows_every_claim_before_a_filling_disk_fails_a_write(
    kube: Kube, namespace: str, typesense_operator: OperatorProcess
) -> None:
    auto_grow = {"enabled": True, "thresholdPercent": 50, "step": "64Mi", "maxSize": "256Mi"}
    cluster = await _cluster(kube, namespace, {"size": "64Mi", "autoGrow": auto_grow})
    sts_before = await kube.get_live("apps/v1", "StatefulSet", f"{cluster.name}-sts", namespace)
    assert sts_before is not None
    pods_before = {
        p["metadata"]["name"]: p["metadata"]["uid"]
        for p in await kube.list("v1", "Pod", namespace, labels={"app.kubernetes.io/instance": cluster.name})
    }
    writer = Writer(cluster, padding=50_000)  # the volumes fill in about a minute and a half
    writer.start("grow")
    started = time.monotonic()
    try:
        (grown,) = await wait_until(  # type: ignore[misc]
            lambda: cluster.events("StorageAutoGrown"),
            timeout=180,
            interval=1,
            what="a StorageAutoGrown Event",
        )
        print(f"grown after {time.monotonic() - started:.1f} s: {grown['message']}")

        async def every_claim_grown() -> bool:
            for index in range(3):
                claim = await kube.get_live(
                    "v1", "PersistentVolumeClaim", f"data-{cluster.name}-sts-{index}", namespace
                )
                if ((claim or {}).get("status") or {}).get("capacity", {}).get("storage") != "128Mi":
                    return False
            return True

        await wait_until(every_claim_grown, timeout=60, interval=1, what="every claim at 128Mi")

        async def template_grown() -> bool:
            sts = await kube.get_live("apps/v1", "StatefulSet", f"{cluster.name}-sts", namespace)
            templates = ((sts or {}).get("spec") or {}).get("volumeClaimTemplates") or [{}]
            return (
                templates[0].get("spec", {}).get("resources", {}).get("requests", {}).get("storage")
                == "128Mi"
            )

        await wait_until(template_grown, timeout=60, interval=1, what="the StatefulSet made again at 128Mi")
    finally:
        await writer.stop()
    story = writer.story(started)
    assert writer.failed(started) == 0, f"a write failed before the disks grew: {story}"
    obj = await cluster.get()
    assert obj["status"]["storage"]["autoGrownTo"] == "128Mi"
    assert "from 64Mi to 128Mi" in grown["message"], grown["message"]
    pods_after = {
        p["metadata"]["name"]: p["metadata"]["uid"]
        for p in await kube.list("v1", "Pod", namespace, labels={"app.kubernetes.io/instance": cluster.name})
    }
    assert pods_after == pods_before, "growing the volumes replaces no pod"
    await cluster.assert_nothing_lost(writer.acknowledged)
    await cluster.aclose()
