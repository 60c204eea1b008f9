"""Real nodes: a real kubelet, containerd and runc per node, kube-proxy, CoreDNS, and a network from
which nothing leaves the machine."""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
from typing import Any

import pytest

from operator_core.kube import Kube
from operator_testkit.fixtures import Kubectl, wait_until
from operator_testkit.image import Image
from operator_testkit.nodes.cluster import LocalCluster
from operator_testkit.nodes.faults import FaultError
from operator_testkit.nodes.host import EGRESS_CHAIN, leftovers
from operator_testkit.nodes.images import NodeImage
from operator_testkit.nodes.storage import SIZE_LIMITED_CLASS

BUSYBOX = "busybox:1.36"
RESTRICTED = {
    "runAsNonRoot": True,
    "seccompProfile": {"type": "RuntimeDefault"},
}
LOCKED_DOWN = {
    "allowPrivilegeEscalation": False,
    "readOnlyRootFilesystem": True,
    "capabilities": {"drop": ["ALL"]},
}


def pod(name: str, namespace: str, image: str, script: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 1,
            "containers": [
                {
                    "name": "main",
                    "image": image,
                    "imagePullPolicy": "Never",
                    "command": ["/bin/sh", "-c", script],
                    **spec.pop("container", {}),
                }
            ],
            **spec,
        },
    }


async def finished(kube: Kube, namespace: str, name: str, timeout: float = 60.0) -> dict[str, Any]:
    async def done() -> dict[str, Any] | None:
        found = await kube.get("v1", "Pod", name, namespace)
        phase = ((found or {}).get("status") or {}).get("phase")
        return found if phase in ("Succeeded", "Failed") else None

    result = await wait_until(done, timeout=timeout, what=f"pod {name} to finish")
    assert isinstance(result, dict)
    return result


async def in_nodes_namespace(cluster: LocalCluster, *argv: str) -> str:
    command = cluster.in_namespace(*argv)
    done = await asyncio.to_thread(subprocess.run, command, capture_output=True, text=True, check=True)
    return done.stdout


def claim(name: str, namespace: str, storage_class: str, size: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": storage_class,
            "resources": {"requests": {"storage": size}},
        },
    }


def logs(kubectl: Kubectl, namespace: str, name: str, *, check: bool = True) -> str:
    """The pod's log (``check=False``: whatever kubectl gives, nothing while the pod starts)."""
    return kubectl("-n", namespace, "logs", name, check=check).stdout


def test_three_nodes_run_the_pinned_kubelet_on_containerd_in_their_zones(kubectl: Kubectl) -> None:
    nodes = json.loads(kubectl("get", "nodes", "-o", "json").stdout)["items"]
    seen = {
        n["metadata"]["name"]: (
            n["metadata"]["labels"]["topology.kubernetes.io/zone"],
            n["status"]["nodeInfo"]["kubeletVersion"],
            n["status"]["nodeInfo"]["containerRuntimeVersion"].split(":")[0],
            next(c["status"] for c in n["status"]["conditions"] if c["type"] == "Ready"),
        )
        for n in nodes
    }
    assert seen == {
        "node-a": ("zone-a", "v1.35.4", "containerd", "True"),
        "node-b": ("zone-b", "v1.35.4", "containerd", "True"),
        "node-c": ("zone-c", "v1.35.4", "containerd", "True"),
    }


async def test_a_pod_finds_the_api_server_by_its_service_name_through_cluster_dns(
    kube: Kube, namespace: str, kubectl: Kubectl
) -> None:
    script = (
        "nslookup kubernetes.default.svc.cluster.local && "
        "nc -w 3 kubernetes.default.svc.cluster.local 443 </dev/null && echo reached"
    )
    await kube.create(pod("dns", namespace, BUSYBOX, script))
    done = await finished(kube, namespace, "dns")
    output = logs(kubectl, namespace, "dns")
    assert done["status"]["phase"] == "Succeeded", output
    assert "reached" in output


async def test_a_name_outside_the_cluster_gets_no_answer_from_anywhere(
    kube: Kube, namespace: str, kubectl: Kubectl
) -> None:
    started = time.monotonic()
    await kube.create(pod("outside", namespace, BUSYBOX, "nslookup example.org; echo rc=$?"))
    await finished(kube, namespace, "outside")
    output = logs(kubectl, namespace, "outside")
    assert "rc=1" in output, output
    assert time.monotonic() - started < 30


async def test_nothing_a_pod_sends_outside_the_pod_and_service_ranges_leaves(
    kube: Kube, namespace: str, kubectl: Kubectl, real_cluster: LocalCluster
) -> None:
    # Addresses of every kind a packet must never reach: this machine's own network, a private range,
    # a public one. Each must fail: the namespace routes none of them, and its guard drops them too.
    script = "; ".join(
        f"nc -w 2 {address} 80 </dev/null; echo {address}=$?"
        for address in ("192.0.2.1", "10.0.0.1", "1.1.1.1")
    )
    await kube.create(pod("egress", namespace, BUSYBOX, script))
    await finished(kube, namespace, "egress")
    output = logs(kubectl, namespace, "egress")
    for address in ("192.0.2.1", "10.0.0.1", "1.1.1.1"):
        assert f"{address}=1" in output, output
    forward = await in_nodes_namespace(real_cluster, "iptables", "-w", "-t", "mangle", "-S", "FORWARD")
    assert f"-A FORWARD -j {EGRESS_CHAIN}" in forward.splitlines()[1], forward
    routes = await in_nodes_namespace(real_cluster, "ip", "route", "show", "default")
    assert routes.strip() == "", f"the nodes' namespace has a default route: {routes}"


async def test_pods_on_different_nodes_reach_each_other_through_a_service(
    kube: Kube, namespace: str, kubectl: Kubectl
) -> None:
    labels = {"app": "echo"}
    server = pod("server", namespace, BUSYBOX, "echo hello > /tmp/index.html && httpd -f -p 8080 -h /tmp",
                 nodeName="node-a")  # fmt: skip
    server["metadata"]["labels"] = labels
    server["spec"]["restartPolicy"] = "Always"
    await kube.create(server)
    await kube.create({
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": "echo", "namespace": namespace},
        "spec": {"selector": labels, "ports": [{"port": 80, "targetPort": 8080}]},
    })  # fmt: skip
    fetch = "for i in $(seq 30); do wget -q -O - http://echo/index.html && exit 0; sleep 1; done; exit 1"
    client = pod("client", namespace, BUSYBOX, fetch, nodeName="node-c")
    await kube.create(client)
    done = await finished(kube, namespace, "client", timeout=90)
    assert done["status"]["phase"] == "Succeeded", logs(kubectl, namespace, "client")
    # A first try may meet no route yet: kube-proxy writes a new Service's rules within a second.
    assert logs(kubectl, namespace, "client").splitlines()[-1] == "hello"


async def test_the_operator_image_runs_as_65532_and_runc_keeps_its_root_filesystem_read_only(
    kube: Kube, namespace: str, kubectl: Kubectl, real_cluster: LocalCluster, suite_image: Image
) -> None:
    real_cluster.load([NodeImage(suite_image.name, (suite_image.name,))])
    script = (
        "id -u; id -g; touch /opt/operator-suite/probe 2>&1; echo wrote=$?; touch /tmp/probe; echo tmp=$?"
    )
    manifest = pod(
        "operator-image", namespace, suite_image.name, script,
        securityContext=RESTRICTED,
        container={"securityContext": LOCKED_DOWN,
                   "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}]},
        volumes=[{"name": "tmp", "emptyDir": {}}],
    )  # fmt: skip
    await kube.create(manifest)
    await finished(kube, namespace, "operator-image")
    lines = logs(kubectl, namespace, "operator-image").splitlines()
    assert lines[:2] == ["65532", "65532"], lines
    assert "Read-only file system" in lines[2], lines
    assert lines[3:] == ["wrote=1", "tmp=0"], lines


async def test_a_memory_limit_is_enforced_by_the_kernel(kube: Kube, namespace: str) -> None:
    manifest = pod(
        "hog", namespace, BUSYBOX, "head -c 200m /dev/zero | tail > /dev/null",
        container={"resources": {"limits": {"memory": "32Mi"}}},
    )  # fmt: skip
    await kube.create(manifest)
    done = await finished(kube, namespace, "hog")
    (state,) = done["status"]["containerStatuses"]
    assert state["state"]["terminated"]["reason"] == "OOMKilled"


async def test_a_stopped_cluster_leaves_nothing_on_the_machine_even_with_a_frozen_pod(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    cluster = LocalCluster(tmp_path_factory.mktemp("one"), count=1)
    await asyncio.to_thread(cluster.start)
    assert cluster.plan is not None
    plan = cluster.plan
    try:
        async with Kube.connect(cluster.kubeconfig) as kube:
            await kube.create(pod("frozen", "default", BUSYBOX, "sleep 3600"))

            async def frozen() -> bool:
                try:
                    await cluster.faults(kube).freeze("default", "frozen")
                except FaultError:
                    return False  # not started yet
                return True

            await wait_until(frozen, timeout=60, what="the pod's container to be frozen")
    finally:
        await asyncio.to_thread(cluster.stop)
    assert leftovers(plan) == []


async def test_a_claim_gets_a_volume_on_its_pods_node_and_a_size_limited_one_fills_up(
    kube: Kube, namespace: str, kubectl: Kubectl
) -> None:
    for name, storage_class in (("plain", "standard"), ("small", SIZE_LIMITED_CLASS)):
        await kube.create(claim(name, namespace, storage_class, "8Mi"))
    script = (
        "echo kept > /plain/file && cat /plain/file; "
        "dd if=/dev/zero of=/small/fill bs=1M count=16 2>&1 | grep -o 'No space left on device'; "
        "df -k /small | tail -n 1"
    )
    manifest = pod(
        "writer", namespace, BUSYBOX, script, nodeSelector={"kubernetes.io/hostname": "node-b"},
        container={"volumeMounts": [{"name": n, "mountPath": f"/{n}"} for n in ("plain", "small")]},
        volumes=[{"name": n, "persistentVolumeClaim": {"claimName": n}} for n in ("plain", "small")],
    )  # fmt: skip
    await kube.create(manifest)
    done = await finished(kube, namespace, "writer", timeout=90)
    lines = logs(kubectl, namespace, "writer").splitlines()
    assert done["status"]["phase"] == "Succeeded", lines
    assert lines[0] == "kept"
    assert "No space left on device" in lines[1], lines
    assert lines[2].split()[1] == "8192", lines  # 8 MiB, in KiB blocks
    for name in ("plain", "small"):
        bound = await kube.get("v1", "PersistentVolumeClaim", name, namespace)
        assert bound is not None
        volume = await kube.get("v1", "PersistentVolume", bound["spec"]["volumeName"], None)
        assert volume is not None
        terms = volume["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"]
        assert terms[0]["matchExpressions"][0]["values"] == ["node-b"]


async def test_a_size_limited_claim_grown_is_seen_grown_by_the_pod_that_mounts_it(
    kube: Kube, namespace: str, kubectl: Kubectl
) -> None:
    """The size-limited class allows expansion, and the test kit's resizer grows its volumes in place
    (operator_testkit.nodes.resizer): a running pod's df shows the new size, with the files kept."""
    await kube.create(claim("growing", namespace, SIZE_LIMITED_CLASS, "8Mi"))
    script = "echo kept > /data/file; while true; do df -k /data | tail -n 1; cat /data/file; sleep 1; done"
    manifest = pod(
        "watcher", namespace, BUSYBOX, script,
        container={"volumeMounts": [{"name": "data", "mountPath": "/data"}]},
        volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": "growing"}}],
    )  # fmt: skip
    await kube.create(manifest)

    async def sees(kib: int) -> bool:
        lines = logs(kubectl, namespace, "watcher", check=False).splitlines()
        return len(lines) >= 2 and lines[-2].split()[1:2] == [str(kib)] and lines[-1] == "kept"

    await wait_until(lambda: sees(8192), timeout=90, interval=1, what="the pod to see its 8 MiB volume")
    await kube.patch(
        "v1",
        "PersistentVolumeClaim",
        "growing",
        namespace,
        {"spec": {"resources": {"requests": {"storage": "24Mi"}}}},
    )
    await wait_until(lambda: sees(24576), timeout=30, interval=1, what="the pod to see 24 MiB")

    async def claim_says_so() -> bool:
        grown = await kube.get_live("v1", "PersistentVolumeClaim", "growing", namespace)
        return ((grown or {}).get("status") or {}).get("capacity", {}).get("storage") == "24Mi"

    await wait_until(claim_says_so, timeout=30, what="the claim's status.capacity to say 24Mi")
