"""The Typesense operator, as its own ServiceAccount, on the real control plane: children, drift, status."""

from __future__ import annotations

import base64
import time
import uuid
from typing import Any

import pytest

from operator_core.kube import Kube
from operator_testkit import assertions
from operator_testkit.assertions import (
    all_gone,
    events_for,
    operator_requests,
    reconciles_counted,
    settle,
    wait_for_object,
    wait_for_reconcile,
)
from operator_testkit.controlplane import ControlPlane
from operator_testkit.fixtures import Kubectl, wait_until
from operator_testkit.operators import OperatorProcess
from operator_testkit.volumes import static_storage
from samples import sample_spec

pytestmark = pytest.mark.usefixtures("typesense_operator")

API = "ts.opentelekomcloud.com/v1alpha1"
# Just enough of Prometheus Operator's CRD for the API server to serve the kind.
POD_MONITOR_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "podmonitors.monitoring.coreos.com"},
    "spec": {
        "group": "monitoring.coreos.com",
        "names": {
            "kind": "PodMonitor",
            "listKind": "PodMonitorList",
            "plural": "podmonitors",
            "singular": "podmonitor",
        },
        "scope": "Namespaced",
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
                },
            }
        ],
    },
}
OPERATOR_USER = "system:serviceaccount:typesense-system:typesense-operator"
KOPF_FINALIZER = "ts.opentelekomcloud.com/finalizer"
"""What kopf's daemons put on every cluster, before the watch caches started the loops (decision 20)."""
SEED_SAMPLE = "ts_v1alpha1_typesensecluster_opentelekomcloud"
SEED_SAMPLE_SPEC = sample_spec(SEED_SAMPLE, "TypesenseCluster")


def cluster(namespace: str, spec: dict[str, Any], name: str = "cluster-1") -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "TypesenseCluster",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


async def wait_for_condition(
    kube: Kube, namespace: str, condition_type: str, status: str, reason: str | None = None
) -> dict[str, Any]:
    """A condition of cluster-1, once it has that status (and reason)."""
    return await assertions.wait_for_condition(
        kube, API, "TypesenseCluster", "cluster-1", namespace, condition_type, status, reason
    )


async def user_key_secret(kube: Kube, namespace: str, name: str = "typesense-common-bootstrap-key") -> None:
    key = base64.b64encode(b"IwiToBrqXLvXy2M0mSKXOhktvQTcuVRZ1sS9DKlECm0QpAOwGXhjuHUbKBq6z7eI").decode()
    await kube.create(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": name, "namespace": namespace},
            "data": {"typesense-api-key": key},
        }
    )


async def apply_unchanged(kube: Kube, documents: list[dict[str, Any]], namespace: str) -> None:
    for document in documents:
        await kube.apply({**document, "metadata": {**document["metadata"], "namespace": namespace}})


async def test_seed_sample_applies_unchanged_and_its_key_mismatch_is_reported(
    kube: Kube, namespace: str, samples: dict[str, list[dict[str, Any]]]
) -> None:
    await apply_unchanged(kube, samples[SEED_SAMPLE], namespace)
    missing = await wait_for_condition(kube, namespace, "AdminKeyReady", "False", "SecretNotFound")
    assert "typesense-common-bootstrap-key" in missing["message"]
    ready = await wait_for_condition(kube, namespace, "Ready", "False", "QuorumNotReady")
    assert "AdminKeyReady" in ready["message"]
    (warning,) = await wait_until(lambda: events_for(kube, namespace, "AdminKeyMissing"), what="warning")  # type: ignore[misc]
    assert warning["type"] == "Warning"
    assert await kube.get("apps/v1", "StatefulSet", "cluster-1-sts", namespace) is None, (
        "nothing may use a wrong key"
    )

    await user_key_secret(kube, namespace)
    sts = await wait_for_object(kube, "apps/v1", "StatefulSet", "cluster-1-sts", namespace)
    assert sts["spec"]["replicas"] == 3
    assert sts["spec"]["serviceName"] == "cluster-1-sts-svc"
    nodes = await wait_for_object(kube, "v1", "ConfigMap", "cluster-1-nodeslist", namespace)
    assert nodes["data"]["nodes"].split(",")[2] == "cluster-1-sts-2.cluster-1-sts-svc:8107:8108"
    headless = await wait_for_object(kube, "v1", "Service", "cluster-1-sts-svc", namespace)
    assert headless["spec"]["clusterIP"] == "None"
    assert headless["spec"]["publishNotReadyAddresses"] is True
    client = await wait_for_object(kube, "v1", "Service", "cluster-1-svc", namespace)
    assert client["spec"]["clusterIP"].startswith("127.")
    for kind_name in (
        ("networking.k8s.io/v1", "Ingress", "cluster-1-reverse-proxy-ingress"),
        ("apps/v1", "Deployment", "cluster-1-reverse-proxy"),
        ("v1", "ConfigMap", "cluster-1-reverse-proxy-config"),
        ("v1", "Service", "cluster-1-reverse-proxy-svc"),
        ("batch/v1", "CronJob", "cluster-1-scraper-docusaurus-example-com"),
    ):
        await wait_for_object(kube, *kind_name, namespace)
    assert await kube.get("v1", "Secret", "cluster-1-admin-key", namespace) is None, "the user's key is used"
    await wait_for_condition(kube, namespace, "AdminKeyReady", "True")
    ready = await wait_for_condition(kube, namespace, "Ready", "Unknown", "QuorumNotReady")
    assert ready["message"].startswith("no node has answered yet"), (
        "without a kubelet no pod runs: no node has ever answered, so nothing is known to be wrong"
    )
    assert await kube.get("policy/v1", "PodDisruptionBudget", "cluster-1-pdb", namespace) is None, (
        "no node was ever ready: no quorum for a disruption budget to guard yet"
    )
    assert not await events_for(kube, namespace, "Created"), "a new cluster's children are not news"


async def test_older_seed_sample_applies_unchanged_with_a_generated_key(
    kube: Kube, namespace: str, samples: dict[str, list[dict[str, Any]]]
) -> None:
    await apply_unchanged(kube, samples["ts_v1alpha1_typesensecluster_aws"], namespace)
    await wait_for_object(kube, "v1", "Secret", "cluster-1-admin-key", namespace)
    sts = await wait_for_object(kube, "apps/v1", "StatefulSet", "cluster-1-sts", namespace)
    (claim,) = sts["spec"]["volumeClaimTemplates"]
    assert claim["spec"]["storageClassName"] == "gp2"


async def test_generated_key_is_created_once_and_never_replaced(
    kube: Kube, namespace: str, typesense_operator: OperatorProcess
) -> None:
    await kube.apply(cluster(namespace, {"image": "typesense/typesense:27.1"}))
    secret = await wait_for_object(kube, "v1", "Secret", "cluster-1-admin-key", namespace)
    key = secret["data"]["typesense-api-key"]
    assert len(base64.b64decode(key)) == 48
    await kube.apply(cluster(namespace, {"image": "typesense/typesense:27.1", "replicas": 5}))
    await wait_until(
        lambda: _sts_replicas(kube, namespace, 5), what="the StatefulSet to follow spec.replicas"
    )
    await wait_until(lambda: events_for(kube, namespace, "Updated"), what="an Updated Event")
    assert base64.b64decode(key).decode() not in repr(await kube.list("v1", "Event", namespace))
    again = await kube.get("v1", "Secret", "cluster-1-admin-key", namespace)
    assert again is not None
    assert again["data"]["typesense-api-key"] == key
    status = (await kube.get(API, "TypesenseCluster", "cluster-1", namespace) or {}).get("status")
    plain = base64.b64decode(key).decode()
    assert plain not in repr(status)
    assert plain not in typesense_operator.log(), (
        "the operator's log (at debug level) must never hold the key"
    )


async def _sts_replicas(kube: Kube, namespace: str, replicas: int) -> bool:
    sts = await kube.get("apps/v1", "StatefulSet", "cluster-1-sts", namespace)
    return sts is not None and sts["spec"]["replicas"] == replicas


async def test_children_deleted_or_edited_by_hand_are_restored(
    kube: Kube, namespace: str, control_plane: ControlPlane
) -> None:
    await kube.apply(cluster(namespace, {"image": "typesense/typesense:27.1"}))
    await wait_for_object(kube, "v1", "Service", "cluster-1-svc", namespace)
    nodes = await wait_for_object(kube, "v1", "ConfigMap", "cluster-1-nodeslist", namespace)
    await kube.delete("v1", "Service", "cluster-1-svc", namespace)
    edited = {**nodes, "data": {"nodes": "someone-else:1:2"}}
    edited["metadata"] = {"name": "cluster-1-nodeslist", "namespace": namespace}
    async with Kube.connect(control_plane.kubeconfig, field_manager="hand-edit") as other:
        await other.apply(edited, force=True)
    await wait_for_object(kube, "v1", "Service", "cluster-1-svc", namespace)
    (created,) = await wait_until(lambda: events_for(kube, namespace, "Created"), what="event")  # type: ignore[misc]
    assert created["message"] == "created Service cluster-1-svc", "made again: someone deleted it"

    async def nodes_restored() -> bool:
        current = await kube.get("v1", "ConfigMap", "cluster-1-nodeslist", namespace)
        return current is not None and current["data"]["nodes"].startswith("cluster-1-sts-0.")

    await wait_until(nodes_restored, what="the nodes list to be restored")


async def test_spec_changes_propagate_and_removed_parts_are_pruned(kube: Kube, namespace: str) -> None:
    await user_key_secret(kube, namespace)
    await kube.apply(cluster(namespace, SEED_SAMPLE_SPEC))
    await wait_for_object(kube, "batch/v1", "CronJob", "cluster-1-scraper-docusaurus-example-com", namespace)
    changed = {
        **SEED_SAMPLE_SPEC,
        "image": "typesense/typesense:28.0",
        "replicas": 5,
        "scrapers": [],
        "ingress": {**SEED_SAMPLE_SPEC["ingress"], "referer": "docs.example.de"},
    }
    await kube.apply(cluster(namespace, changed))

    async def propagated() -> bool:
        sts = await kube.get("apps/v1", "StatefulSet", "cluster-1-sts", namespace)
        nodes = await kube.get("v1", "ConfigMap", "cluster-1-nodeslist", namespace)
        proxy = await kube.get("v1", "ConfigMap", "cluster-1-reverse-proxy-config", namespace)
        cron = await kube.get("batch/v1", "CronJob", "cluster-1-scraper-docusaurus-example-com", namespace)
        return bool(
            sts
            and sts["spec"]["template"]["spec"]["containers"][0]["image"] == "typesense/typesense:28.0"
            and sts["spec"]["replicas"] == 5
            and nodes
            and len(nodes["data"]["nodes"].split(",")) == 5
            and proxy
            and "valid_referers server_names docs.example.de;" in proxy["data"]["nginx.conf"]
            and cron is None
        )

    await wait_until(propagated, what="image, replicas, referer and scraper removal to propagate")
    without_ingress = {k: v for k, v in changed.items() if k != "ingress"}
    await kube.apply(cluster(namespace, without_ingress))

    async def ingress_gone() -> bool:
        return (
            await kube.get("networking.k8s.io/v1", "Ingress", "cluster-1-reverse-proxy-ingress", namespace)
            is None
        )

    await wait_until(ingress_gone, what="the Ingress to be pruned")
    assert await events_for(kube, namespace, "Deleted")


async def test_invalid_scraper_config_is_reported_not_deployed(kube: Kube, namespace: str) -> None:
    spec = {
        "image": "typesense/typesense:27.1",
        "scrapers": [{"name": "broken", "image": "i", "config": "{not json", "schedule": "0 * * * *"}],
    }
    await kube.apply(cluster(namespace, spec))
    invalid = await wait_for_condition(kube, namespace, "ConfigurationValid", "False", "InvalidScraperConfig")
    assert "scraper broken: config is not valid JSON" in invalid["message"]
    assert await wait_until(lambda: events_for(kube, namespace, "InvalidConfiguration"), what="warning")
    assert await kube.get("batch/v1", "CronJob", "cluster-1-scraper-broken", namespace) is None


async def test_pod_monitor_waits_for_its_crd_with_a_warning(kube: Kube, namespace: str) -> None:
    spec = {"image": "typesense/typesense:27.1", "metrics": {"release": "promstack"}}
    await kube.apply(cluster(namespace, spec))
    missing = await wait_for_condition(kube, namespace, "MetricsReady", "False", "PodMonitorCRDMissing")
    assert "PodMonitor CRD" in missing["message"]
    (warning,) = await wait_until(
        lambda: events_for(kube, namespace, "PodMonitorUnavailable"), what="warning"
    )  # type: ignore[misc]
    assert warning["type"] == "Warning"
    sts = await wait_for_object(kube, "apps/v1", "StatefulSet", "cluster-1-sts", namespace)
    assert [c["name"] for c in sts["spec"]["template"]["spec"]["containers"]] == [
        "typesense",
        "metrics-exporter",
    ]

    # Prometheus Operator arrives: the PodMonitor follows, without a restart of the operator.
    await kube.apply(POD_MONITOR_CRD)
    try:
        monitor = await wait_for_object(
            kube, "monitoring.coreos.com/v1", "PodMonitor", "cluster-1-podmonitor", namespace
        )
        assert monitor["metadata"]["labels"]["release"] == "promstack"
        assert monitor["spec"]["podMetricsEndpoints"][0]["port"] == "metrics"
        await wait_for_condition(kube, namespace, "MetricsReady", "True", "PodMonitorApplied")
    finally:
        await kube.delete(
            "apiextensions.k8s.io/v1", "CustomResourceDefinition", "podmonitors.monitoring.coreos.com"
        )


async def test_steady_state_reconcile_makes_no_request_at_all(
    kube: Kube,
    namespace: str,
    control_plane: ControlPlane,
    kubectl: Kubectl,
    typesense_operator: OperatorProcess,
) -> None:
    """Every read comes from the watch caches and nothing is written when nothing changed: zero requests."""
    # Quantities as people write them: the API server stores 500m, 1Gi, 250m and 512Mi instead.
    resources = {"limits": {"cpu": 0.5, "memory": "1024Mi"}, "requests": {"cpu": "0.25", "memory": "0.5Gi"}}
    spec = {"image": "typesense/typesense:27.1", "resources": resources, "storage": {"size": "1024Mi"}}
    await kube.apply(cluster(namespace, spec))
    await wait_for_condition(kube, namespace, "ChildrenApplied", "True")
    statefulset = await kube.get("apps/v1", "StatefulSet", "cluster-1-sts", namespace)
    assert statefulset is not None
    (container, *_) = statefulset["spec"]["template"]["spec"]["containers"]
    assert container["resources"]["limits"] == {"cpu": "500m", "memory": "1Gi"}

    # Let the first reconciles settle (status, Events), then wake the loop with a change that asks nothing.
    settled = await settle(control_plane, OPERATOR_USER, namespace)
    poked_at = time.time()
    before = await reconciles_counted(typesense_operator, at_or_after=poked_at)
    kubectl(
        "annotate",
        "configmap/cluster-1-nodeslist",
        "-n",
        namespace,
        f"test.operator-suite.io/poke={uuid.uuid4().hex}",
    )
    await wait_for_reconcile(typesense_operator, more_than=before, since=time.time())
    requests = operator_requests(control_plane, OPERATOR_USER, namespace)[settled:]
    assert requests == [], [(e["verb"], e["objectRef"]) for e in requests]


async def test_no_finalizer_is_written_and_an_older_versions_kopf_finalizer_is_let_go(
    kube: Kube, namespace: str, typesense_operator: OperatorProcess
) -> None:
    """A cluster whose children all have it as their owner carries no finalizer: nothing is written
    before its children. Clusters an older version reconciled carry kopf's finalizer: it goes, from a
    cluster that lives and from one deleted while the operator was down (which it held until now)."""
    spec = {"image": "typesense/typesense:27.1", "replicas": 1, "storage": {"size": "100Mi"}}

    def older(name: str) -> dict[str, Any]:
        made = cluster(namespace, spec, name)
        made["metadata"]["finalizers"] = [KOPF_FINALIZER]
        return made

    typesense_operator.stop()
    try:
        await kube.create(older("reconciled-before"))
        await kube.create(older("deleted-while-down"))
        await kube.delete(API, "TypesenseCluster", "deleted-while-down", namespace)
        held = await kube.get_live(API, "TypesenseCluster", "deleted-while-down", namespace)
        assert held is not None
        assert held["metadata"].get("deletionTimestamp"), "kopf's finalizer holds it"
    finally:
        typesense_operator.start()
    await kube.apply(cluster(namespace, spec))

    async def let_go() -> bool:
        gone = await kube.get_live(API, "TypesenseCluster", "deleted-while-down", namespace) is None
        kept = await kube.get_live(API, "TypesenseCluster", "reconciled-before", namespace)
        return gone and kept is not None and not kept["metadata"].get("finalizers")

    await wait_until(let_go, timeout=30, what="kopf's old finalizer removed from both clusters")
    await wait_for_condition(kube, namespace, "ChildrenApplied", "True")
    new = await kube.get_live(API, "TypesenseCluster", "cluster-1", namespace)
    assert new is not None
    assert not new["metadata"].get("finalizers")
    assert "Traceback" not in typesense_operator.log()


async def test_deleting_the_cluster_removes_children_and_keeps_volumes(
    kube: Kube, namespace: str, typesense_operator: OperatorProcess
) -> None:
    await kube.apply(cluster(namespace, {"image": "typesense/typesense:27.1"}))
    await wait_for_object(kube, "apps/v1", "StatefulSet", "cluster-1-sts", namespace)

    async def claims() -> list[dict[str, Any]]:
        found = await kube.list("v1", "PersistentVolumeClaim", namespace)
        return found if len(found) == 3 else []

    await wait_until(claims, what="the StatefulSet controller to create 3 PVCs")
    await kube.delete(API, "TypesenseCluster", "cluster-1", namespace)

    children = (
        ("apps/v1", "StatefulSet", "cluster-1-sts"),
        ("v1", "ConfigMap", "cluster-1-nodeslist"),
        ("v1", "Service", "cluster-1-svc"),
        ("v1", "Secret", "cluster-1-admin-key"),
    )
    await wait_until(
        lambda: all_gone(kube, namespace, children), timeout=60, what="garbage collection of the children"
    )
    assert len(await kube.list("v1", "PersistentVolumeClaim", namespace)) == 3, "PVCs must be retained"
    assert "Traceback" not in typesense_operator.log()


async def test_a_change_of_a_pod_wakes_its_cluster_and_costs_no_request(
    kube: Kube,
    namespace: str,
    control_plane: ControlPlane,
    kubectl: Kubectl,
    typesense_operator: OperatorProcess,
) -> None:
    """A cluster waiting for its pods has no timer (no pod has an address to probe): their changes wake it."""
    await kube.apply(cluster(namespace, {"image": "typesense/typesense:27.1"}))
    pod = await wait_for_object(kube, "v1", "Pod", "cluster-1-sts-0", namespace)
    assert not (pod.get("status") or {}).get("podIP")  # no nodes here: the pods stay Pending
    settled = await settle(control_plane, OPERATOR_USER, namespace)
    before = await reconciles_counted(typesense_operator, at_or_after=time.time())
    kubectl(
        "annotate", "pod/cluster-1-sts-0", "-n", namespace, f"test.operator-suite.io/poke={uuid.uuid4().hex}"
    )
    await wait_for_reconcile(typesense_operator, more_than=before, since=time.time())
    requests = operator_requests(control_plane, OPERATOR_USER, namespace)[settled:]
    assert requests == [], [(e["verb"], e["objectRef"]) for e in requests]


async def _claims(kube: Kube, namespace: str) -> dict[str, dict[str, Any]]:
    claims = await kube.list("v1", "PersistentVolumeClaim", namespace)
    return {
        c["metadata"]["name"]: c for c in claims if c["metadata"]["name"].startswith("data-cluster-1-sts-")
    }


async def test_a_larger_storage_size_grows_every_claim_and_recreates_the_statefulset_around_its_pods(
    kube: Kube, namespace: str
) -> None:
    storage_class, volumes = f"grows-{namespace[-6:]}", [f"pv-{namespace[-6:]}-{i}" for i in range(3)]
    async with static_storage(kube, storage_class, volumes, expandable=True):
        storage = {"storageClassName": storage_class, "size": "1Gi"}
        await kube.apply(
            cluster(namespace, {"image": "typesense/typesense:27.1", "replicas": 3, "storage": storage})
        )

        async def bound_with_pods() -> bool:
            # The StatefulSet controller makes each claim before its pod, so bound claims
            # alone do not mean the three pods exist yet.
            claims = await _claims(kube, namespace)
            pods = await kube.list("v1", "Pod", namespace)
            return (
                len(claims) == 3
                and len(pods) == 3
                and all((c.get("status") or {}).get("phase") == "Bound" for c in claims.values())
            )

        await wait_until(bound_with_pods, timeout=60, what="three pods and their claims bound")
        before = await kube.get("apps/v1", "StatefulSet", "cluster-1-sts", namespace)
        assert before is not None
        pods = {p["metadata"]["name"]: p["metadata"]["uid"] for p in await kube.list("v1", "Pod", namespace)}
        assert len(pods) == 3

        await kube.apply(
            cluster(
                namespace,
                {"image": "typesense/typesense:27.1", "replicas": 3, "storage": {**storage, "size": "2Gi"}},
            )
        )

        async def recreated() -> bool:
            sts = await kube.get("apps/v1", "StatefulSet", "cluster-1-sts", namespace)
            return bool(
                sts
                and sts["metadata"]["uid"] != before["metadata"]["uid"]
                and sts["spec"]["volumeClaimTemplates"][0]["spec"]["resources"]["requests"]["storage"]
                == "2Gi"
            )

        await wait_until(recreated, timeout=60, what="the StatefulSet recreated with a 2Gi claim template")
        claims = await _claims(kube, namespace)
        assert {c["spec"]["resources"]["requests"]["storage"] for c in claims.values()} == {"2Gi"}
        after = {p["metadata"]["name"]: p["metadata"]["uid"] for p in await kube.list("v1", "Pod", namespace)}
        assert after == pods, "the pods were orphaned and adopted, never deleted"
        (expanded,) = await wait_until(
            lambda: events_for(kube, namespace, "StorageExpanded"), what="an Event"
        )
        assert "growing the Typesense volumes from 1Gi to 2Gi" in expanded["message"]
        await wait_for_condition(kube, namespace, "StorageReady", "True", "AsRequested")


async def test_a_larger_storage_size_that_the_class_cannot_give_is_reported_and_changes_nothing(
    kube: Kube, namespace: str
) -> None:
    storage_class = f"fixed-{namespace[-6:]}"
    async with static_storage(kube, storage_class, expandable=False):
        storage = {"storageClassName": storage_class, "size": "1Gi"}
        await kube.apply(
            cluster(namespace, {"image": "typesense/typesense:27.1", "replicas": 3, "storage": storage})
        )
        await wait_until(lambda: _claims(kube, namespace), timeout=60, what="the claims")
        before = await wait_for_object(kube, "apps/v1", "StatefulSet", "cluster-1-sts", namespace)

        await kube.apply(
            cluster(
                namespace,
                {"image": "typesense/typesense:27.1", "replicas": 3, "storage": {**storage, "size": "2Gi"}},
            )
        )
        refused = await wait_for_condition(kube, namespace, "StorageReady", "False", "StorageNotExpandable")
        assert f"StorageClass {storage_class} does not allow volume expansion" in refused["message"]
        (warning,) = await wait_until(
            lambda: events_for(kube, namespace, "StorageNotExpandable"), what="a Warning"
        )
        assert warning["type"] == "Warning"
        sts = await kube.get("apps/v1", "StatefulSet", "cluster-1-sts", namespace)
        assert sts is not None
        assert sts["metadata"]["uid"] == before["metadata"]["uid"]
        assert sts["spec"]["volumeClaimTemplates"][0]["spec"]["resources"]["requests"]["storage"] == "1Gi"
        claims = await _claims(kube, namespace)
        assert {c["spec"]["resources"]["requests"]["storage"] for c in claims.values()} == {"1Gi"}
        children = await wait_for_condition(kube, namespace, "ChildrenApplied", "True")
        assert children["status"] == "True", "the StatefulSet keeps its size: nothing fails to apply"


async def test_an_edit_of_the_server_configuration_configmap_alone_rolls_the_pod_template(
    kube: Kube, namespace: str
) -> None:
    """No spec change: the ConfigMap the spec names is watched, and its content is part of the pods'."""
    settings = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "extra", "namespace": namespace},
    }
    await kube.apply({**settings, "data": {"TYPESENSE_CACHE_NUM_ENTRIES": "1000"}})
    spec = {"image": "typesense/typesense:27.1", "additionalServerConfiguration": {"name": "extra"}}
    await kube.apply(cluster(namespace, spec))

    async def configuration_hash() -> str | None:
        sts = await kube.get("apps/v1", "StatefulSet", "cluster-1-sts", namespace)
        annotations = (
            (((sts or {}).get("spec") or {}).get("template") or {}).get("metadata", {}).get("annotations")
        )
        return (annotations or {}).get("ts.opentelekomcloud.com/server-configuration-hash")

    first = await wait_until(configuration_hash, what="the pod template to carry the configuration's hash")
    generation = (await kube.get(API, "TypesenseCluster", "cluster-1", namespace) or {})["metadata"][
        "generation"
    ]
    await kube.apply({**settings, "data": {"TYPESENSE_CACHE_NUM_ENTRIES": "2000"}})

    async def rolled() -> bool:
        return await configuration_hash() not in (None, first)

    await wait_until(rolled, timeout=15, what="the ConfigMap edit to reach the pod template")
    after = await kube.get(API, "TypesenseCluster", "cluster-1", namespace)
    assert after is not None
    assert after["metadata"]["generation"] == generation, "no spec change was needed"


async def test_the_go_operators_security_contexts_pull_secrets_and_service_type_reach_the_pods(
    kube: Kube, namespace: str, kubectl: Kubectl
) -> None:
    """The overrides replace the operator's own contexts; in a namespace that enforces the restricted
    Pod Security Standard, the StatefulSet controller's pods with them are admitted (they still meet
    it), and so are the metrics sidecar's."""
    kubectl("label", "namespace", namespace, "pod-security.kubernetes.io/enforce=restricted")
    restricted_container = {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "readOnlyRootFilesystem": True,
    }
    pod_context = {
        "runAsNonRoot": True,
        "runAsUser": 20000,
        "fsGroup": 20000,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    spec = {
        "image": "typesense/typesense:27.1",
        "imagePullSecrets": [{"name": "registry-credentials"}],
        "service": {"type": "LoadBalancer", "externalTrafficPolicy": "Local"},
        "metrics": {"release": "promstack", "logLevel": 4},
        "securityContext": {
            "pod": pod_context,
            "typesense": restricted_container,
            "metrics": {**restricted_container, "runAsUser": 30000},
        },
    }
    await kube.apply(cluster(namespace, spec))

    async def pods() -> list[dict[str, Any]] | None:
        found = await kube.list("v1", "Pod", namespace, labels={"app.kubernetes.io/instance": "cluster-1"})
        return found if len(found) == 3 else None

    made: Any = await wait_until(pods, timeout=60, what="the StatefulSet controller's three pods, admitted")
    for pod in made:
        assert pod["spec"]["securityContext"] == pod_context
        assert pod["spec"]["imagePullSecrets"] == [{"name": "registry-credentials"}]
        containers = {c["name"]: c for c in pod["spec"]["containers"]}
        assert containers["typesense"]["securityContext"] == restricted_container
        assert containers["metrics-exporter"]["securityContext"]["runAsUser"] == 30000
        assert {"name": "LOG_LEVEL", "value": "4"} in containers["metrics-exporter"]["env"]
    service = await kube.get("v1", "Service", "cluster-1-svc", namespace)
    assert service is not None
    assert service["spec"]["type"] == "LoadBalancer"
    assert service["spec"]["externalTrafficPolicy"] == "Local"
