"""Faults on demand (operator_testkit.nodeagent.faults) have the effect a kubelet would give."""

from __future__ import annotations

import argparse
import asyncio
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest
from test_nodeagent_pods import deployment, is_ready, pods_of

from operator_core.kube import Kube
from operator_testkit.fixtures import wait_until
from operator_testkit.nodeagent.cli import add_agent_commands
from operator_testkit.nodeagent.disks import SIZE_LIMITED_CLASS
from operator_testkit.nodeagent.faults import FaultError, Faults
from operator_testkit.nodeagent.harness import AgentProcess, processes_under
from operator_testkit.nodeagent.pods import BACKOFF_START

HELD_DOWN_SECONDS = 3 * BACKOFF_START
"""How long a held container is watched to prove that nothing restarts it: the agent restarts a
container that is not held BACKOFF_START (1 s) after it dies, and writes the pod's status within a
fraction of a second, so three back-offs would show a restart with room to spare."""


def faults_of(agent: AgentProcess) -> Faults:
    return Faults.of(agent.state_dir)


async def one_ready_pod(kube: Kube, namespace: str, app: str) -> dict[str, Any]:
    async def ready() -> dict[str, Any] | None:
        pods = [p for p in await pods_of(kube, namespace, app) if not p["metadata"].get("deletionTimestamp")]
        return pods[0] if len(pods) == 1 and is_ready(pods[0]) else None

    pod: Any = await wait_until(ready, timeout=60, what=f"one Ready {app} pod")
    return dict(pod)


def run_cli(*argv: str) -> int:
    """``operator-suite-dev agent ...`` through the argparse wiring the lead adds to operator_core.cli."""
    parser = argparse.ArgumentParser(prog="operator-suite")
    add_agent_commands(parser.add_subparsers(dest="command", required=True))
    arguments = parser.parse_args(["agent", *argv])
    return int(arguments.run(arguments))


async def started_events(kube: Kube, namespace: str, pod: str) -> int:
    """How many times the agent said it started a container of ``pod`` (one Started Event each)."""
    events = await kube.list("v1", "Event", namespace)
    return sum(1 for e in events if e["reason"] == "Started" and e["involvedObject"]["name"] == pod)


def process_state(pid: int) -> str:
    # /proc/PID/stat: "pid (comm) S ..."; the comm may hold spaces, so split after its ")".
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


async def test_killed_container_is_restarted_in_the_same_pod(
    kube: Kube, namespace: str, node_agent: AgentProcess
) -> None:
    await kube.create(deployment("victim", namespace))
    pod = await one_ready_pod(kube, namespace, "victim")
    name = pod["metadata"]["name"]

    answer = await faults_of(node_agent).kill(namespace, name)
    assert answer["container"] == "web"
    assert answer["restartCount"] == 0

    async def restarted() -> dict[str, Any] | None:
        live = await kube.get("v1", "Pod", name, namespace)
        statuses = ((live or {}).get("status") or {}).get("containerStatuses") or [{}]
        return live if statuses[0].get("restartCount") == 1 and live and is_ready(live) else None

    live: Any = await wait_until(restarted, timeout=60, what="the container to be restarted and Ready")
    container = live["status"]["containerStatuses"][0]
    assert container["lastState"]["terminated"]["exitCode"] == 137  # 128 + SIGKILL, as a runtime reports
    assert live["metadata"]["uid"] == pod["metadata"]["uid"]
    assert live["status"]["podIP"] == pod["status"]["podIP"]  # the same pod sandbox keeps its address
    pids = processes_under(node_agent.state_dir / "pods" / pod["metadata"]["uid"])
    assert pids
    assert answer["pid"] not in pids


async def test_a_container_held_down_stays_dead_until_released(
    kube: Kube, namespace: str, node_agent: AgentProcess
) -> None:
    await kube.create(deployment("held", namespace))
    pod = await one_ready_pod(kube, namespace, "held")
    name, ip = pod["metadata"]["name"], pod["status"]["podIP"]
    faults = faults_of(node_agent)

    assert (await faults.down(namespace, name))["down"] is True

    async def held_down() -> dict[str, Any] | None:
        live = await kube.get("v1", "Pod", name, namespace)
        statuses = ((live or {}).get("status") or {}).get("containerStatuses") or [{}]
        waiting = statuses[0].get("state", {}).get("waiting") or {}
        return live if waiting.get("reason") == "HeldDown" and live and not is_ready(live) else None

    await wait_until(held_down, timeout=60, what="the container held down")
    started = await started_events(kube, namespace, name)
    async with httpx.AsyncClient(trust_env=False, timeout=2) as http:
        with pytest.raises(httpx.ConnectError):  # a dead process: the port refuses, it does not hang
            await http.get(f"http://{ip}:8080/")
    await asyncio.sleep(HELD_DOWN_SECONDS)
    still = await kube.get("v1", "Pod", name, namespace)
    assert still is not None
    assert not is_ready(still), "nothing restarts a held container"
    assert still["status"]["containerStatuses"][0]["state"]["waiting"]["reason"] == "HeldDown"
    assert await started_events(kube, namespace, name) == started, "no start while held"
    assert not processes_under(node_agent.state_dir / "pods" / pod["metadata"]["uid"])

    await faults.up(namespace, name)
    live = await one_ready_pod(kube, namespace, "held")
    assert live["metadata"]["uid"] == pod["metadata"]["uid"]
    assert live["status"]["containerStatuses"][0]["restartCount"] == 1


async def test_frozen_container_stops_answering_and_thawed_one_recovers(
    kube: Kube, namespace: str, node_agent: AgentProcess
) -> None:
    manifest = deployment("frozen", namespace)
    container = manifest["spec"]["template"]["spec"]["containers"][0]
    container["readinessProbe"].update({"failureThreshold": 1, "timeoutSeconds": 1})
    await kube.create(manifest)
    pod = await one_ready_pod(kube, namespace, "frozen")
    name, ip = pod["metadata"]["name"], pod["status"]["podIP"]

    # Through the CLI wiring, in a thread: it runs its own event loop.
    code = await asyncio.to_thread(
        run_cli, "freeze", name, "-n", namespace, "--dir", str(node_agent.state_dir)
    )
    assert code == 0
    pids = processes_under(node_agent.state_dir / "pods" / pod["metadata"]["uid"])
    assert pids
    assert all(process_state(pid) == "T" for pid in pids)

    async def not_ready() -> bool:
        live = await kube.get("v1", "Pod", name, namespace)
        return live is not None and not is_ready(live)

    await wait_until(not_ready, timeout=30, what="the frozen pod to lose Ready")
    async with httpx.AsyncClient(trust_env=False, timeout=1) as http:
        with pytest.raises(httpx.TimeoutException):
            await http.get(f"http://{ip}:8080/")

        await faults_of(node_agent).thaw(namespace, name)

        async def ready_again() -> bool:
            live = await kube.get("v1", "Pod", name, namespace)
            return live is not None and is_ready(live)

        await wait_until(ready_again, timeout=30, what="the thawed pod to be Ready again")
        assert (await http.get(f"http://{ip}:8080/")).status_code == 200
    live = await kube.get("v1", "Pod", name, namespace)
    assert live is not None
    assert live["status"]["containerStatuses"][0]["restartCount"] == 0


async def test_deleted_pod_is_replaced_by_its_controller(
    kube: Kube, namespace: str, node_agent: AgentProcess
) -> None:
    await kube.create(deployment("deleted", namespace))
    first = await one_ready_pod(kube, namespace, "deleted")
    answer = await faults_of(node_agent).delete_pod(namespace, first["metadata"]["name"])
    assert answer["deleted"] is True
    assert await kube.get("v1", "Pod", first["metadata"]["name"], namespace) is None  # wait=True waited
    second = await one_ready_pod(kube, namespace, "deleted")
    assert second["metadata"]["uid"] != first["metadata"]["uid"]
    assert second["status"]["podIP"] != first["status"]["podIP"]
    with pytest.raises(FaultError, match="not found"):
        await faults_of(node_agent).delete_pod(namespace, first["metadata"]["name"])


def stateful_set(
    name: str, namespace: str, *, replicas: int = 3, storage_class: str | None = None, size: str = "1Gi"
) -> list[Any]:
    labels = {"app": name}
    claim_spec: dict[str, Any] = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": size}},
    }
    if storage_class:
        claim_spec["storageClassName"] = storage_class
    return [
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"clusterIP": "None", "selector": labels, "ports": [{"port": 8080}]},
        },
        {
            "apiVersion": "apps/v1",
            "kind": "StatefulSet",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "serviceName": name,
                "replicas": replicas,
                "podManagementPolicy": "Parallel",
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "terminationGracePeriodSeconds": 30,
                        "containers": [
                            {
                                "name": "db",
                                "image": "example.org/some/db:1",
                                "ports": [{"containerPort": 8080}],
                                "volumeMounts": [{"name": "data", "mountPath": "/var/lib/db"}],
                            }
                        ],
                    },
                },
                "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": claim_spec}],
            },
        },
    ]


async def ready_set(kube: Kube, namespace: str, app: str, replicas: int = 3) -> list[dict[str, Any]]:
    async def all_ready() -> list[dict[str, Any]] | None:
        pods = [p for p in await pods_of(kube, namespace, app) if not p["metadata"].get("deletionTimestamp")]
        return pods if len(pods) == replicas and all(is_ready(p) for p in pods) else None

    pods: Any = await wait_until(all_ready, timeout=90, what=f"{replicas} Ready {app} pods")
    return sorted(pods, key=lambda p: p["metadata"]["name"])


async def claim_directory(kube: Kube, namespace: str, claim: str) -> Path:
    bound = await kube.get("v1", "PersistentVolumeClaim", claim, namespace)
    assert bound is not None
    volume = await kube.get("v1", "PersistentVolume", bound["spec"]["volumeName"])
    assert volume is not None
    return Path(volume["spec"]["hostPath"]["path"])


async def test_statefulset_restart_recreates_every_pod_at_once_with_new_ips(
    kube: Kube, namespace: str, node_agent: AgentProcess
) -> None:
    for manifest in stateful_set("db", namespace):
        await kube.create(manifest)
    before = await ready_set(kube, namespace, "db")
    kept = await claim_directory(kube, namespace, "data-db-0")
    (kept / "marker").write_text("survives a full restart")

    crashed = await faults_of(node_agent).restart_statefulset(namespace, "db")
    assert sorted(c["name"] for c in crashed) == ["db-0", "db-1", "db-2"]
    for pod in before:  # SIGKILLed at once, not after a 30 s grace period
        assert not processes_under(node_agent.state_dir / "pods" / pod["metadata"]["uid"])

    after = await ready_set(kube, namespace, "db")
    assert [p["metadata"]["name"] for p in after] == ["db-0", "db-1", "db-2"]
    assert not {p["metadata"]["uid"] for p in after} & {p["metadata"]["uid"] for p in before}
    old_ips = {p["status"]["podIP"] for p in before}
    assert not {p["status"]["podIP"] for p in after} & old_ips
    assert (await claim_directory(kube, namespace, "data-db-0") / "marker").read_text() == (
        "survives a full restart"
    )


async def test_wiped_volume_is_empty(kube: Kube, namespace: str, node_agent: AgentProcess) -> None:
    for manifest in stateful_set("wiped", namespace, replicas=1):
        await kube.create(manifest)
    await ready_set(kube, namespace, "wiped", replicas=1)
    directory = await claim_directory(kube, namespace, "data-wiped-0")
    (directory / "state").mkdir()
    (directory / "state" / "log").write_text("raft log")
    (directory / "meta").write_text("meta")

    answer = await faults_of(node_agent).wipe_volume(namespace, "data-wiped-0")
    assert answer["removed"] == 2
    assert directory.is_dir()
    assert list(directory.iterdir()) == []
    with pytest.raises(FaultError, match=r"not bound|not found"):
        await faults_of(node_agent).wipe_volume(namespace, "no-such-claim")


def in_container(pid: int, *argv: str) -> subprocess.CompletedProcess[str]:
    """Run a command in the mount namespace of a container process: what the container sees."""
    return subprocess.run(
        ["nsenter", "-t", str(pid), "-m", *argv], capture_output=True, text=True, check=False, timeout=10
    )


async def df_in_container(pid: int, path: Path) -> tuple[int, int]:
    """``df`` of the volume as the container sees it: (size, available) in bytes."""
    result = await asyncio.to_thread(in_container, pid, "df", "-B1", "--output=size,avail", str(path))
    assert result.returncode == 0, result.stderr
    size, available = result.stdout.splitlines()[-1].split()
    return int(size), int(available)


async def test_size_limited_volume_fills_up_for_real(
    kube: Kube, namespace: str, node_agent: AgentProcess
) -> None:
    for manifest in stateful_set("full", namespace, replicas=1, storage_class=SIZE_LIMITED_CLASS, size="8Mi"):
        await kube.create(manifest)
    (pod,) = await ready_set(kube, namespace, "full", replicas=1)
    directory = await claim_directory(kube, namespace, "data-full-0")
    (pid,) = processes_under(node_agent.state_dir / "pods" / pod["metadata"]["uid"])
    size, available = await df_in_container(pid, directory)
    assert size == 8 * 2**20
    assert available == size

    faults = faults_of(node_agent)
    filled = await faults.fill_volume(namespace, "data-full-0")
    assert filled["free"] == 0
    assert filled["written"] >= size - 64 * 1024
    assert (await df_in_container(pid, directory))[1] == 0
    writer = await asyncio.to_thread(
        in_container, pid, "sh", "-c", f"head -c 65536 /dev/zero > {directory}/more"
    )
    assert writer.returncode != 0
    assert "No space left on device" in writer.stderr

    assert (await faults.free_volume(namespace, "data-full-0"))["freed"] is True
    assert (await df_in_container(pid, directory))[1] == size

    for manifest in stateful_set("plain", namespace, replicas=1):
        await kube.create(manifest)
    await ready_set(kube, namespace, "plain", replicas=1)
    with pytest.raises(FaultError, match="not size-limited"):
        await faults.fill_volume(namespace, "data-plain-0")  # never fills this machine's disk
