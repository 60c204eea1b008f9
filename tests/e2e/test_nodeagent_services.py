"""Around the pods: ``kubectl logs`` through the kubelet endpoint, ClusterIP Services, real nginx."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
from test_nodeagent_pods import deployment, is_ready, pods_of

from operator_core.kube import Kube
from operator_testkit.fixtures import Kubectl, wait_until
from operator_testkit.nodeagent.harness import AgentProcess


async def ready_pods(kube: Kube, namespace: str, app: str, count: int) -> list[dict[str, Any]]:
    async def ready() -> list[dict[str, Any]] | None:
        pods = [p for p in await pods_of(kube, namespace, app) if not p["metadata"].get("deletionTimestamp")]
        return pods if len(pods) == count and all(is_ready(p) for p in pods) else None

    pods: Any = await wait_until(ready, timeout=60, what=f"{count} Ready {app} pods")
    return list(pods)


async def test_kubectl_logs_shows_a_pods_output(
    kube: Kube, namespace: str, node_agent: AgentProcess, kubectl: Kubectl
) -> None:
    await kube.create(deployment("talker", namespace))
    (pod,) = await ready_pods(kube, namespace, "talker", 1)
    name = pod["metadata"]["name"]

    logs = await asyncio.to_thread(kubectl, "logs", "-n", namespace, name)
    assert "STAND-IN for image example.org/some/web:1.2" in logs.stdout
    assert "--listen :8080" in logs.stdout

    last = await asyncio.to_thread(kubectl, "logs", "-n", namespace, name, "--tail=1")
    assert last.stdout.count("\n") == 1
    assert last.stdout.strip() == logs.stdout.strip().splitlines()[-1]

    # --follow streams until kubectl is stopped; its timeout ends it here, after the first lines.
    follow = await asyncio.to_thread(
        kubectl, "logs", "-n", namespace, name, "--follow", "--request-timeout=3s", check=False
    )
    assert "STAND-IN" in follow.stdout

    missing = await asyncio.to_thread(kubectl, "logs", "-n", namespace, name, "--previous", check=False)
    assert missing.returncode != 0  # no earlier run: as on a cluster, an error rather than empty output


def service(name: str, namespace: str, port: int, target: int | str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"selector": {"app": name}, "ports": [{"port": port, "targetPort": target}]},
    }


async def test_cluster_ip_service_forwards_to_ready_pods(
    kube: Kube, namespace: str, node_agent: AgentProcess
) -> None:
    await kube.create(deployment("backend", namespace, replicas=2))
    created = await kube.create(service("backend", namespace, 80, "http"))  # a named targetPort
    cluster_ip = created["spec"]["clusterIP"]
    assert cluster_ip.startswith("127.")
    pods = await ready_pods(kube, namespace, "backend", 2)

    async with httpx.AsyncClient(trust_env=False, timeout=2) as http:

        async def answers() -> bool:
            try:
                answer = await http.get(f"http://{cluster_ip}:80/through-the-service")
            except httpx.HTTPError:
                return False
            return answer.status_code == 200 and "STAND-IN" in answer.text

        await wait_until(answers, timeout=30, what="the ClusterIP to answer")
        for _ in range(4):  # round robin over both pods, every time through the proxy
            assert (await http.get(f"http://{cluster_ip}:80/")).status_code == 200

    # The pods' hosts files name the Service at its ClusterIP, in every form cluster DNS answers.
    hosts = node_agent.state_dir / "pods" / pods[0]["metadata"]["uid"] / "hosts"

    def service_names() -> list[str]:
        lines = [entry for entry in hosts.read_text().splitlines() if entry.startswith(cluster_ip + "\t")]
        return lines[0].split("\t")[1].split() if lines else []

    names: Any = await wait_until(service_names, timeout=10, what="the Service in the pod's hosts file")
    assert names == [
        f"backend.{namespace}.svc.cluster.local",
        f"backend.{namespace}.svc",
        f"backend.{namespace}",
        "backend",
    ]


NGINX_CONF = """
events {}
http {
    server {
        listen 80;
        listen [::]:80;
        server_name shop.example.org;
        location / {
            valid_referers server_names example.com;
            if ($invalid_referer) {
                return 403;
            }
            proxy_pass http://shop-backend;  # the Service's short name, from the pod's hosts file
        }
    }
}
"""


async def test_nginx_runs_for_real_with_the_pods_configuration(
    kube: Kube, namespace: str, node_agent: AgentProcess, kubectl: Kubectl
) -> None:
    await kube.create(deployment("shop-backend", namespace, replicas=1))
    await kube.create(service("shop-backend", namespace, 80, 8080))
    await ready_pods(kube, namespace, "shop-backend", 1)
    labels = {"app": "shop"}
    await kube.create(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "shop-nginx", "namespace": namespace},
            "data": {"nginx.conf": NGINX_CONF},
        }
    )
    await kube.create(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "shop", "namespace": namespace},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "containers": [
                            {
                                "name": "nginx",
                                "image": "nginx:1.27",
                                "ports": [{"containerPort": 80}],
                                "readinessProbe": {"tcpSocket": {"port": 80}, "periodSeconds": 1},
                                "volumeMounts": [
                                    {
                                        "name": "config",
                                        "mountPath": "/etc/nginx/nginx.conf",
                                        "subPath": "nginx.conf",
                                    }
                                ],
                            }
                        ],
                        "volumes": [{"name": "config", "configMap": {"name": "shop-nginx"}}],
                    },
                },
            },
        }
    )
    (pod,) = await ready_pods(kube, namespace, "shop", 1)
    assert "nodeagent.operator-suite.io/stand-in" not in (pod["metadata"].get("annotations") or {})
    ip = pod["status"]["podIP"]

    async with httpx.AsyncClient(trust_env=False, timeout=5) as http:
        refused = await http.get(f"http://{ip}/")
        assert refused.status_code == 403
        assert refused.headers["server"].startswith("nginx")

        async def proxied() -> httpx.Response | None:
            # The Service's endpoints reach the service proxy a moment after the backend is Ready.
            answer = await http.get(f"http://{ip}/books", headers={"Referer": "https://example.com/page"})
            return answer if answer.status_code == 200 else None

        passed: Any = await wait_until(proxied, timeout=15, what="nginx to proxy to the backend Service")
        assert "STAND-IN for example.org/some/web:1.2" in passed.text

    logs = await asyncio.to_thread(kubectl, "logs", "-n", namespace, pod["metadata"]["name"])
    assert '"GET /books HTTP/1.1" 200' in logs.stdout  # nginx's access log, on the container's stdout
