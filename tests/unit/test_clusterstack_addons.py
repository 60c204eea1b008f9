"""What a ClusterAddon applies in the workload cluster, when, and what goes; which kubeconfigs it takes."""

from __future__ import annotations

import base64
from typing import Any

import pytest
import yaml

from clusterstack_operator.releases.addons import (
    ObjectReference,
    stale_resources,
    template_references,
    unreachable_retry_seconds,
    what_changes,
)
from clusterstack_operator.resources import addon_objects
from clusterstack_operator.workload import kubeconfig_of
from operator_core.errors import InvalidKubeconfig


@pytest.mark.parametrize(
    ("applied", "release", "new_addons", "message"),
    [
        ((None, None), ("s-1-30-v1", "v1"), True, "applied cluster addons v1 of s-1-30-v1"),
        (("s-1-30-v1", "v1"), ("s-1-30-v1", "v1"), False, ""),
        (
            ("s-1-30-v1", "v1"),
            ("s-1-30-v2", "v1"),
            False,
            "s-1-30-v2 has the same cluster addons as s-1-30-v1",
        ),
        (("s-1-30-v2", "v1"), ("s-1-30-v3", "v2"), True, "updated cluster addons from v1 (s-1-30-v2) to v2"),
    ],
)
def test_only_another_addon_version_brings_new_addons(
    applied: tuple[str | None, str | None], release: tuple[str, str], new_addons: bool, message: str
) -> None:
    change = what_changes(*applied, *release)
    assert change.new_addons is new_addons
    assert change.message.startswith(message)


def entry(
    kind: str, name: str, *, group: str = "", version: str = "v1", namespace: str = ""
) -> dict[str, Any]:
    return {"group": group, "version": version, "kind": kind, "namespace": namespace, "name": name}


def test_what_the_new_set_lacks_is_stale_whatever_its_api_version() -> None:
    previous = [
        entry("ConfigMap", "info", namespace="kube-system"),
        entry("ConfigMap", "only-in-v1", namespace="addon-system"),
        entry("Widget", "w", group="example.com", version="v1beta1", namespace="addon-system"),
    ]
    current = [
        entry("ConfigMap", "info", namespace="kube-system"),
        entry("Widget", "w", group="example.com", version="v1", namespace="addon-system"),
    ]
    assert stale_resources(previous, current) == [entry("ConfigMap", "only-in-v1", namespace="addon-system")]


def test_addon_objects_are_labelled_and_ordered_crds_then_namespaces_then_the_chart() -> None:
    rendered = [
        {"kind": "ConfigMap", "metadata": {"name": "a", "labels": {"app": "x"}}},
        {"kind": "Namespace", "metadata": {"name": "ns"}},
        {"kind": "Deployment", "metadata": {"name": "d"}},
        {"kind": "CustomResourceDefinition", "metadata": {"name": "c"}},
    ]
    objects = addon_objects(rendered, "cluster-addon-w")
    assert [o["kind"] for o in objects] == [
        "CustomResourceDefinition",
        "Namespace",
        "ConfigMap",
        "Deployment",
    ]
    assert objects[2]["metadata"]["labels"] == {
        "app": "x",
        "app.kubernetes.io/managed-by": "cluster-stack-operator",
        "clusterstack.x-k8s.io/cluster-addon": "cluster-addon-w",
    }


def secret(document: object) -> dict[str, Any]:
    raw = yaml.safe_dump(document).encode()
    return {"metadata": {"name": "w-kubeconfig"}, "data": {"value": base64.b64encode(raw).decode()}}


KUBECONFIG: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Config",
    "clusters": [
        {"name": "w", "cluster": {"server": "https://127.0.0.1:6443", "certificate-authority-data": "Q0E="}}
    ],
    "users": [{"name": "admin", "user": {"client-certificate-data": "Q0VSVA==", "client-key-data": "S0VZ"}}],
    "contexts": [{"name": "w", "context": {"cluster": "w", "user": "admin"}}],
    "current-context": "w",
}


def with_user(**user: Any) -> dict[str, Any]:
    return {**KUBECONFIG, "users": [{"name": "admin", "user": user}]}


def test_a_kubeconfig_with_embedded_credentials_is_taken() -> None:
    assert kubeconfig_of(secret(KUBECONFIG))["current-context"] == "w"


@pytest.mark.parametrize(
    ("document", "message"),
    [
        (with_user(exec={"command": "/bin/sh", "args": ["-c", "id"]}), "runs a command \\(exec\\)"),
        (with_user(**{"auth-provider": {"name": "gcp"}}), "runs a command \\(auth-provider\\)"),
        (with_user(**{"client-certificate": "/etc/passwd"}), "names a file \\(client-certificate\\)"),
        (with_user(tokenFile="/var/run/secrets/token"), "embed it as token"),
        ("just text", "not a YAML mapping"),
    ],
)
def test_a_kubeconfig_that_would_run_a_command_or_read_our_files_is_refused(
    document: object, message: str
) -> None:
    with pytest.raises(InvalidKubeconfig, match=message):
        kubeconfig_of(secret(document))


def test_a_secret_without_the_key_or_with_garbage_says_which_secret_and_nothing_of_its_content() -> None:
    with pytest.raises(InvalidKubeconfig, match="Secret w-kubeconfig has no key 'value'"):
        kubeconfig_of({"metadata": {"name": "w-kubeconfig"}, "data": {}})
    with pytest.raises(InvalidKubeconfig, match="is not a base64 YAML kubeconfig") as raised:
        kubeconfig_of({"metadata": {"name": "w-kubeconfig"}, "data": {"value": "%%secret-bytes%%"}})
    assert "secret-bytes" not in str(raised.value)


def test_a_clusters_references_are_read_in_either_api_version() -> None:
    v1beta2 = {
        "metadata": {"name": "c", "namespace": "ns"},
        "spec": {
            "infrastructureRef": {
                "apiGroup": "infrastructure.cluster.x-k8s.io",
                "kind": "DockerCluster",
                "name": "c",
            },
            "controlPlaneRef": {"apiGroup": "controlplane.cluster.x-k8s.io", "kind": "KubeadmControlPlane"},
        },
    }
    assert template_references(v1beta2) == {
        "InfraCluster": ObjectReference(
            "DockerCluster", "c", "ns", api_group="infrastructure.cluster.x-k8s.io"
        )
    }
    v1beta1 = {
        "metadata": {"name": "c", "namespace": "ns"},
        "spec": {
            "controlPlaneRef": {
                "apiVersion": "controlplane.cluster.x-k8s.io/v1beta1",
                "kind": "KubeadmControlPlane",
                "name": "c-cp",
                "namespace": "other",
            }
        },
    }
    assert template_references(v1beta1) == {
        "ControlPlane": ObjectReference(
            "KubeadmControlPlane", "c-cp", "other", api_version="controlplane.cluster.x-k8s.io/v1beta1"
        )
    }
    assert template_references({"metadata": {"name": "c", "namespace": "ns"}}) == {}


@pytest.mark.parametrize(("waited", "retry"), [(0, 5), (8, 5), (30, 15), (100, 50), (600, 60), (86400, 60)])
def test_a_workload_api_server_that_stays_down_is_asked_less_often(waited: float, retry: float) -> None:
    assert unreachable_retry_seconds(waited) == retry
