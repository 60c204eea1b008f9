"""Three real typesense-server pods of a StatefulSet, run by the node agent, form one raft cluster."""

from __future__ import annotations

import asyncio
import ipaddress
from typing import Any

import httpx

from operator_core.kube import Kube
from operator_testkit.fixtures import Kubectl, wait_until
from operator_testkit.nodeagent.harness import AgentProcess

API_KEY = "e2e-typesense-admin-key"
NAME, SERVICE = "ts", "ts-svc"
REPLICAS = 3


def typesense_objects(namespace: str) -> list[dict[str, Any]]:
    labels = {"app": NAME}
    nodes = ",".join(f"{NAME}-{i}.{SERVICE}:8107:8108" for i in range(REPLICAS))
    return [
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "ts-key", "namespace": namespace},
            "stringData": {"api-key": API_KEY},
        },
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "ts-nodes", "namespace": namespace},
            "data": {"nodes": nodes},
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": SERVICE, "namespace": namespace},
            "spec": {
                "clusterIP": "None",
                "publishNotReadyAddresses": True,
                "selector": labels,
                "ports": [{"name": "http", "port": 8108}, {"name": "peering", "port": 8107}],
            },
        },
        {
            "apiVersion": "apps/v1",
            "kind": "StatefulSet",
            "metadata": {"name": NAME, "namespace": namespace},
            "spec": {
                "serviceName": SERVICE,
                "replicas": REPLICAS,
                "podManagementPolicy": "Parallel",
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "terminationGracePeriodSeconds": 10,
                        "containers": [
                            {
                                "name": "typesense",
                                "image": "typesense/typesense:0.24.1",
                                "ports": [{"containerPort": 8108, "name": "http"}, {"containerPort": 8107}],
                                "env": [
                                    {
                                        "name": "TYPESENSE_API_KEY",
                                        "valueFrom": {"secretKeyRef": {"name": "ts-key", "key": "api-key"}},
                                    },
                                    {"name": "TYPESENSE_DATA_DIR", "value": "/usr/share/typesense/data"},
                                    {
                                        "name": "TYPESENSE_NODES",
                                        "value": "/usr/share/typesense/nodelist/nodes",
                                    },
                                    {"name": "TYPESENSE_API_PORT", "value": "8108"},
                                    {"name": "TYPESENSE_PEERING_PORT", "value": "8107"},
                                ],
                                "volumeMounts": [
                                    {"name": "data", "mountPath": "/usr/share/typesense/data"},
                                    {"name": "nodelist", "mountPath": "/usr/share/typesense/nodelist"},
                                ],
                            }
                        ],
                        "volumes": [{"name": "nodelist", "configMap": {"name": "ts-nodes"}}],
                    },
                },
                "volumeClaimTemplates": [
                    {
                        "metadata": {"name": "data"},
                        "spec": {
                            "accessModes": ["ReadWriteOnce"],
                            "resources": {"requests": {"storage": "1Gi"}},
                        },
                    }
                ],
            },
        },
    ]


async def test_statefulset_of_real_typesense_forms_one_raft_cluster(
    kube: Kube, namespace: str, kubectl: Kubectl, node_agent: AgentProcess
) -> None:
    for manifest in typesense_objects(namespace):
        await kube.create(manifest)
    headers = {"X-TYPESENSE-API-KEY": API_KEY}

    async def running_ips() -> list[str] | None:
        pods = await kube.list("v1", "Pod", namespace, labels={"app": NAME})
        ips = [(p.get("status") or {}).get("podIP") for p in pods if p["status"].get("phase") == "Running"]
        return [ip for ip in ips if ip] if len(ips) == REPLICAS and all(ips) else None

    ips: Any = await wait_until(running_ips, timeout=120, what="three running Typesense pods")
    assert all(ipaddress.ip_address(ip) in ipaddress.ip_network("127.50.0.0/16") for ip in ips)
    claims = await kube.list("v1", "PersistentVolumeClaim", namespace)
    assert sorted(c["status"]["phase"] for c in claims) == ["Bound"] * REPLICAS

    async with httpx.AsyncClient(trust_env=False, timeout=5) as http:

        async def states() -> dict[str, str]:
            found = {}
            for ip in ips:
                try:
                    answer = await http.get(f"http://{ip}:8108/status", headers=headers)
                    found[ip] = answer.json().get("state", "?")
                except (httpx.HTTPError, ValueError):
                    found[ip] = "unreachable"
            return found

        async def one_leader() -> dict[str, str] | None:
            found = await states()
            leaders = [ip for ip, state in found.items() if state == "LEADER"]
            followers = [ip for ip, state in found.items() if state == "FOLLOWER"]
            return found if len(leaders) == 1 and len(followers) == REPLICAS - 1 else None

        cluster: Any = await wait_until(
            one_leader, timeout=120, interval=2, what="one LEADER and two FOLLOWERs"
        )
        leader = next(ip for ip, state in cluster.items() if state == "LEADER")

        async def leader_healthy() -> bool:
            # A fresh leader answers "Not Ready or Lagging" to writes until it has caught up.
            answer = await http.get(f"http://{leader}:8108/health")
            return answer.status_code == 200 and answer.json().get("ok") is True

        await wait_until(leader_healthy, timeout=60, interval=1, what="the leader to be healthy")

        schema = {"name": "books", "fields": [{"name": "title", "type": "string"}]}
        created = await http.post(f"http://{leader}:8108/collections", headers=headers, json=schema)
        assert created.status_code == 201, created.text
        document = {"id": "1", "title": "The raft in the loopback"}
        written = await http.post(
            f"http://{leader}:8108/collections/books/documents", headers=headers, json=document
        )
        assert written.status_code == 201, written.text

        async def readable_everywhere() -> bool:
            for ip in ips:
                answer = await http.get(f"http://{ip}:8108/collections/books/documents/1", headers=headers)
                if answer.status_code != 200 or answer.json().get("title") != document["title"]:
                    return False
            return True

        await wait_until(readable_everywhere, timeout=60, interval=1, what="the document on every node")

    # Peers started together resolve one another from their first start, as with cluster DNS (an
    # unresolvable peer costs typesense-server a 30 s retry).
    for ordinal in range(REPLICAS):
        logs = await asyncio.to_thread(kubectl, "logs", "-n", namespace, f"{NAME}-{ordinal}")
        assert "Unable to resolve host" not in logs.stdout
