"""Hand-over of a Typesense cluster from the Go typesense-operator 0.4.1 to ours, under writes.

Without ``--go-operator``: the cluster's objects are made exactly as the Go operator makes them
(operator_testkit.drivers.go_typesense, from its source; its module is not served here, so its
binary cannot be built), with the real typesense-server 0.24.1 in pods on three real nodes (its
exporter and health-check sidecars, not to be had here, as labelled stand-ins). With
``--go-operator PATH`` (its manager binary, and its CRDs in ``--go-crds DIR``): the Go operator
itself makes the cluster, then is stopped; our CRD replaces its CRD (server-side apply, forced),
and ours is started. Out of cluster, the Go operator probes the nodes through the API server's pod
proxy, which reaches the pods as in any cluster. The result says which way the cluster was made.

Measured: seconds from our operator's start to the cluster taken over (our StatefulSet runs every
node at its revision, Ready), the longest gap between acknowledged writes, failed writes, the
restarts in order (one at a time, the leader last), and acknowledged writes lost on any node.

Usage: python bench/takeover.py [--go-operator PATH [--go-crds DIR]] [--out bench/results/takeover.json]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import secrets
import time
from pathlib import Path
from typing import Any

from operator_testkit.drivers.go_typesense import (
    EXPORTER_IMAGE,
    HEALTHCHECK_IMAGE,
    go_operator_process,
    handed_over,
    play_go_operator,
)
from operator_testkit.drivers.typesense import TypesenseCluster, Writer, restarts_in_order, typesense_rig
from operator_testkit.fixtures import wait_until
from operator_testkit.nodes.images import go_sidecars_image

ROOT = Path(__file__).resolve().parent.parent


async def _made_by_the_go_operator(rig: Any, cluster: TypesenseCluster, binary: Path, crds: Path) -> str:
    """The Go operator makes the cluster; returns its admin key once a leader is elected."""
    plane = rig.plane
    await asyncio.to_thread(plane.kubectl, "apply", "--server-side", "--force-conflicts", "-f", str(crds))
    home = plane.directory / "go-operator"
    home.mkdir(parents=True, exist_ok=True)
    go = go_operator_process(plane, binary, home)
    go.start()
    try:
        await cluster.create(replicas=3, storage={"size": "100Mi", "storageClassName": "standard"})

        async def key() -> str | None:
            secret = await cluster.kube.get("v1", "Secret", f"{cluster.name}-admin-key", cluster.namespace)
            return base64.b64decode(secret["data"]["typesense-api-key"]).decode() if secret else None

        found = str(await wait_until(key, timeout=120, interval=1, what="the Go operator's admin key"))
        cluster.headers = {"X-TYPESENSE-API-KEY": found}
        await _one_leader(cluster)
    finally:
        go.stop()
    # Our CRD over theirs: same group, kind and version; ours keeps status.quorum and the rest.
    await asyncio.to_thread(
        plane.kubectl, "apply", "--server-side", "--force-conflicts", "-f", str(ROOT / "deploy" / "crds")
    )
    return found


async def _one_leader(cluster: TypesenseCluster) -> None:
    async def one() -> bool:
        return list((await cluster.states()).values()).count("LEADER") == 1

    await wait_until(one, timeout=180, interval=1, what="one leader in the Go-made cluster")


async def _missing_once_caught_up(cluster: TypesenseCluster, acknowledged: list[str]) -> dict[str, int]:
    """Acknowledged writes each node lacks, asked again for up to 90 s: the last node restarted may
    still be loading (it answers 503) or catching up when the hand-over ends."""
    deadline = time.monotonic() + 90
    while True:
        missing = await cluster.missing_on_every_node(acknowledged)
        lost = {pod: len(ids) for pod, ids in missing.items() if ids}
        if not lost or time.monotonic() > deadline:
            return lost
        await asyncio.sleep(2)


async def run(go_operator: Path | None, go_crds: Path | None) -> dict[str, Any]:
    sidecars = [go_sidecars_image((EXPORTER_IMAGE, HEALTHCHECK_IMAGE))]
    async with typesense_rig(ROOT, "takeover", images=sidecars) as rig:
        rig.operator.stop()  # the Go operator ran this cluster; ours comes later
        cluster = TypesenseCluster(rig.kube, "takeover")
        try:
            if go_operator is not None:
                await _made_by_the_go_operator(rig, cluster, go_operator, go_crds or go_operator.parent)
                made_by = f"the Go operator's binary {go_operator}"
            else:
                await cluster.create(replicas=3, storage={"size": "100Mi", "storageClassName": "standard"})
                key = base64.b64encode(secrets.token_bytes(256)).decode()
                await play_go_operator(rig.kube, await cluster.get(), key)
                cluster.headers = {"X-TYPESENSE-API-KEY": key}
                await _one_leader(cluster)
                made_by = "objects shaped as the Go operator 0.4.1 makes them (drivers/go_typesense.py)"
            await cluster.create_collection()
            writer = Writer(cluster)
            writer.start("takeover")
            await writer.warmed_up()
            rig.operator.start()
            started = time.monotonic()
            try:
                await wait_until(
                    lambda: handed_over(cluster), timeout=600, interval=0.5, what="the hand-over"
                )
                took = time.monotonic() - started
                await writer.acknowledged_after(time.monotonic())
            finally:
                await writer.stop()
            lost = await _missing_once_caught_up(cluster, writer.acknowledged)
            return {
                "benchmark": "takeover",
                "cluster": "3 nodes, typesense-server 0.24.1",
                "made_by": made_by,
                "seconds_to_taken_over": round(took, 1),
                "longest_write_gap_seconds": round(writer.longest_gap(started), 2),
                "failed_writes": writer.failed(started),
                "acknowledged_writes": len(writer.acknowledged),
                "acknowledged_lost_by_node": lost,
                "restarts_in_order": await restarts_in_order(cluster),
                "timeline": await cluster.timeline(time.time() - (time.monotonic() - started)),
            }
        finally:
            await cluster.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--go-operator", type=Path, help="the Go manager binary of typesense-operator 0.4.1")
    parser.add_argument("--go-crds", type=Path, help="its CRDs (default: beside the binary)")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "takeover.json")
    arguments = parser.parse_args()
    go_operator = arguments.go_operator.resolve() if arguments.go_operator else None
    go_crds = arguments.go_crds.resolve() if arguments.go_crds else None
    result = asyncio.run(run(go_operator, go_crds))
    arguments.out.parent.mkdir(parents=True, exist_ok=True)
    arguments.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "timeline"}, indent=2))


if __name__ == "__main__":
    main()
