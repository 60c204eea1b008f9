"""The Monocle operator on real nodes: the seed sample's pods run, and a config change's Job completes.

Monocle and Elasticsearch cannot be had here, so their images are the test kit's stand-ins
(:mod:`operator_testkit.nodes.standins`), loaded under the names the operator asks for: real containers
run by a real kubelet, containerd and runc, as the operator's security contexts say, which serve their
probes, reach each other through the operator's Services and read the config it mounts, and store
nothing. What this proves is the operator's side: the pods it asks for are scheduled, started and
probed, its update-idents Job runs to completion, so the real Job controller marks it Complete.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from monocle_operator.api.v1alpha1 import DEFAULT_ELASTIC_IMAGE, DEFAULT_IMAGE
from operator_core.kube import Kube
from operator_testkit.assertions import condition, wait_for_condition
from operator_testkit.fixtures import Kubectl, wait_until
from operator_testkit.nodes.cluster import LocalCluster
from operator_testkit.nodes.faults import NodeFaults
from operator_testkit.nodes.standins import (
    ELASTICSEARCH_NAMES,
    ELASTICSEARCH_STANDIN,
    MONOCLE_NAMES,
    MONOCLE_STANDIN,
    monocle_standins,
)
from operator_testkit.operators import OperatorProcess

API = "monocle.monocle.change-metrics.io/v1alpha1"
SAMPLE = "monocle_v1alpha1_monocle"


@pytest.fixture(scope="module")
def monocle_images(real_cluster: LocalCluster) -> None:
    """The stand-ins for Elasticsearch and Monocle, loaded into the session's nodes."""
    real_cluster.load(monocle_standins())


def test_the_stand_ins_are_loaded_under_the_operators_default_images() -> None:
    assert DEFAULT_IMAGE in MONOCLE_NAMES
    assert DEFAULT_ELASTIC_IMAGE in ELASTICSEARCH_NAMES


def uid_of(pid: int) -> int:
    status = dict(line.split(":\t", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines())
    real, effective, *_ = (int(word) for word in status["Uid"].split())
    assert real == effective
    return real


async def logs(kubectl: Kubectl, namespace: str, pod: str) -> str:
    done = await asyncio.to_thread(kubectl, "-n", namespace, "logs", pod)
    return done.stdout


async def component_pod(kube: Kube, namespace: str, instance: str, component: str) -> str:
    labels = {"app.kubernetes.io/instance": instance, "app.kubernetes.io/component": component}
    (pod,) = await kube.list("v1", "Pod", namespace, labels=labels)
    return str(pod["metadata"]["name"])


async def test_the_seed_sample_runs_on_the_stand_ins_and_a_config_change_runs_update_idents_to_completion(
    kube: Kube,
    namespace: str,
    kubectl: Kubectl,
    samples: dict[str, list[dict[str, Any]]],
    faults: NodeFaults,
    monocle_images: None,
    monocle_operator: OperatorProcess,
) -> None:
    (sample,) = samples[SAMPLE]
    name = sample["metadata"]["name"]
    await kube.apply({**sample, "metadata": {**sample["metadata"], "namespace": namespace}})
    await wait_for_condition(kube, API, "Monocle", name, namespace, "Ready", "True", timeout=180)

    # Each component is its stand-in, saying so, as the uid the operator's pod asks for (runc sets it).
    for component, stands_in_for, uid in (
        ("elastic", "Elasticsearch", 1000),
        ("api", "Monocle", 1001),
        ("crawler", "Monocle", 1001),
    ):
        pod = await component_pod(kube, namespace, name, component)
        first = (await logs(kubectl, namespace, pod)).splitlines()[0]
        assert first.startswith(f"STAND-IN for {stands_in_for}"), first
        assert uid_of(await faults.pid(namespace, pod)) == uid, component
    elastic_log = await logs(kubectl, namespace, await component_pod(kube, namespace, name, "elastic"))
    assert "data in /usr/share/elasticsearch/data (new)" in elastic_log, "its claim is writable by 1000"
    crawler_log = await logs(kubectl, namespace, await component_pod(kube, namespace, name, "crawler"))
    assert f"reached the API at http://{name}-api:8080" in crawler_log, "through the API's Service"

    await kube.apply(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": f"{name}-api", "namespace": namespace},
            "data": {"config.yaml": "workspaces:\n  - name: demo\n  - name: openstack\n"},
        },
        force=True,
    )
    labels = {"app.kubernetes.io/instance": name, "app.kubernetes.io/component": "update-idents"}

    async def completed_job() -> dict[str, Any] | None:
        for job in await kube.list("batch/v1", "Job", namespace, labels=labels):
            found = condition(job, "Complete")
            if found and found["status"] == "True":
                return job
        return None

    job = await wait_until(completed_job, timeout=120, interval=1, what="the update-idents Job to complete")
    assert isinstance(job, dict)
    assert job["status"]["succeeded"] == 1
    (job_pod,) = await kube.list("v1", "Pod", namespace, labels={"job-name": job["metadata"]["name"]})
    job_log = await logs(kubectl, namespace, job_pod["metadata"]["name"])
    assert job_log.startswith("STAND-IN for Monocle"), job_log
    # The Job read the changed config the operator mounted, and reached Elasticsearch by its Service.
    assert "workspaces demo, openstack" in job_log, job_log
    assert f"reached Elasticsearch at http://{name}-elastic:9200" in job_log, job_log

    async def recorded() -> bool:
        instance = await kube.get(API, "Monocle", name, namespace)
        return ((instance or {}).get("status") or {}).get("updateIdentsJob") == job["metadata"]["name"]

    await wait_until(recorded, timeout=30, interval=0.5, what="the Job recorded in the instance's status")


READ_ONLY = {
    "runAsNonRoot": True,
    "runAsUser": 4242,
    "runAsGroup": 4242,
    "readOnlyRootFilesystem": True,
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "seccompProfile": {"type": "RuntimeDefault"},
}


async def test_the_stand_ins_run_with_a_read_only_root_as_any_non_root_uid(
    kube: Kube, namespace: str, monocle_images: None
) -> None:
    """Stricter than the operator asks: a uid neither image names, and nothing writable but the data."""
    await kube.apply({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "config", "namespace": namespace},
        "data": {"config.yaml": "workspaces:\n  - name: demo\n"},
    })  # fmt: skip
    health = "/_cluster/health?wait_for_status=yellow&timeout=2s"
    await kube.apply({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "stand-ins", "namespace": namespace},
        "spec": {
            "securityContext": {"fsGroup": 4242},
            "volumes": [
                {"name": "data", "emptyDir": {}},
                {"name": "config", "configMap": {"name": "config"}},
            ],
            "containers": [
                {
                    "name": "elasticsearch",
                    "image": ELASTICSEARCH_STANDIN,
                    "imagePullPolicy": "Never",
                    "securityContext": READ_ONLY,
                    "volumeMounts": [{"name": "data", "mountPath": "/usr/share/elasticsearch/data"}],
                    "readinessProbe": {"httpGet": {"path": health, "port": 9200}, "periodSeconds": 1},
                },
                {
                    "name": "api",
                    "image": MONOCLE_STANDIN,
                    "imagePullPolicy": "Never",
                    "command": ["monocle", "api"],
                    "env": [
                        {"name": "MONOCLE_ELASTIC_URL", "value": "http://127.0.0.1:9200"},
                        {"name": "MONOCLE_CONFIG", "value": "/etc/monocle/config.yaml"},
                    ],
                    "securityContext": READ_ONLY,
                    "volumeMounts": [{"name": "config", "mountPath": "/etc/monocle", "readOnly": True}],
                    "readinessProbe": {"httpGet": {"path": "/health", "port": 8080}, "periodSeconds": 1},
                },
            ],
        },
    })  # fmt: skip

    async def ready() -> bool:
        pod = await kube.get("v1", "Pod", "stand-ins", namespace)
        found = condition(pod or {}, "Ready")
        return bool(found and found["status"] == "True")

    await wait_until(ready, timeout=60, interval=0.5, what="the stand-ins' pod to be Ready")
    pod = await kube.get("v1", "Pod", "stand-ins", namespace)
    assert pod is not None
    assert all(status["restartCount"] == 0 for status in pod["status"]["containerStatuses"])
