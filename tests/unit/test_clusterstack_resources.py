"""The Cluster Stack operator's pure builders: provider objects from templates, releases, status text."""

from __future__ import annotations

from typing import Any

import pytest

from clusterstack_operator.api.v1alpha1 import CAPI_CONDITIONS, ReleaseSourceSpec
from clusterstack_operator.releases.versions import ReleaseName
from clusterstack_operator.resources import (
    InvalidTemplate,
    Release,
    Stack,
    applied_objects,
    build_cluster_addon,
    build_cluster_stack_release,
    build_provider_release,
    release_summary,
    rendered_objects,
    source_key,
    source_key_of,
    usable_versions,
)
from operator_core.children import INSTANCE_LABEL, MANAGED_BY_LABEL
from operator_core.conditions import set_condition

RELEASE = ReleaseName.parse("myprovider-xyz-1-26-v6")
STACK: dict[str, Any] = {
    "apiVersion": "clusterstack.x-k8s.io/v1alpha1",
    "kind": "ClusterStack",
    "metadata": {
        "name": "cs-xyz",
        "namespace": "cluster",
        "uid": "uid-1",
        "labels": {"team": "stack", "shared": "from-stack"},
        "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}", "note": "n"},
    },
    "spec": {
        "provider": "myprovider",
        "name": "xyz",
        "kubernetesVersion": "1.26",
        "providerRef": {"apiVersion": "a/v1", "kind": "PTemplate", "name": "t"},
    },
}
RELEASE_OBJECT: dict[str, Any] = {
    "apiVersion": "clusterstack.x-k8s.io/v1alpha1",
    "kind": "ClusterStackRelease",
    "metadata": {"name": RELEASE.tag, "namespace": "cluster", "uid": "uid-2"},
    "spec": {},
}
TEMPLATE: dict[str, Any] = {
    "apiVersion": "infrastructure.clusterstack.x-k8s.io/v1alpha1",
    "kind": "MyProviderClusterStackReleaseTemplate",
    "metadata": {"name": "myprovider-xyz-template", "namespace": "cluster"},
    "spec": {
        "template": {
            "metadata": {"labels": {"shared": "from-template", "image": "y"}},
            "spec": {"nodeImages": ["ubuntu-capi-image-v1.26.6"]},
        }
    },
}


def test_the_provider_object_copies_the_template_spec_under_the_releases_name() -> None:
    built = build_provider_release(TEMPLATE, STACK, Release.from_object(RELEASE_OBJECT))
    assert built["kind"] == "MyProviderClusterStackRelease"
    assert built["apiVersion"] == TEMPLATE["apiVersion"]
    assert built["metadata"]["name"] == "myprovider-xyz-1-26-v6"
    assert built["spec"] == {"nodeImages": ["ubuntu-capi-image-v1.26.6"]}
    assert built["spec"] is not TEMPLATE["spec"]["template"]["spec"]
    assert built["metadata"]["labels"] == {
        "shared": "from-stack",
        "image": "y",
        "team": "stack",
        MANAGED_BY_LABEL: "cluster-stack-operator",
        INSTANCE_LABEL: RELEASE.tag,
    }
    assert built["metadata"]["annotations"] == {"note": "n"}
    stack_owner, release_owner = built["metadata"]["ownerReferences"]
    assert (stack_owner["name"], stack_owner.get("controller")) == ("cs-xyz", None)
    assert (release_owner["name"], release_owner["controller"]) == (RELEASE.tag, True)


@pytest.mark.parametrize(
    ("template", "message"),
    [
        ({**TEMPLATE, "spec": {}}, "has no spec.template.spec to copy"),
        ({**TEMPLATE, "kind": "MyProviderThing"}, "does not end in Template"),
    ],
)
def test_a_template_that_breaks_the_contract_is_named(template: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidTemplate, match=message):
        build_provider_release(template, STACK, Release.from_object(RELEASE_OBJECT))


def test_a_release_is_owned_by_its_stack_and_names_its_provider_object() -> None:
    provider = {"apiVersion": "a/v1", "kind": "P", "name": RELEASE.tag, "namespace": "cluster"}
    release = build_cluster_stack_release(Stack.from_object(STACK), RELEASE, provider)
    assert release["metadata"]["name"] == "myprovider-xyz-1-26-v6"
    assert (
        release["metadata"]["ownerReferences"][0] | {"uid": "uid-1", "controller": True}
        == release["metadata"]["ownerReferences"][0]
    )
    assert release["spec"] == {"providerRef": provider}
    assert release["metadata"]["labels"][INSTANCE_LABEL] == "cs-xyz", "its changes wake the stack"
    assert build_cluster_stack_release(Stack.from_object(STACK), RELEASE, None)["spec"] == {}


def test_usable_versions_are_ordered_with_hash_versions_last() -> None:
    ready = [ReleaseName.parse(t) for t in ("a-b-1-30-v10", "a-b-1-30-v0-sha-abcdefg", "a-b-1-30-v9")]
    assert usable_versions(ready) == "v9, v10, v0-sha.abcdefg"


def test_rendered_output_becomes_objects_in_the_releases_namespace() -> None:
    rendered = """---
# Source: chart/templates/empty.yaml
---
apiVersion: cluster.x-k8s.io/v1beta1
kind: ClusterClass
metadata:
  name: docker-scs-1-30-v1
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: elsewhere
  namespace: other
"""
    objects = rendered_objects(rendered, "cluster")
    assert [(o["kind"], o["metadata"]["namespace"]) for o in objects] == [
        ("ClusterClass", "cluster"),
        ("ConfigMap", "other"),
    ]


def test_applied_objects_are_labelled_for_their_release_and_owned_by_it_without_controlling() -> None:
    release = Release.from_object(RELEASE_OBJECT)
    rendered = [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "labels": {"x": "y"}}}]
    (applied,) = applied_objects(rendered, release)
    assert applied["metadata"]["labels"] == {
        "x": "y",
        MANAGED_BY_LABEL: "cluster-stack-operator",
        INSTANCE_LABEL: RELEASE.tag,
    }
    assert applied["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "clusterstack.x-k8s.io/v1alpha1",
            "kind": "ClusterStackRelease",
            "name": RELEASE.tag,
            "uid": "uid-2",
        }
    ]
    assert MANAGED_BY_LABEL not in rendered[0]["metadata"]["labels"], "the rendered object is not changed"


def test_conditions_get_cluster_api_severities_only_when_not_true() -> None:
    conditions = set_condition([], "Ready", "True", "AllConditionsTrue")
    conditions = set_condition(conditions, "ClusterStackReleaseDownloaded", "False", "IssueWithReleaseAssets")
    conditions = set_condition(conditions, "HelmChartApplied", "False", "ObjectsApplyingOngoing")
    conditions = set_condition(conditions, "ProviderClusterStackReleaseReady", "False", "ProcessOngoing")
    severities = {c["type"]: c.get("severity") for c in CAPI_CONDITIONS.write(conditions)}
    assert severities == {
        "Ready": None,
        "ClusterStackReleaseDownloaded": "Error",
        "HelmChartApplied": "Warning",
        "ProviderClusterStackReleaseReady": "Info",
    }
    written = CAPI_CONDITIONS.write(conditions)
    # Read back (by the shared core's reports too), the severity is dropped and derived again; an entry
    # without a reason, which Cluster API allows on a True condition, is passed over.
    read = CAPI_CONDITIONS.read({"status": {"conditions": [*written, {"type": "Other", "status": "True"}]}})
    assert read == conditions
    assert CAPI_CONDITIONS.write(read) == written


@pytest.mark.parametrize(
    ("status", "phase", "ready"),
    [
        ({"ready": True}, "done", True),
        (
            {
                "conditions": [
                    {
                        "type": "ClusterStackReleaseDownloaded",
                        "status": "False",
                        "reason": "R",
                        "lastTransitionTime": "2026-01-01T00:00:00Z",
                    }
                ]
            },
            "downloading release assets",
            False,
        ),
        (
            {
                "conditions": [
                    {
                        "type": "ClusterStackReleaseDownloaded",
                        "status": "True",
                        "reason": "R",
                        "lastTransitionTime": "2026-01-01T00:00:00Z",
                    }
                ]
            },
            "provider-specific work",
            False,
        ),
        (
            {
                "conditions": [
                    {
                        "type": "ProviderClusterStackReleaseReady",
                        "status": "True",
                        "reason": "R",
                        "lastTransitionTime": "2026-01-01T00:00:00Z",
                    }
                ]
            },
            "applying objects",
            False,
        ),
        ({}, "", False),
    ],
)
def test_a_release_is_summarised_with_upstreams_phases(
    status: dict[str, Any], phase: str, ready: bool
) -> None:
    entry = release_summary({**RELEASE_OBJECT, "status": status})
    assert (entry["name"], entry["phase"], entry["ready"]) == ("v6", phase, ready)


def test_a_cluster_addon_is_owned_by_its_cluster_and_refers_to_it_as_read() -> None:
    cluster = {
        "apiVersion": "cluster.x-k8s.io/v1beta1",
        "kind": "Cluster",
        "metadata": {"name": "testcluster", "namespace": "cluster", "uid": "uid-c"},
        "spec": {"topology": {"class": "myprovider-xyz-1-26-v6"}},
    }
    addon = build_cluster_addon(cluster, Stack.from_object(STACK))
    assert addon["metadata"]["name"] == "cluster-addon-testcluster"
    assert addon["metadata"]["namespace"] == "cluster"
    (owner,) = addon["metadata"]["ownerReferences"]
    assert owner == {
        "apiVersion": "cluster.x-k8s.io/v1beta1",
        "kind": "Cluster",
        "name": "testcluster",
        "uid": "uid-c",
        "controller": True,
        "blockOwnerDeletion": True,
    }
    assert addon["spec"] == {
        "clusterRef": {
            "apiVersion": "cluster.x-k8s.io/v1beta1",
            "kind": "Cluster",
            "name": "testcluster",
            "namespace": "cluster",
            "uid": "uid-c",
        }
    }
    labels = addon["metadata"]["labels"]
    assert labels[MANAGED_BY_LABEL] == "cluster-stack-operator"
    assert labels[INSTANCE_LABEL] == "cs-xyz", "its deletion wakes the stack, which makes it again"
    assert labels["cluster.x-k8s.io/cluster-name"] == "testcluster"


def _source(**spec: Any) -> ReleaseSourceSpec:
    return ReleaseSourceSpec.model_validate(spec)


OCI = {"repository": "registry.example.com/kaas/stacks"}


@pytest.mark.parametrize(
    ("one", "other", "same"),
    [
        # Credentials and a CA do not change where a repository is (the identity that downloads is
        # a level below: test_clusterstack_identity.py).
        (
            _source(oci=OCI),
            _source(oci={**OCI, "credentialsSecretRef": {"name": "a"}, "caSecretRef": {"name": "ca"}}),
            True,
        ),
        (_source(oci=OCI), _source(oci={"repository": "registry.example.com/kaas/fork"}), False),
        (_source(oci=OCI), _source(oci={**OCI, "plainHTTP": True}), False),
        (
            _source(github={"organization": "SovereignCloudStack", "repository": "cluster-stacks"}),
            _source(github={"organization": "fork", "repository": "cluster-stacks"}),
            False,
        ),
        (
            _source(github={"organization": "o", "repository": "r"}),
            _source(github={"organization": "o", "repository": "r", "apiURL": "https://ghe.example/api/v3"}),
            False,
        ),
    ],
)
def test_a_sources_downloads_are_kept_apart_from_every_other_sources(
    one: ReleaseSourceSpec, other: ReleaseSourceSpec, same: bool
) -> None:
    assert (source_key(one) == source_key(other)) is same
    assert source_key(one).split("-")[0] in ("oci", "github")
    assert source_key(None) == ""


def test_a_release_of_a_stack_with_its_own_source_carries_the_sources_key() -> None:
    own = {**STACK, "spec": {**STACK["spec"], "source": {"oci": OCI}}}
    release = build_cluster_stack_release(Stack.from_object(own), RELEASE, None)
    assert source_key_of(release) == source_key(_source(oci=OCI))
    plain = build_cluster_stack_release(Stack.from_object(STACK), RELEASE, None)
    assert "annotations" not in plain["metadata"]
    assert source_key_of(plain) == ""
