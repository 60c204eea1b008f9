"""The Monocle operator on real nodes: the seed sample's pods run on a real search engine, and a config
change's Job completes against it.

The engine is real: OpenSearch 2.19.6 built from Maven Central's jars
(:mod:`operator_testkit.nodes.opensearch`), loaded also under the Elasticsearch names the operator's
defaults ask for, since it answers Elasticsearch 7's API. Monocle cannot be had here, so its image is the
test kit's stand-in (:mod:`operator_testkit.nodes.standins`): real containers run by a real kubelet,
containerd and runc, as the operator's security contexts say, which serve their probes, reach the engine
through the operator's Services, read the config it mounts, and make real indices and documents there,
which the tests read back from the engine.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from monocle_operator.api.v1alpha1 import DEFAULT_ELASTIC_IMAGE, DEFAULT_IMAGE
from operator_core.kube import Kube
from operator_testkit.assertions import condition, wait_for_condition
from operator_testkit.fixtures import Kubectl, wait_until
from operator_testkit.nodes.cluster import LocalCluster
from operator_testkit.nodes.faults import NodeFaults
from operator_testkit.nodes.opensearch import ELASTICSEARCH_NAMES, OPENSEARCH_IMAGE, OPENSEARCH_VERSION
from operator_testkit.nodes.standins import MONOCLE_NAMES, MONOCLE_STANDIN, monocle_images
from operator_testkit.operators import OperatorProcess

API = "monocle.monocle.change-metrics.io/v1alpha1"
SAMPLE = "monocle_v1alpha1_monocle"


@pytest.fixture(scope="module")
def monocle_loaded(real_cluster: LocalCluster) -> None:
    """OpenSearch and the Monocle stand-in, loaded into the session's nodes."""
    real_cluster.load(monocle_images())


def test_the_engine_and_the_stand_in_are_loaded_under_the_operators_default_images() -> None:
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


async def engine_address(kube: Kube, namespace: str, pod: str) -> str:
    """The engine's HTTP address: its pod's, which this machine routes to."""
    found = await kube.get("v1", "Pod", pod, namespace)
    assert found is not None
    return f"http://{found['status']['podIP']}:9200"


async def engine_json(address: str, path: str) -> Any:
    async with aiohttp.ClientSession() as session, session.get(address + path) as response:
        assert response.status == 200, f"{path}: {response.status} {await response.text()}"
        return await response.json()


async def indices(address: str) -> list[str]:
    """The engine's indices by name, as ``_cat/indices`` lists them."""
    return sorted(row["index"] for row in await engine_json(address, "/_cat/indices?format=json"))


async def component_pod(kube: Kube, namespace: str, instance: str, component: str) -> str:
    labels = {"app.kubernetes.io/instance": instance, "app.kubernetes.io/component": component}
    (pod,) = await kube.list("v1", "Pod", namespace, labels=labels)
    return str(pod["metadata"]["name"])


async def test_the_seed_sample_runs_on_a_real_engine_and_a_config_change_runs_update_idents_against_it(
    kube: Kube,
    namespace: str,
    kubectl: Kubectl,
    samples: dict[str, list[dict[str, Any]]],
    faults: NodeFaults,
    monocle_loaded: None,
    monocle_operator: OperatorProcess,
) -> None:
    (sample,) = samples[SAMPLE]
    name = sample["metadata"]["name"]
    await kube.apply({**sample, "metadata": {**sample["metadata"], "namespace": namespace}})
    await wait_for_condition(kube, API, "Monocle", name, namespace, "Ready", "True", timeout=180)

    # The engine is a JVM running OpenSearch, as the uid the operator's pod asks for (runc sets it).
    engine = await component_pod(kube, namespace, name, "elastic")
    engine_pid = await faults.pid(namespace, engine)
    assert uid_of(engine_pid) == 1000
    command = await asyncio.to_thread(
        kubectl, "-n", namespace, "exec", engine, "--", "cat", "/proc/1/cmdline"
    )
    assert command.stdout.split("\0")[0] == "java", command.stdout
    assert "org.opensearch.bootstrap.OpenSearch" in command.stdout.split("\0"), command.stdout
    first = (await logs(kubectl, namespace, engine)).splitlines()[0]
    assert first.startswith(f"OpenSearch {OPENSEARCH_VERSION} from Maven Central's jars"), first
    # Monocle's components are its stand-in, saying so.
    for component in ("api", "crawler"):
        pod = await component_pod(kube, namespace, name, component)
        first = (await logs(kubectl, namespace, pod)).splitlines()[0]
        assert first.startswith("STAND-IN for Monocle"), first
        assert uid_of(await faults.pid(namespace, pod)) == 1001, component
    crawler_log = await logs(kubectl, namespace, await component_pod(kube, namespace, name, "crawler"))
    assert f"reached the API at http://{name}-api:8080" in crawler_log, "through the API's Service"
    # What the API wrote is in the engine: the sample's workspace index.
    address = await engine_address(kube, namespace, engine)
    assert "monocle.changes.1.demo" in await indices(address)
    # The engine's own health, as the operator asked it: a single node is green or yellow.
    healthy = condition(await kube.get(API, "Monocle", name, namespace) or {}, "EngineHealthy")
    assert healthy is not None
    assert (healthy["status"], healthy["reason"] in ("Green", "Yellow")) == ("True", True), healthy

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
    # The Job read the changed config the operator mounted, and reached the engine by its Service,
    # where its run is recorded, with the workspaces it read.
    assert "workspaces demo, openstack" in job_log, job_log
    assert f"reached Elasticsearch at http://{name}-elastic:9200" in job_log, job_log
    runs = await engine_json(address, "/monocle.janitor/_search")
    (run,) = [hit["_source"] for hit in runs["hits"]["hits"]]
    assert run["command"] == "update-idents"
    assert sorted(run["workspaces"]) == ["demo", "openstack"], run

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


async def test_the_stand_in_runs_with_a_read_only_root_as_any_non_root_uid_beside_the_engine(
    kube: Kube, namespace: str, monocle_loaded: None
) -> None:
    """Stricter than the operator asks of Monocle's pods: a uid the image does not name, and nothing
    writable. The engine beside it runs as the operator runs it (uid 1000, its data on a volume), and
    holds the index the stand-in made."""
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
                    "name": "opensearch",
                    "image": OPENSEARCH_IMAGE,
                    "imagePullPolicy": "Never",
                    "env": [
                        {"name": "discovery.type", "value": "single-node"},
                        {"name": "OPENSEARCH_JAVA_OPTS", "value": "-Xms256m -Xmx256m"},
                    ],
                    "securityContext": {**READ_ONLY, "runAsUser": 1000, "readOnlyRootFilesystem": False},
                    "volumeMounts": [{"name": "data", "mountPath": "/usr/share/opensearch/data"}],
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

    await wait_until(ready, timeout=90, interval=0.5, what="the pod to be Ready")
    pod = await kube.get("v1", "Pod", "stand-ins", namespace)
    assert pod is not None
    assert all(status["restartCount"] == 0 for status in pod["status"]["containerStatuses"])
    assert "monocle.changes.1.demo" in await indices(f"http://{pod['status']['podIP']}:9200")


async def test_a_change_of_engine_to_opensearch_recrawls_on_a_volume_of_its_own_and_keeps_the_old_one(
    kube: Kube, namespace: str, kubectl: Kubectl, monocle_loaded: None, monocle_operator: OperatorProcess
) -> None:
    """spec.elastic.engine from Elasticsearch (the default) to OpenSearch with onEngineChange Recrawl:
    the new engine runs upstream's image name in a StatefulSet of its own, the old one goes and its
    volume stays, Monocle's API makes the workspace's index again in the new engine, and an Event says
    what happened."""
    name = "engines"
    instance = {"apiVersion": API, "kind": "Monocle", "metadata": {"name": name, "namespace": namespace}}
    await kube.apply({**instance, "spec": {}})
    await wait_for_condition(kube, API, "Monocle", name, namespace, "Ready", "True", timeout=180)
    await kube.apply({**instance, "spec": {"elastic": {"engine": "OpenSearch", "onEngineChange": "Recrawl"}}})

    async def moved() -> bool:
        old = await kube.get("apps/v1", "StatefulSet", f"{name}-elastic", namespace)
        new = await kube.get("apps/v1", "StatefulSet", f"{name}-opensearch", namespace)
        return old is None and (new or {}).get("status", {}).get("readyReplicas") == 1

    await wait_until(
        moved, timeout=120, interval=1, what="the OpenSearch StatefulSet ready, the old one gone"
    )
    await wait_for_condition(kube, API, "Monocle", name, namespace, "Ready", "True", timeout=120)
    assert await kube.get("v1", "PersistentVolumeClaim", f"data-{name}-elastic-0", namespace) is not None
    engine = await kube.get("v1", "Pod", f"{name}-opensearch-0", namespace)
    assert engine is not None
    (container,) = engine["spec"]["containers"]
    assert (container["name"], container["image"]) == ("opensearch", "opensearchproject/opensearch:2.19.6")
    log = await logs(kubectl, namespace, f"{name}-opensearch-0")
    assert "-Xms512m, -Xmx512m" in log, "OPENSEARCH_JAVA_OPTS reached the JVM"
    address = await engine_address(kube, namespace, f"{name}-opensearch-0")

    async def index_made_again() -> bool:
        return "monocle.changes.1.demo" in await indices(address)

    await wait_until(index_made_again, timeout=60, interval=1, what="the API to make its index in OpenSearch")
    events = [e for e in await kube.list("v1", "Event", namespace) if e.get("reason") == "EngineChanged"]
    assert len(events) == 1, events
    assert f"volume data-{name}-elastic-0 is kept" in events[0]["message"], events[0]["message"]


async def test_a_red_index_makes_the_engine_unhealthy_and_the_instance_not_ready_until_it_is_gone(
    kube: Kube, namespace: str, monocle_loaded: None, monocle_operator: OperatorProcess
) -> None:
    """An index whose primary shard cannot be placed (it asks for a node that does not exist) turns the
    engine red: EngineHealthy False naming the index, a Warning, Ready False; the index deleted, the
    engine is healthy and the instance Ready again, with no Kubernetes object changed meanwhile."""
    name = "red"
    await kube.apply(
        {"apiVersion": API, "kind": "Monocle", "metadata": {"name": name, "namespace": namespace}}
    )
    await wait_for_condition(kube, API, "Monocle", name, namespace, "Ready", "True", timeout=180)
    address = await engine_address(kube, namespace, f"{name}-elastic-0")
    placed_nowhere = {"settings": {"index.routing.allocation.require._name": "no-such-node"}}
    async with aiohttp.ClientSession() as session:
        async with session.put(f"{address}/stranded?wait_for_active_shards=0", json=placed_nowhere) as made:
            assert made.status == 200, await made.text()
        await wait_for_condition(kube, API, "Monocle", name, namespace, "EngineHealthy", "False", timeout=60)
        instance = await kube.get(API, "Monocle", name, namespace)
        unhealthy = condition(instance or {}, "EngineHealthy")
        assert unhealthy is not None
        assert unhealthy["reason"] == "Red", unhealthy
        assert "(red: stranded)" in unhealthy["message"], unhealthy
        ready = condition(instance or {}, "Ready")
        assert ready is not None
        assert (ready["status"], ready["reason"]) == ("False", "Red"), ready

        async def warned() -> list[dict[str, Any]]:
            return [e for e in await kube.list("v1", "Event", namespace) if e.get("reason") == "EngineRed"]

        # The Event is posted beside the status write, and may reach the API server just after it.
        warnings: Any = await wait_until(warned, timeout=30, interval=0.5, what="the EngineRed Event")
        assert [e["type"] for e in warnings] == ["Warning"], warnings
        async with session.delete(f"{address}/stranded") as deleted:
            assert deleted.status == 200, await deleted.text()
    await wait_for_condition(kube, API, "Monocle", name, namespace, "Ready", "True", timeout=60)


async def test_an_image_change_rolls_the_engine_first_then_the_api_and_the_crawler(
    kube: Kube, namespace: str, monocle_loaded: None, monocle_operator: OperatorProcess
) -> None:
    """Both images changed in one edit: the engine's pod runs its new image and is ready before the API's
    Deployment is given the new Monocle image; meanwhile ApiReady says WaitingForEngine."""
    name = "order"
    instance = {"apiVersion": API, "kind": "Monocle", "metadata": {"name": name, "namespace": namespace}}
    await kube.apply({**instance, "spec": {}})
    await wait_for_condition(kube, API, "Monocle", name, namespace, "Ready", "True", timeout=180)
    new_engine, new_monocle = ELASTICSEARCH_NAMES[1], MONOCLE_NAMES[1]
    await kube.apply({**instance, "spec": {"image": new_monocle, "elastic": {"image": new_engine}}})
    seen: dict[str, float] = {}
    reasons: set[str] = set()

    async def rolled() -> bool:
        now = asyncio.get_running_loop().time()
        pod = await kube.get("v1", "Pod", f"{name}-elastic-0", namespace)
        ready = condition(pod or {}, "Ready")
        if (
            pod
            and pod["spec"]["containers"][0]["image"] == new_engine
            and ready
            and ready["status"] == "True"
        ):
            seen.setdefault("engine ready", now)
        api = await kube.get("apps/v1", "Deployment", f"{name}-api", namespace)
        if api and api["spec"]["template"]["spec"]["containers"][0]["image"] == new_monocle:
            seen.setdefault("api given the new image", now)
        api_ready = condition(await kube.get(API, "Monocle", name, namespace) or {}, "ApiReady")
        reasons.add(str((api_ready or {}).get("reason")))
        return len(seen) == 2

    await wait_until(rolled, timeout=180, interval=0.5, what="the engine, then the API, on their new images")
    assert seen["engine ready"] <= seen["api given the new image"], seen
    assert "WaitingForEngine" in reasons, reasons
    await wait_for_condition(kube, API, "Monocle", name, namespace, "Ready", "True", timeout=120)
    crawler = await kube.get("apps/v1", "Deployment", f"{name}-crawler", namespace)
    assert crawler is not None
    assert crawler["spec"]["template"]["spec"]["containers"][0]["image"] == new_monocle


async def test_janitor_tasks_run_once_as_jobs_and_their_effect_is_read_back_from_the_engine(
    kube: Kube, namespace: str, monocle_loaded: None, monocle_operator: OperatorProcess
) -> None:
    """MonocleTasks: WipeCrawlerData deletes one crawler's documents and no other; SetCrawlerCommitDate
    writes the crawler's date; each runs once (its Job deleted after, none is made again); a crawler not
    in config.yaml fails the task at once, with no Job."""
    name = "janitor"
    config = "workspaces:\n  - name: demo\n    crawlers:\n      - name: gerrit\n      - name: github\n"
    await kube.apply({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "janitor-config", "namespace": namespace}, "data": {"config.yaml": config},
    })  # fmt: skip
    await kube.apply({
        "apiVersion": API, "kind": "Monocle", "metadata": {"name": name, "namespace": namespace},
        "spec": {"configMapRef": {"name": "janitor-config"}},
    })  # fmt: skip
    await wait_for_condition(kube, API, "Monocle", name, namespace, "Ready", "True", timeout=180)
    address = await engine_address(kube, namespace, f"{name}-elastic-0")
    index = f"{address}/monocle.changes.1.demo"
    async with aiohttp.ClientSession() as session:
        for number, crawler in enumerate(("gerrit", "gerrit", "github")):
            document = {"crawler_name": crawler, "title": f"change {number}"}
            async with session.put(f"{index}/_doc/change-{number}?refresh=true", json=document) as put:
                assert put.status in (200, 201), await put.text()

    def monocle_task(task_name: str, **spec: str) -> dict[str, Any]:
        return {
            "apiVersion": API, "kind": "MonocleTask", "metadata": {"name": task_name, "namespace": namespace},
            "spec": {"monocle": name, "workspace": "demo", "crawler": "gerrit", **spec},
        }  # fmt: skip

    async def ended(task_name: str) -> dict[str, Any]:
        async def final() -> dict[str, Any] | None:
            found = await kube.get(API, "MonocleTask", task_name, namespace)
            status = (found or {}).get("status") or {}
            return status if status.get("phase") in ("Succeeded", "Failed") else None

        status: dict[str, Any] = await wait_until(
            final, timeout=120, interval=1, what=f"task {task_name} to end"
        )
        return status

    await kube.apply(monocle_task("wipe-gerrit", command="WipeCrawlerData"))
    wiped = await ended("wipe-gerrit")
    assert wiped["phase"] == "Succeeded", wiped
    assert wiped["job"] == "wipe-gerrit"
    left = await engine_json(address, "/monocle.changes.1.demo/_search?size=10")
    assert sorted(hit["_source"]["crawler_name"] for hit in left["hits"]["hits"]) == ["github"]

    await kube.apply(monocle_task("replay-gerrit", command="SetCrawlerCommitDate", commitDate="2024-01-31"))
    assert (await ended("replay-gerrit"))["phase"] == "Succeeded"
    metadata = await engine_json(address, "/monocle.changes.1.demo/_doc/crawler-gerrit")
    assert metadata["_source"]["crawler_metadata"] == {"crawler": "gerrit", "last_commit_at": "2024-01-31"}

    # A crawler config.yaml does not name: said at once, and nothing runs.
    await kube.apply(monocle_task("wipe-gitlab", command="WipeCrawlerData", crawler="gitlab"))
    refused = await ended("wipe-gitlab")
    assert refused["phase"] == "Failed", refused
    assert "crawler gitlab is not in workspace demo" in refused["message"], refused
    assert await kube.get("batch/v1", "Job", "wipe-gitlab", namespace) is None

    # Once: the finished task's Job deleted, none is made again.
    await kube.delete("batch/v1", "Job", "wipe-gerrit", namespace)
    await asyncio.sleep(5)
    assert await kube.get("batch/v1", "Job", "wipe-gerrit", namespace) is None
    assert (await ended("wipe-gerrit"))["phase"] == "Succeeded"
    runs = await engine_json(address, "/monocle.janitor/_search?size=10")
    commands = sorted(hit["_source"]["command"] for hit in runs["hits"]["hits"])
    assert commands == ["set-crawler-commit-date", "wipe-crawler-data"], commands
    reasons = [e.get("reason") for e in await kube.list("v1", "Event", namespace)]
    assert reasons.count("TaskSucceeded") == 2, reasons
    assert reasons.count("TaskFailed") == 1, reasons
