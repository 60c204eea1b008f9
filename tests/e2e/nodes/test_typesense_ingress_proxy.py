"""The operator's nginx proxy, Debian's nginx in a pod on a real node, checks the Referer before Typesense."""

from __future__ import annotations

from typing import Any

import httpx

from operator_core.kube import Kube
from operator_testkit.drivers.typesense import TypesenseCluster
from operator_testkit.fixtures import wait_until
from operator_testkit.operators import OperatorProcess


async def test_only_the_allowed_referer_gets_through(
    kube: Kube, namespace: str, typesense_operator: OperatorProcess
) -> None:
    cluster = TypesenseCluster(kube, namespace)
    ingress = {"host": "search.example.com", "ingressClassName": "nginx", "referer": "docs.example.com"}
    await cluster.create(replicas=3, ingress=ingress)
    await cluster.wait_ready()

    ip: Any = await wait_until(cluster.proxy_ip, timeout=90, interval=1, what="a ready nginx proxy pod")
    async with httpx.AsyncClient(trust_env=False, timeout=5) as http:

        async def allowed() -> bool:
            answer = await http.get(
                f"http://{ip}/health", headers={"Referer": "http://docs.example.com/page"}
            )
            return answer.status_code == 200 and answer.json().get("ok") is True

        await wait_until(
            allowed, timeout=60, interval=1, what="a request with the allowed referer to reach Typesense"
        )
        without = await http.get(f"http://{ip}/health")
        other = await http.get(f"http://{ip}/health", headers={"Referer": "http://evil.example.net/"})
    assert without.status_code == 403
    assert other.status_code == 403
    await cluster.aclose()
