"""The node agent runs pods on the local control plane: nodes, stand-ins, Jobs, termination messages,
deletion, shutdown."""

from __future__ import annotations

import asyncio
import ipaddress
import time
from typing import Any

import httpx

from operator_core.kube import Kube
from operator_testkit.controlplane import ControlPlane
from operator_testkit.fixtures import wait_until, worker_slice
from operator_testkit.image import Image
from operator_testkit.nodeagent.harness import AgentProcess, processes_under, start_agent
from operator_testkit.nodeagent.pods import STAND_IN_ANNOTATION

POD_NETWORK = ipaddress.ip_network("127.50.0.0/16")


def deployment(name: str, namespace: str, *, replicas: int = 1, port: int = 8080) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "terminationGracePeriodSeconds": 5,
                    "containers": [
                        {
                            "name": "web",
                            "image": "example.org/some/web:1.2",
                            "args": ["--listen", f":{port}"],
                            "ports": [{"containerPort": port, "name": "http"}],
                            "readinessProbe": {
                                "httpGet": {"path": "/ready", "port": "http"},
                                "periodSeconds": 1,
                            },
                        }
                    ],
                },
            },
        },
    }


def job(name: str, namespace: str, image: str, command: list[str], **container: Any) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "backoffLimit": 0,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "task", "image": image, "command": command, **container}],
                }
            },
        },
    }


async def pods_of(kube: Kube, namespace: str, app: str) -> list[dict[str, Any]]:
    return await kube.list("v1", "Pod", namespace, labels={"app": app})


def is_ready(pod: dict[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


async def test_nodes_are_registered_ready_in_three_zones(kube: Kube, node_agent: AgentProcess) -> None:
    nodes = [await kube.get("v1", "Node", name) for name in node_agent.nodes]
    assert len(nodes) == 3
    zones = {n["metadata"]["labels"]["topology.kubernetes.io/zone"] for n in nodes if n}
    assert zones == {"zone-a", "zone-b", "zone-c"}
    for node in nodes:
        assert node is not None
        ready = next(c for c in node["status"]["conditions"] if c["type"] == "Ready")
        assert ready["status"] == "True"
        lease = await kube.get("coordination.k8s.io/v1", "Lease", node["metadata"]["name"], "kube-node-lease")
        assert lease is not None

    async def untainted() -> bool:
        # The node lifecycle controller taints a new node not-ready until it has seen it Ready.
        nodes = [await kube.get("v1", "Node", name) for name in node_agent.nodes]
        return all(not ((n or {}).get("spec") or {}).get("taints") for n in nodes)

    await wait_until(untainted, timeout=60, what="the nodes to lose the not-ready taint")


async def test_deployment_of_stand_in_runs_and_answers_on_its_pod_ip(
    kube: Kube, namespace: str, node_agent: AgentProcess
) -> None:
    await kube.create(deployment("web", namespace))

    async def ready_pod() -> dict[str, Any] | None:
        pods = await pods_of(kube, namespace, "web")
        return pods[0] if pods and is_ready(pods[0]) else None

    pod: Any = await wait_until(ready_pod, timeout=60, what="the web pod to be Ready")
    status = pod["status"]
    assert status["phase"] == "Running"
    assert ipaddress.ip_address(status["podIP"]) in POD_NETWORK
    assert status["podIPs"] == [{"ip": status["podIP"]}]
    assert pod["spec"]["nodeName"] in node_agent.nodes
    container = status["containerStatuses"][0]
    assert container["ready"] is True
    assert "running" in container["state"]
    assert pod["metadata"]["annotations"][STAND_IN_ANNOTATION] == "web"

    async with httpx.AsyncClient(trust_env=False) as http:
        answer = await http.get(f"http://{status['podIP']}:8080/anything")
    assert answer.status_code == 200
    assert "STAND-IN" in answer.text

    logs = list(node_agent.state_dir.glob(f"logs/{namespace}_{pod['metadata']['name']}_*/web/0.log"))
    assert logs, "no container log"
    text = logs[0].read_text()
    assert "STAND-IN" in text
    assert "--listen :8080" in text

    # Read through core/v1: the client cannot decode events.k8s.io Events that have no eventTime.
    events = await kube.list("v1", "Event", namespace)
    assert any(e.get("reason") == "StandIn" for e in events)


async def test_job_of_stand_in_completes(kube: Kube, namespace: str, node_agent: AgentProcess) -> None:
    await kube.create(job("once", namespace, "busybox:1.36", ["sh", "-c", "echo done"]))

    async def complete() -> bool:
        job = await kube.get("batch/v1", "Job", "once", namespace)
        conditions = ((job or {}).get("status") or {}).get("conditions") or []
        return any(c["type"] == "Complete" and c["status"] == "True" for c in conditions)

    await wait_until(complete, timeout=60, what="the Job controller to mark the Job Complete")
    pods = await kube.list("v1", "Pod", namespace, labels={"job-name": "once"})
    assert [p["status"]["phase"] for p in pods] == ["Succeeded"]
    terminated = pods[0]["status"]["containerStatuses"][0]["state"]["terminated"]
    assert terminated["exitCode"] == 0
    assert terminated["reason"] == "Completed"


async def test_deleted_pod_stops_its_processes_and_replacement_gets_new_ip(
    kube: Kube, namespace: str, node_agent: AgentProcess
) -> None:
    await kube.create(deployment("again", namespace))

    async def one_ready_pod() -> dict[str, Any] | None:
        pods = await pods_of(kube, namespace, "again")
        pods = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
        return pods[0] if len(pods) == 1 and is_ready(pods[0]) else None

    first: Any = await wait_until(one_ready_pod, timeout=60, what="the first pod to be Ready")
    first_ip = first["status"]["podIP"]
    pod_dir = node_agent.state_dir / "pods" / first["metadata"]["uid"]
    assert processes_under(pod_dir), "the pod's container process is not running"

    await kube.delete("v1", "Pod", first["metadata"]["name"], namespace)

    async def first_gone() -> bool:
        return await kube.get("v1", "Pod", first["metadata"]["name"], namespace) is None

    await wait_until(first_gone, timeout=30, what="the agent to finish deleting the pod")
    assert not processes_under(pod_dir), "the deleted pod's process is still running"
    second: Any = await wait_until(one_ready_pod, timeout=60, what="the replacement pod to be Ready")
    assert second["metadata"]["uid"] != first["metadata"]["uid"]
    assert second["status"]["podIP"] != first_ip
    async with httpx.AsyncClient(trust_env=False) as http:
        assert (await http.get(f"http://{second['status']['podIP']}:8080/")).status_code == 200


async def test_stopped_agent_leaves_no_process(
    kube: Kube, namespace: str, control_plane: ControlPlane, tmp_path: Any, node_agent: AgentProcess
) -> None:
    # A second agent with its own single node, so stopping it leaves the session's agent alone.
    agent = start_agent(
        control_plane, tmp_path / "agent", "--nodes", "1", "--node-prefix", "short-lived", "--pod-cidr",
        worker_slice("127.51.0.0/16"),
    )  # fmt: skip
    try:
        manifest = deployment("pinned", namespace, replicas=2)
        manifest["spec"]["template"]["spec"]["nodeSelector"] = {"kubernetes.io/hostname": "short-lived-0"}
        await kube.create(manifest)

        async def both_ready() -> bool:
            pods = await pods_of(kube, namespace, "pinned")
            return len(pods) == 2 and all(is_ready(p) for p in pods)

        await wait_until(both_ready, timeout=60, what="both pinned pods to be Ready")
        assert len(processes_under(agent.state_dir)) == 2
    finally:
        agent.stop()
        # A stopped kubelet's Node stays; until it is marked unreachable, the scheduler would still
        # place later tests' pods on it, where nothing runs them.
        await kube.delete("v1", "Node", "short-lived-0")
    assert processes_under(agent.state_dir) == []


async def test_a_container_of_the_suite_image_reports_its_termination_message(
    kube: Kube, namespace: str, node_agent: AgentProcess, suite_image: Image
) -> None:
    """As a kubelet: what the container wrote to /dev/termination-log is its terminated.message (what
    the backup Job reports through); with FallbackToLogsOnError, a failure that wrote none reports
    the end of its log."""
    wrote = "open('/dev/termination-log', 'w').write('{\"files\": 3}')"
    await kube.create(job("reports", namespace, suite_image.name, ["python3", "-c", wrote]))
    failed = "import sys; print('cannot reach the bucket'); sys.exit(3)"
    await kube.create(
        job(
            "fails",
            namespace,
            suite_image.name,
            ["python3", "-c", failed],
            terminationMessagePolicy="FallbackToLogsOnError",
        )
    )

    async def terminated(name: str) -> dict[str, Any] | None:
        pods = await kube.list("v1", "Pod", namespace, labels={"job-name": name})
        statuses = [s for p in pods for s in (p.get("status") or {}).get("containerStatuses") or []]
        state = statuses[0]["state"] if statuses else {}
        found: dict[str, Any] | None = state.get("terminated")
        return found

    reported: Any = await wait_until(
        lambda: terminated("reports"), timeout=90, what="the Job's container to end"
    )
    assert reported["exitCode"] == 0
    assert reported["message"] == '{"files": 3}'
    fallback: Any = await wait_until(
        lambda: terminated("fails"), timeout=90, what="the failing container to end"
    )
    assert fallback["exitCode"] == 3
    assert fallback["message"] == "cannot reach the bucket"


async def test_a_second_delete_with_a_shorter_grace_kills_a_pod_that_ignores_sigterm(
    kube: Kube, namespace: str, node_agent: AgentProcess, suite_image: Image
) -> None:
    """As a kubelet: a pod whose container ignores SIGTERM keeps running for its grace period, and a
    second delete with a shorter grace (what the operator does to a Typesense leader stuck in its
    shutdown) ends it at the new deadline."""
    ignores = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"
    manifest = job("stubborn", namespace, suite_image.name, ["python3", "-c", ignores])
    manifest["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = 300

    async def running() -> dict[str, Any] | None:
        pods = await kube.list("v1", "Pod", namespace, labels={"job-name": "stubborn"})
        return pods[0] if pods and (pods[0].get("status") or {}).get("phase") == "Running" else None

    await kube.create(manifest)
    pod: Any = await wait_until(running, timeout=90, what="the stubborn pod to run")
    name = pod["metadata"]["name"]
    await kube.delete("v1", "Pod", name, namespace)
    await asyncio.sleep(3)
    assert await kube.get("v1", "Pod", name, namespace) is not None, "SIGTERM is ignored: it stays"
    pod_dir = node_agent.state_dir / "pods" / pod["metadata"]["uid"]
    assert processes_under(pod_dir)
    # Not 0, which would remove the object at once (a force delete) while its process may still run.
    await kube.delete("v1", "Pod", name, namespace, grace_period=1)
    started = time.monotonic()

    async def gone() -> bool:
        return await kube.get("v1", "Pod", name, namespace) is None

    await wait_until(gone, timeout=30, what="the pod to be gone after a delete with a 1 s grace")
    assert time.monotonic() - started < 15
    assert not processes_under(pod_dir), "the stubborn process was killed"
