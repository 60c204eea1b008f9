"""Smoke tests that prove the local control plane is real: schemas, controllers, scheduler, GC, SSA, RBAC."""

from __future__ import annotations

from typing import Any

import pytest

from operator_core.errors import Conflict, Forbidden, Invalid
from operator_core.kube import Kube
from operator_testkit.controlplane import ControlPlane
from operator_testkit.fixtures import Kubectl, wait_until

TS_API = "ts.opentelekomcloud.com/v1alpha1"


def typesense_cluster(name: str, namespace: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": TS_API,
        "kind": "TypesenseCluster",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"image": "typesense/typesense:27.1", **spec},
    }


@pytest.mark.usefixtures("installed_crds")
async def test_cel_rule_rejects_invalid_object_with_readable_message(kube: Kube, namespace: str) -> None:
    with pytest.raises(Invalid) as refused:
        await kube.create(typesense_cluster("even", namespace, replicas=2))
    assert "replicas must be 1, 3, 5 or 7" in str(refused.value)
    assert refused.value.status == 422


@pytest.mark.usefixtures("installed_crds")
async def test_cel_rule_on_object_name_length(kube: Kube, namespace: str) -> None:
    with pytest.raises(Invalid, match=r"raft endpoint .* must fit in 64 characters"):
        await kube.create(typesense_cluster("a" * 20, namespace))


@pytest.mark.usefixtures("installed_crds")
async def test_transition_rule_keeps_storage_class_immutable_and_defaults_apply(
    kube: Kube, namespace: str
) -> None:
    created = await kube.create(typesense_cluster("ts", namespace, storage={"storageClassName": "fast"}))
    assert created["spec"]["replicas"] == 3, "the schema default was not applied by the API server"
    assert created["spec"]["storage"]["size"] == "100Mi"
    changed = typesense_cluster("ts", namespace, storage={"storageClassName": "slow"})
    with pytest.raises(Invalid, match=r"storage\.storageClassName is fixed once the volumes exist"):
        await kube.apply(changed)


def ready_node(name: str) -> dict[str, Any]:
    from operator_core.clock import utcnow

    now = utcnow().strftime("%Y-%m-%dT%H:%M:%SZ")
    capacity = {"cpu": "4", "memory": "8Gi", "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "smoke-test": "true"}},
        "status": {
            "capacity": capacity,
            "allocatable": capacity,
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "KubeletReady",
                    "message": "registered by the smoke test",
                    "lastHeartbeatTime": now,
                    "lastTransitionTime": now,
                }
            ],
        },
    }


async def test_deployment_gets_replicaset_and_pods_that_the_scheduler_binds(
    kube: Kube, namespace: str
) -> None:
    node_name = f"node-{namespace}"[:63]
    await kube.create(ready_node(node_name))
    try:
        labels = {"app": "web"}
        await kube.apply(
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": "web", "namespace": namespace},
                "spec": {
                    "replicas": 2,
                    "selector": {"matchLabels": labels},
                    "template": {
                        "metadata": {"labels": labels},
                        "spec": {
                            "nodeSelector": {"kubernetes.io/hostname": node_name},
                            "containers": [{"name": "web", "image": "nginx:1.27"}],
                        },
                    },
                },
            }
        )

        async def replica_sets() -> list[dict[str, Any]]:
            return await kube.list("apps/v1", "ReplicaSet", namespace)

        (replica_set,) = await wait_until(replica_sets, what="the ReplicaSet")  # type: ignore[misc]
        assert replica_set["metadata"]["ownerReferences"][0]["name"] == "web"

        async def bound_pods() -> list[dict[str, Any]]:
            pods = await kube.list("v1", "Pod", namespace, labels=labels)
            bound = [p for p in pods if p["spec"].get("nodeName") == node_name]
            return bound if len(bound) == 2 else []

        pods = await wait_until(bound_pods, what="two pods bound to the node")
        assert all(p["metadata"]["ownerReferences"][0]["kind"] == "ReplicaSet" for p in pods)  # type: ignore[attr-defined]
    finally:
        await kube.delete("v1", "Node", node_name)


async def test_deleting_an_owner_garbage_collects_its_dependents(kube: Kube, namespace: str) -> None:
    owner = await kube.create(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "owner", "namespace": namespace}}
    )
    reference = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner["metadata"]["uid"]}
    await kube.create(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "dependent", "namespace": namespace, "ownerReferences": [reference]},
        }
    )
    await kube.delete("v1", "ConfigMap", "owner", namespace)

    async def dependent_gone() -> bool:
        return await kube.get("v1", "ConfigMap", "dependent", namespace) is None

    await wait_until(dependent_gone, timeout=60, what="the garbage collector to delete the dependent")


async def test_server_side_apply_reports_field_conflicts(control_plane: ControlPlane, namespace: str) -> None:
    def configmap(value: str) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "shared", "namespace": namespace},
            "data": {"owner": value},
        }

    async with (
        Kube.connect(control_plane.kubeconfig, field_manager="first") as first,
        Kube.connect(control_plane.kubeconfig, field_manager="second") as second,
    ):
        await first.apply(configmap("first"), force=False)
        with pytest.raises(Conflict) as conflict:
            await second.apply(configmap("second"), force=False)
        assert conflict.value.status == 409
        assert "conflict" in str(conflict.value).lower()
        assert ".data.owner" in str(conflict.value)
        forced = await second.apply(configmap("second"), force=True)
        assert forced.object["data"]["owner"] == "second"


async def test_service_account_token_can_do_what_its_role_allows_only(
    kube: Kube, namespace: str, kubectl: Kubectl, control_plane: ControlPlane, tmp_path: Any
) -> None:
    await kube.create(
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "reader", "namespace": namespace}}
    )
    await kube.create(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": "configmap-reader", "namespace": namespace},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}],
        }
    )
    await kube.create(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "reader", "namespace": namespace},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "configmap-reader"},
            "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": namespace}],
        }
    )
    token = kubectl("create", "token", "reader", "-n", namespace, "--duration=10m").stdout.strip()
    assert token.count(".") == 2, "TokenRequest did not return a JWT"

    as_reader = tmp_path / "reader.kubeconfig"
    as_reader.write_text(control_plane.kubeconfig_for_token(token))
    async with Kube.connect(as_reader) as reader:
        assert await reader.list("v1", "ConfigMap", namespace) is not None
        with pytest.raises(Forbidden, match='cannot list resource "secrets"'):
            await reader.list("v1", "Secret", namespace)
        with pytest.raises(Forbidden):
            await reader.create(
                {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": namespace}}
            )
        assert reader.write_calls == 1


@pytest.mark.usefixtures("installed_crds")
async def test_kubectl_explain_documents_fields(kubectl: Kubectl) -> None:
    def explain(field: str) -> str:
        # The API server publishes a new CRD's OpenAPI a moment after it is Established.
        return kubectl("explain", field, check=False).stdout

    replicas = await wait_until(lambda: explain("typesenseclusters.spec.replicas"), what="kubectl explain")
    assert "Number of Typesense nodes: 1, 3, 5 or 7." in str(replicas)
    assert "StorageClass of the volumes" in explain("ts.spec.storage.storageClassName")


@pytest.mark.usefixtures("installed_crds")
async def test_printer_columns_short_name_and_scale_subresource(
    kube: Kube, namespace: str, kubectl: Kubectl
) -> None:
    await kube.create(typesense_cluster("scaled", namespace))
    kubectl("scale", "ts/scaled", "-n", namespace, "--replicas=5")
    scaled = await kube.get(TS_API, "TypesenseCluster", "scaled", namespace)
    assert scaled is not None
    assert scaled["spec"]["replicas"] == 5
    table = kubectl("get", "ts", "-n", namespace).stdout.splitlines()
    assert table[0].split() == ["NAME", "IMAGE", "REPLICAS", "READY", "STATUS", "AGE"]
    assert table[1].split()[:3] == ["scaled", "typesense/typesense:27.1", "5"]
    # The category holds the backups too: kubectl names each row by its kind then.
    every = kubectl("get", "typesense", "-n", namespace).stdout
    assert "typesensecluster.ts.opentelekomcloud.com/scaled" in every
    refused = kubectl("scale", "ts/scaled", "-n", namespace, "--replicas=4", check=False)
    assert refused.returncode != 0
    assert "replicas must be 1, 3, 5 or 7" in refused.stderr
