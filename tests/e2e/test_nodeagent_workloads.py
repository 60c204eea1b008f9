"""Scheduling, configuration and rollouts work end to end with the node agent as the kubelet."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from test_nodeagent_pods import deployment, is_ready, pods_of

from operator_core.kube import Kube
from operator_testkit.fixtures import wait_until
from operator_testkit.nodeagent.agent import AgentSettings
from operator_testkit.nodeagent.harness import AgentProcess, processes_under

ZONE = "topology.kubernetes.io/zone"
UNSCHEDULED_SECONDS = 6 * AgentSettings.poll_seconds
"""How long an unschedulable pod is watched to prove that no agent runs it: every agent looks for pods
bound to its nodes every ``poll_seconds`` (0.5 s) and starts one at once, so six polls would have shown
a pod that had been bound or run after all."""


async def live_pods(kube: Kube, namespace: str, app: str) -> list[dict[str, Any]]:
    return [p for p in await pods_of(kube, namespace, app) if not p["metadata"].get("deletionTimestamp")]


async def ready_pods(kube: Kube, namespace: str, app: str, count: int) -> list[dict[str, Any]]:
    async def ready() -> list[dict[str, Any]] | None:
        pods = await live_pods(kube, namespace, app)
        return pods if len(pods) == count and all(is_ready(p) for p in pods) else None

    pods: Any = await wait_until(ready, timeout=90, what=f"{count} Ready {app} pods")
    return sorted(pods, key=lambda p: p["metadata"]["name"])


def on_agent_nodes(agent: AgentProcess) -> dict[str, Any]:
    """Node affinity to the session agent's nodes (another agent's stopped node must not count)."""
    term = {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": agent.nodes}]}
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}


def environment_of(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(entry.decode().split("=", 1) for entry in raw if b"=" in entry)


def the_process(agent: AgentProcess, pod: dict[str, Any]) -> int:
    (pid,) = processes_under(agent.state_dir / "pods" / pod["metadata"]["uid"])
    return pid


async def test_pod_with_unsatisfiable_node_selector_stays_pending(
    kube: Kube, namespace: str, node_agent: AgentProcess
) -> None:
    manifest = deployment("nowhere", namespace)
    manifest["spec"]["template"]["spec"]["nodeSelector"] = {"disktype": "no-node-has-this"}
    await kube.create(manifest)

    async def unschedulable() -> dict[str, Any] | None:
        pods = await live_pods(kube, namespace, "nowhere")
        conditions = (pods[0].get("status") or {}).get("conditions") or [] if pods else []
        scheduled = [c for c in conditions if c["type"] == "PodScheduled"]
        return pods[0] if scheduled and scheduled[0].get("reason") == "Unschedulable" else None

    pod: Any = await wait_until(unschedulable, timeout=30, what="the scheduler to find no node")
    await asyncio.sleep(UNSCHEDULED_SECONDS)  # and it stays so: no agent runs it
    live = await kube.get("v1", "Pod", pod["metadata"]["name"], namespace)
    assert live is not None
    assert live["status"]["phase"] == "Pending"
    assert not live["spec"].get("nodeName")
    assert not list(node_agent.state_dir.glob(f"pods/{live['metadata']['uid']}"))


async def test_topology_spread_puts_three_replicas_in_three_zones(
    kube: Kube, namespace: str, node_agent: AgentProcess
) -> None:
    labels = {"app": "spread"}
    template = deployment("spread", namespace)["spec"]["template"]
    template["spec"]["affinity"] = on_agent_nodes(node_agent)
    template["spec"]["topologySpreadConstraints"] = [
        {
            "maxSkew": 1,
            "topologyKey": ZONE,
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": labels},
        }
    ]
    await kube.create(
        {
            "apiVersion": "apps/v1",
            "kind": "StatefulSet",
            "metadata": {"name": "spread", "namespace": namespace},
            "spec": {
                "serviceName": "spread",
                "replicas": 3,
                "podManagementPolicy": "Parallel",
                "selector": {"matchLabels": labels},
                "template": template,
            },
        }
    )
    pods = await ready_pods(kube, namespace, "spread", 3)
    zones = []
    for pod in pods:
        node = await kube.get("v1", "Node", pod["spec"]["nodeName"])
        assert node is not None
        zones.append(node["metadata"]["labels"][ZONE])
    assert sorted(zones) == ["zone-a", "zone-b", "zone-c"]


async def test_config_map_change_reaches_the_running_pods_file(
    kube: Kube, namespace: str, node_agent: AgentProcess
) -> None:
    config_map = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "settings", "namespace": namespace},
        "data": {"level": "info"},
    }
    await kube.create(config_map)
    manifest = deployment("configured", namespace)
    spec = manifest["spec"]["template"]["spec"]
    spec["containers"][0]["volumeMounts"] = [{"name": "settings", "mountPath": "/etc/app"}]
    spec["volumes"] = [{"name": "settings", "configMap": {"name": "settings"}}]
    await kube.create(manifest)
    (pod,) = await ready_pods(kube, namespace, "configured", 1)
    pid = the_process(node_agent, pod)
    mounted = node_agent.state_dir / "pods" / pod["metadata"]["uid"] / "volumes" / "settings" / "level"
    assert mounted.read_text() == "info"

    await kube.apply({**config_map, "data": {"level": "debug"}})
    await wait_until(
        lambda: mounted.read_text() == "debug", timeout=30, what="the file to follow the ConfigMap"
    )
    live = await kube.get("v1", "Pod", pod["metadata"]["name"], namespace)
    assert live is not None
    assert live["status"]["containerStatuses"][0]["restartCount"] == 0
    assert the_process(node_agent, pod) == pid  # the same process, never restarted


async def test_secret_change_reaches_new_pods_env(
    kube: Kube, namespace: str, node_agent: AgentProcess
) -> None:
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "credentials", "namespace": namespace},
        "stringData": {"token": "first-token-value"},
    }
    await kube.create(secret)
    manifest = deployment("consumer", namespace)
    spec = manifest["spec"]["template"]["spec"]
    spec["containers"][0]["env"] = [
        {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "credentials", "key": "token"}}}
    ]
    # The same Secret as a volume too: its file shows when the agent has seen the change.
    spec["containers"][0]["volumeMounts"] = [{"name": "credentials", "mountPath": "/etc/credentials"}]
    spec["volumes"] = [{"name": "credentials", "secret": {"secretName": "credentials"}}]
    await kube.create(manifest)
    (first,) = await ready_pods(kube, namespace, "consumer", 1)
    pid = the_process(node_agent, first)
    assert environment_of(pid)["TOKEN"] == "first-token-value"

    await kube.apply({**secret, "stringData": {"token": "second-token-value"}})
    mounted = node_agent.state_dir / "pods" / first["metadata"]["uid"] / "volumes" / "credentials" / "token"
    await wait_until(
        lambda: mounted.read_text() == "second-token-value", timeout=30, what="the agent to see the change"
    )
    # A running process keeps the env it started with, as on a real node.
    assert the_process(node_agent, first) == pid
    assert environment_of(pid)["TOKEN"] == "first-token-value"
    await kube.delete("v1", "Pod", first["metadata"]["name"], namespace)

    async def replaced() -> dict[str, Any] | None:
        pods = await live_pods(kube, namespace, "consumer")
        fresh = [p for p in pods if p["metadata"]["uid"] != first["metadata"]["uid"] and is_ready(p)]
        return fresh[0] if fresh else None

    second: Any = await wait_until(replaced, timeout=60, what="a new Ready pod")
    assert environment_of(the_process(node_agent, second))["TOKEN"] == "second-token-value"


async def test_deployment_rollout_replaces_the_pods(
    kube: Kube, namespace: str, node_agent: AgentProcess
) -> None:
    manifest = deployment("rolling", namespace, replicas=2)
    await kube.create(manifest)
    before = await ready_pods(kube, namespace, "rolling", 2)

    container = manifest["spec"]["template"]["spec"]["containers"][0]
    container["image"] = "example.org/some/web:1.3"
    container["env"] = [{"name": "RELEASE", "value": "two"}]
    await kube.apply(manifest)

    async def rolled_out() -> list[dict[str, Any]] | None:
        pods = await pods_of(kube, namespace, "rolling")  # terminating ones too: the old must be gone
        new = [p for p in pods if p["spec"]["containers"][0]["image"].endswith(":1.3") and is_ready(p)]
        return pods if len(pods) == 2 and len(new) == 2 else None

    after: Any = await wait_until(rolled_out, timeout=90, what="the rollout to replace both pods")
    assert not {p["metadata"]["uid"] for p in after} & {p["metadata"]["uid"] for p in before}
    for pod in after:
        assert environment_of(the_process(node_agent, pod))["RELEASE"] == "two"
    rolled: Any = await kube.get("apps/v1", "Deployment", "rolling", namespace)
    assert rolled["status"]["updatedReplicas"] == 2
