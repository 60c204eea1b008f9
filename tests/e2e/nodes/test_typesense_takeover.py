"""A cluster made by the Go typesense-operator 0.4.1 handed over to ours under writes: objects shaped
exactly as the Go operator makes them (operator_testkit.drivers.go_typesense, from its source), real
Typesense nodes on real nodes (the Go operator's exporter and health-check sidecars, which are not to
be had here, as labelled stand-ins: ``go_sidecars_image``), then our operator started. Nothing
acknowledged is lost, no more than one node is restarted at a time (the leader last), and the longest
write gap is reported. (With the real Go binary, when one is given: bench/takeover.py --go-operator.)"""

from __future__ import annotations

import asyncio
import base64
import secrets
import time
from typing import Any

import pytest

from operator_core.kube import Kube
from operator_testkit.drivers.go_typesense import (
    EXPORTER_IMAGE,
    HEALTHCHECK_IMAGE,
    handed_over,
    play_go_operator,
)
from operator_testkit.drivers.typesense import (
    TypesenseCluster,
    Writer,
    assert_each_node_once_and_the_leader_last,
    restarts_in_order,
)
from operator_testkit.fixtures import wait_until
from operator_testkit.nodes.cluster import LocalCluster
from operator_testkit.nodes.images import go_sidecars_image
from operator_testkit.operators import OperatorProcess


@pytest.mark.timeout(600)
async def test_a_cluster_the_go_operator_made_is_handed_over_without_losing_a_write(
    kube: Kube, namespace: str, real_cluster: LocalCluster, typesense_operator: OperatorProcess
) -> None:
    real_cluster.load([go_sidecars_image((EXPORTER_IMAGE, HEALTHCHECK_IMAGE))])
    cluster = TypesenseCluster(kube, namespace)
    typesense_operator.stop()  # the Go operator ran this cluster; ours comes later
    try:
        await cluster.create(replicas=3, storage={"size": "100Mi", "storageClassName": "standard"})
        key = base64.b64encode(secrets.token_bytes(256)).decode()
        await play_go_operator(kube, await cluster.get(), key)
        cluster.headers = {"X-TYPESENSE-API-KEY": key}

        async def one_leader() -> bool:
            return list((await cluster.states()).values()).count("LEADER") == 1

        await wait_until(one_leader, timeout=120, interval=1, what="the Go-made cluster's leader")
        await cluster.create_collection()
        writer = Writer(cluster)
        writer.start("handover")
        await writer.warmed_up()
        pods_before = {p["metadata"]["name"]: p["metadata"]["uid"] for p in await _pods(cluster)}
        claims_before = await _claims(cluster)
    finally:
        typesense_operator.start()
    started = time.monotonic()
    try:
        await wait_until(lambda: handed_over(cluster), timeout=420, interval=1, what="the hand-over")
        took = time.monotonic() - started
        await writer.acknowledged_after(time.monotonic())
    finally:
        await writer.stop()
    gap = writer.longest_gap(started)
    print(
        f"hand-over: {took:.1f} s, longest write gap {gap:.1f} s, "
        f"{len(writer.acknowledged)} writes acknowledged"
    )

    (took_over,) = await cluster.events("TookOver")
    assert "selector app=cluster-1-sts" in took_over["message"]
    restarts = await restarts_in_order(cluster)
    assert_each_node_once_and_the_leader_last(restarts)
    pods_after = {p["metadata"]["name"]: p["metadata"]["uid"] for p in await _pods(cluster)}
    assert set(pods_after) == set(pods_before)
    assert not set(pods_after.values()) & set(pods_before.values()), "every Go pod replaced by the roll"
    assert await _claims(cluster) == claims_before, "the same claims, the same volumes"
    secret = await kube.get("v1", "Secret", f"{cluster.name}-admin-key", namespace)
    assert secret is not None
    assert secret["data"]["typesense-api-key"] == base64.b64encode(key.encode()).decode(), "the key is kept"
    await asyncio.sleep(3)  # followers apply what was committed last
    try:
        await cluster.assert_nothing_lost(writer.acknowledged)
    finally:
        await cluster.aclose()


async def _pods(cluster: TypesenseCluster) -> list[dict[str, Any]]:
    return [
        p
        for p in await cluster.kube.list(
            "v1", "Pod", cluster.namespace, labels={"app.kubernetes.io/instance": cluster.name}
        )
        if p["metadata"]["name"].startswith(f"{cluster.name}-sts-")
    ]


async def _claims(cluster: TypesenseCluster) -> dict[str, str]:
    claims = await cluster.kube.list("v1", "PersistentVolumeClaim", cluster.namespace)
    return {c["metadata"]["name"]: c["spec"].get("volumeName", "") for c in claims}
