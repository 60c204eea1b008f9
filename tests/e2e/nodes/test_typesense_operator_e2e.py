"""The Typesense operator builds a real raft cluster: the older seed sample, unchanged, becomes three
typesense-server pods on real nodes with one leader, and the operator reports QuorumReady."""

from __future__ import annotations

import base64
from typing import Any, cast

import httpx

from operator_core.kube import Kube
from operator_testkit.fixtures import wait_until
from operator_testkit.operators import OperatorProcess

API = "ts.opentelekomcloud.com/v1alpha1"


async def test_seed_sample_becomes_a_ready_raft_cluster(
    kube: Kube,
    namespace: str,
    samples: dict[str, list[dict[str, Any]]],
    typesense_operator: OperatorProcess,
) -> None:
    for document in samples["ts_v1alpha1_typesensecluster_aws"]:
        await kube.apply({**document, "metadata": {**document["metadata"], "namespace": namespace}})

    async def ready() -> dict[str, Any] | None:
        cluster = await kube.get(API, "TypesenseCluster", "cluster-1", namespace)
        for condition in ((cluster or {}).get("status") or {}).get("conditions") or []:
            if condition["type"] == "Ready" and condition["status"] == "True":
                return cluster
        return None

    cluster: Any = await wait_until(ready, timeout=180, interval=1, what="Ready=True")
    (condition,) = [c for c in cluster["status"]["conditions"] if c["type"] == "Ready"]
    assert condition["reason"] == "QuorumReady"
    assert cluster["status"]["quorum"]["state"] == "OK"
    assert cluster["status"]["phase"] == "QuorumReady"
    # A ready node is something to guard: the disruption budget stands from the first one on.
    await wait_until(
        lambda: kube.get("policy/v1", "PodDisruptionBudget", "cluster-1-pdb", namespace),
        timeout=10,
        what="the PodDisruptionBudget of a cluster with ready nodes",
    )

    secret = await kube.get("v1", "Secret", "cluster-1-admin-key", namespace)
    assert secret is not None
    headers = {"X-TYPESENSE-API-KEY": base64.b64decode(secret["data"]["typesense-api-key"]).decode()}
    pods = await kube.list("v1", "Pod", namespace, labels={"app.kubernetes.io/instance": "cluster-1"})
    ips = sorted(p["status"]["podIP"] for p in pods)
    assert len(ips) == 3

    async with httpx.AsyncClient(trust_env=False, timeout=5) as http:
        # Ready means a leader and a healthy majority; the third member may still be catching up.
        async def every_member_in_raft() -> list[str] | None:
            states = [
                (await http.get(f"http://{ip}:8108/status", headers=headers)).json()["state"] for ip in ips
            ]
            return states if sorted(states) == ["FOLLOWER", "FOLLOWER", "LEADER"] else None

        states = cast(
            list[str], await wait_until(every_member_in_raft, timeout=60, interval=1, what="3 raft members")
        )
        leader = ips[states.index("LEADER")]
        schema = {"name": "books", "fields": [{"name": "title", "type": "string"}]}
        created = await http.post(f"http://{leader}:8108/collections", headers=headers, json=schema)
        assert created.status_code == 201, created.text
        document = {"id": "1", "title": "Written through the operator's cluster"}
        written = await http.post(
            f"http://{leader}:8108/collections/books/documents", headers=headers, json=document
        )
        assert written.status_code == 201, written.text

        async def everywhere() -> bool:
            for ip in ips:
                answer = await http.get(f"http://{ip}:8108/collections/books/documents/1", headers=headers)
                if answer.status_code != 200:
                    return False
            return True

        await wait_until(everywhere, timeout=30, interval=1, what="the document on every node")
