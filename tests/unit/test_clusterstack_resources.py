"""The Cluster Stack operator's pure builders: provider objects from templates, releases, status text."""

from __future__ import annotations

from typing import Any

import pytest

from clusterstack_operator.releases.versions import ReleaseName
from clusterstack_operator.resources import (
    InvalidTemplate,
    build_cluster_stack_release,
    build_provider_release,
    rendered_objects,
    usable_versions,
)

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
    built = build_provider_release(TEMPLATE, STACK, RELEASE)
    assert built["kind"] == "MyProviderClusterStackRelease"
    assert built["apiVersion"] == TEMPLATE["apiVersion"]
    assert built["metadata"]["name"] == "myprovider-xyz-1-26-v6"
    assert built["spec"] == {"nodeImages": ["ubuntu-capi-image-v1.26.6"]}
    assert built["spec"] is not TEMPLATE["spec"]["template"]["spec"]
    assert built["metadata"]["labels"] == {"shared": "from-stack", "image": "y", "team": "stack"}
    assert built["metadata"]["annotations"] == {"note": "n"}
    assert built["metadata"]["ownerReferences"][0]["name"] == "cs-xyz"


@pytest.mark.parametrize(
    ("template", "message"),
    [
        ({**TEMPLATE, "spec": {}}, "has no spec.template.spec to copy"),
        ({**TEMPLATE, "kind": "MyProviderThing"}, "does not end in Template"),
    ],
)
def test_a_template_that_breaks_the_contract_is_named(template: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidTemplate, match=message):
        build_provider_release(template, STACK, RELEASE)


def test_a_release_is_owned_by_its_stack_and_names_its_provider_object() -> None:
    provider = {"apiVersion": "a/v1", "kind": "P", "name": RELEASE.tag, "namespace": "cluster"}
    release = build_cluster_stack_release(STACK, RELEASE, provider)
    assert release["metadata"]["name"] == "myprovider-xyz-1-26-v6"
    assert (
        release["metadata"]["ownerReferences"][0] | {"uid": "uid-1", "controller": True}
        == release["metadata"]["ownerReferences"][0]
    )
    assert release["spec"] == {"providerRef": provider}
    assert build_cluster_stack_release(STACK, RELEASE, None)["spec"] == {}


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
