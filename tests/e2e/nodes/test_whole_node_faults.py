"""Faults of a whole node on the session's real nodes (:mod:`operator_testkit.nodes.power`): a power
cut and a reboot, the kubelet isolated from the API server, a drain.

These nodes are shared with the other tests of this pytest worker: every test here leaves all three
Ready and schedulable, whatever happened (``nodes_put_back``). Each says what it measured on stderr
(``-s`` shows it)."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from operator_core.kube import Kube
from operator_testkit.fixtures import Kubectl, wait_until
from operator_testkit.nodes.cluster import LocalCluster
from operator_testkit.nodes.host import leftovers, pids_in_cgroups
from operator_testkit.nodes.plan import NodePlan

BUSYBOX = "busybox:1.36"
TOKEN = "/var/run/secrets/kubernetes.io/serviceaccount/token"
"""The pod's projected ServiceAccount token, which the kubelet writes for it: a JWT (``eyJ...``)."""
VICTIM = "node-b"
NOT_READY_WITHIN = 90.0
"""The node lifecycle controller's grace (``--node-monitor-grace-period``, 50 s by default in 1.35),
its look every 5 s, and this machine's load."""


def measured(what: str, seconds: float) -> None:
    print(f"[node faults] {what}: {seconds:.1f} s", file=sys.stderr)


def node_of(cluster: LocalCluster, name: str) -> NodePlan:
    assert cluster.plan is not None
    (node,) = [n for n in cluster.plan.nodes if n.name == name]
    return node


def ready_status(node: dict[str, Any] | None) -> str | None:
    for condition in ((node or {}).get("status") or {}).get("conditions") or []:
        if condition["type"] == "Ready":
            return str(condition["status"])
    return None


async def wait_ready(kube: Kube, name: str, ready: bool, timeout: float) -> float:
    """Seconds until the Node's Ready condition is True (``ready``) or anything else (not ``ready``)."""
    started = time.monotonic()

    async def there() -> bool:
        status = ready_status(await kube.get_live("v1", "Node", name))
        return (status == "True") is ready

    what = f"{name} to be {'Ready' if ready else 'NotReady'}"
    await wait_until(there, timeout=timeout, interval=0.5, what=what)
    return time.monotonic() - started


def put_back(cluster: LocalCluster) -> None:
    """Every node powered, connected and schedulable, whatever a test left."""
    assert cluster.plan is not None
    power = cluster.power()
    for node in cluster.plan.nodes:
        power.reconnect(node.name)
        if power.is_cut(node.name):
            power.reboot(node.name)
        power.uncordon(node.name)


@pytest.fixture
async def nodes_put_back(real_cluster: LocalCluster, kube: Kube) -> AsyncIterator[None]:
    try:
        yield
    finally:
        await asyncio.to_thread(put_back, real_cluster)
        assert real_cluster.plan is not None
        for node in real_cluster.plan.nodes:
            await wait_ready(kube, node.name, True, timeout=120)


def victim_pod(namespace: str, **volumes: dict[str, Any]) -> dict[str, Any]:
    """A non-root pod with an fsGroup on ``VICTIM``: it counts its starts in each volume it has
    (mounted at /<name>), says so with what it reads of the files the kubelet made for it (a ConfigMap,
    its token: the kubelet runs with a group of its own), and serves /scratch over HTTP."""
    counts = " ".join(f"{name}=$(wc -l < /{name}/starts)" for name in volumes)
    script = "; ".join(
        [
            *(f"echo start >> /{name}/starts" for name in volumes),
            f'echo "{counts} config=$(cat /config/greeting) id=$(id -u):$(id -g) token=$(head -c 3 {TOKEN})"',
            "exec httpd -f -p 8080 -h /scratch",
        ]
    )
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "victim", "namespace": namespace},
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": VICTIM},
            "terminationGracePeriodSeconds": 1,
            "securityContext": {"runAsUser": 1000, "runAsGroup": 1000, "fsGroup": 2000, "runAsNonRoot": True},
            "containers": [
                {
                    "name": "main",
                    "image": BUSYBOX,
                    "imagePullPolicy": "Never",
                    "command": ["/bin/sh", "-c", script],
                    "volumeMounts": [
                        {"name": "config", "mountPath": "/config"},
                        *({"name": name, "mountPath": f"/{name}"} for name in volumes),
                    ],
                }
            ],
            "volumes": [
                {"name": "config", "configMap": {"name": "greeting"}},
                *({"name": name, **source} for name, source in volumes.items()),
            ],
        },
    }


async def start_victim(kube: Kube, namespace: str, **volumes: dict[str, Any]) -> dict[str, Any]:
    greeting = {"name": "greeting", "namespace": namespace}
    await kube.create(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": greeting, "data": {"greeting": "hello"}}
    )
    await kube.create(victim_pod(namespace, **volumes))
    return await running(kube, namespace, "victim")


async def running(kube: Kube, namespace: str, name: str, timeout: float = 90) -> dict[str, Any]:
    async def ready() -> dict[str, Any] | None:
        pod = await kube.get_live("v1", "Pod", name, namespace)
        statuses = ((pod or {}).get("status") or {}).get("containerStatuses") or []
        return pod if statuses and all(s.get("ready") for s in statuses) else None

    found = await wait_until(ready, timeout=timeout, interval=0.5, what=f"pod {name} to be ready")
    assert isinstance(found, dict)
    return found


def container(pod: dict[str, Any]) -> dict[str, Any]:
    (status,) = pod["status"]["containerStatuses"]
    return dict(status)


def last_log_line(kubectl: Kubectl, namespace: str, name: str) -> str:
    lines = kubectl("-n", namespace, "logs", name).stdout.splitlines()
    return lines[-1] if lines else ""


def claim(name: str, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": "standard",
            "resources": {"requests": {"storage": "8Mi"}},
        },
    }


def client_pod(namespace: str, url: str) -> dict[str, Any]:
    """A pod on node-a that fetches ``url`` once."""
    command = ["wget", "-q", "-O", "-", url]  # (busybox-static's wget crashes with -T)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "client", "namespace": namespace},
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": "node-a"},
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 1,
            "containers": [
                {"name": "main", "image": BUSYBOX, "imagePullPolicy": "Never", "command": command}
            ],
        },
    }


def mover(namespace: str, labels: dict[str, str]) -> dict[str, Any]:
    """One replica, preferably on node-c (where none of this file's other pods ran), anywhere else once
    node-c is drained."""
    on_node_c = {"key": "kubernetes.io/hostname", "operator": "In", "values": ["node-c"]}
    preferred = [{"weight": 100, "preference": {"matchExpressions": [on_node_c]}}]
    sleeper = {"name": "main", "image": BUSYBOX, "imagePullPolicy": "Never", "command": ["sleep", "3600"]}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "mover", "namespace": namespace},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "affinity": {
                        "nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": preferred}
                    },
                    "terminationGracePeriodSeconds": 1,
                    "containers": [sleeper],
                },
            },
        },
    }


def budget(namespace: str, labels: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "mover", "namespace": namespace},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": labels}},
    }


def pod_ready(pod: dict[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    alive = pod["metadata"].get("deletionTimestamp") is None
    return alive and any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def pod_processes(node: NodePlan, pod: dict[str, Any]) -> set[int]:
    """The pod's processes: those of its cgroup, below the node's (``pod<uid>`` in the kubelet's cgroupfs
    naming, under its QoS class's cgroup)."""
    pids = Path("/sys/fs/cgroup/pids")
    (cgroup,) = (pids / node.cgroup_root.lstrip("/")).rglob(f"pod{pod['metadata']['uid']}")
    return pids_in_cgroups(f"/{cgroup.relative_to(pids)}")


def alive(pids: set[int]) -> set[int]:
    """Those of ``pids`` that run: not gone, and not a zombie that nobody reaped yet (a container's
    processes whose shim was killed wait for the machine's init)."""
    running = set()
    for pid in pids:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        if stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X"):
            running.add(pid)
    return running


async def test_a_power_cut_node_goes_not_ready_and_after_a_reboot_its_pod_runs_again_with_its_volumes(
    kube: Kube, namespace: str, kubectl: Kubectl, real_cluster: LocalCluster, nodes_put_back: None
) -> None:
    node = node_of(real_cluster, VICTIM)
    await kube.create(claim("data", namespace))
    before = await start_victim(
        kube, namespace, scratch={"emptyDir": {}}, data={"persistentVolumeClaim": {"claimName": "data"}}
    )
    assert (
        last_log_line(kubectl, namespace, "victim") == "scratch=1 data=1 config=hello id=1000:1000 token=eyJ"
    )
    pods_processes = pids_in_cgroups(node.cgroup_root)
    assert pods_processes, "the node's pods have no process in its cgroups"

    cut = await asyncio.to_thread(real_cluster.power_cut, VICTIM)
    cut_at = time.monotonic()
    assert cut["killed"] >= len(pods_processes) + 2  # with the kubelet and containerd
    assert pids_in_cgroups(node.cgroup_root, node.daemon_cgroup) == set()
    assert alive(pods_processes) == set()
    assert await asyncio.to_thread(real_cluster.power().is_cut, VICTIM)
    measured("power cut, every process of the node killed", cut["took"])

    await wait_ready(kube, VICTIM, False, timeout=NOT_READY_WITHIN)
    measured("power cut → Node NotReady", time.monotonic() - cut_at)
    assert pids_in_cgroups(node.cgroup_root) == set(), "something of the node came back by itself"

    rebooted = await asyncio.to_thread(real_cluster.reboot, VICTIM)
    reboot_at = time.monotonic() - rebooted["ready_after"]
    measured("reboot → containerd answers", rebooted["containerd_answered"])
    measured("reboot → Node Ready", rebooted["ready_after"])

    async def started_again() -> dict[str, Any] | None:
        pod = await running(kube, namespace, "victim")
        return pod if container(pod)["containerID"] != container(before)["containerID"] else None

    after = await wait_until(
        started_again, timeout=120, interval=1, what="the pod's container to start again"
    )
    assert isinstance(after, dict)
    measured("reboot → the pod's container Ready again", time.monotonic() - reboot_at)
    assert container(after)["restartCount"] > container(before)["restartCount"]
    assert after["metadata"]["uid"] == before["metadata"]["uid"]
    # Both volumes kept what the first run wrote: the kubelet mounted the same ones again.
    assert (
        last_log_line(kubectl, namespace, "victim") == "scratch=2 data=2 config=hello id=1000:1000 token=eyJ"
    )


async def test_an_isolated_node_goes_not_ready_while_its_containers_keep_running_and_serving(
    kube: Kube, namespace: str, kubectl: Kubectl, real_cluster: LocalCluster, nodes_put_back: None
) -> None:
    node = node_of(real_cluster, VICTIM)
    before = await start_victim(kube, namespace, scratch={"emptyDir": {}})
    processes = pod_processes(node, before)
    assert len(processes) >= 2  # its pause and httpd

    await asyncio.to_thread(real_cluster.isolate, VICTIM)
    assert await asyncio.to_thread(real_cluster.power().is_isolated, VICTIM)
    measured("isolate → Node NotReady", await wait_ready(kube, VICTIM, False, timeout=NOT_READY_WITHIN))
    assert alive(processes) == processes, "a process of the isolated node's pods ended"

    # A pod of another node still reaches the isolated node's pod.
    await kube.create(client_pod(namespace, f"http://{before['status']['podIP']}:8080/starts"))

    async def fetched() -> str | None:
        pod = await kube.get_live("v1", "Pod", "client", namespace)
        phase = ((pod or {}).get("status") or {}).get("phase")
        return str(phase) if phase in ("Succeeded", "Failed") else None

    finished = await wait_until(fetched, timeout=60, what="the client to finish")
    output = kubectl("-n", namespace, "logs", "client").stdout
    assert (finished, output) == ("Succeeded", "start\n")

    await asyncio.to_thread(real_cluster.reconnect, VICTIM)
    assert not await asyncio.to_thread(real_cluster.power().is_isolated, VICTIM)
    measured("reconnect → Node Ready", await wait_ready(kube, VICTIM, True, timeout=120))
    assert alive(processes) == processes
    after = await running(kube, namespace, "victim")
    assert container(after)["containerID"] == container(before)["containerID"]
    assert container(after)["restartCount"] == 0


async def test_a_drain_held_by_a_disruption_budget_is_an_answer_and_one_let_go_moves_the_pod(
    kube: Kube, namespace: str, real_cluster: LocalCluster, nodes_put_back: None
) -> None:
    labels = {"app": "mover"}
    await kube.create(mover(namespace, labels))
    await kube.create(budget(namespace, labels))

    async def placed() -> str | None:
        ready = [pod for pod in await kube.list("v1", "Pod", namespace) if pod_ready(pod)]
        return str(ready[0]["spec"]["nodeName"]) if len(ready) == 1 else None

    assert await wait_until(placed, timeout=90, what="the mover's pod to be ready") == "node-c"

    held = await asyncio.to_thread(real_cluster.drain, "node-c", 5)
    assert held["drained"] is False
    assert "disruption budget" in held["output"], held["output"]
    cordoned = await kube.get_live("v1", "Node", "node-c")
    assert cordoned is not None
    assert cordoned["spec"].get("unschedulable") is True

    await kube.delete("policy/v1", "PodDisruptionBudget", "mover", namespace)
    drained = await asyncio.to_thread(real_cluster.drain, "node-c", 90)
    assert drained["drained"] is True, drained["output"]
    measured("drain of node-c, the budget gone", drained["took"])
    moved = await wait_until(placed, timeout=90, what="the mover's pod to be ready on another node")
    assert moved != "node-c"

    assert await asyncio.to_thread(real_cluster.uncordon, "node-c") == {"node": "node-c", "cordoned": False}
    uncordoned = await kube.get_live("v1", "Node", "node-c")
    assert uncordoned is not None
    assert not uncordoned["spec"].get("unschedulable")


async def test_a_cluster_stopped_with_a_node_cut_and_another_isolated_leaves_nothing_behind(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    cluster = LocalCluster(tmp_path_factory.mktemp("cut"), count=2)
    await asyncio.to_thread(cluster.start)
    assert cluster.plan is not None
    plan = cluster.plan
    try:
        await asyncio.to_thread(cluster.isolate, "node-a")
        await asyncio.to_thread(cluster.power_cut, "node-b")
    finally:
        await asyncio.to_thread(cluster.stop)
    assert leftovers(plan) == []
