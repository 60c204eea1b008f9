"""The Cluster Stack API on the real API server: the seed's examples apply, and bad input is refused
with a message that says what to do."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from operator_core.errors import Invalid
from operator_core.kube import Kube
from operator_testkit.fixtures import Kubectl
from samples import load_sample

pytestmark = pytest.mark.usefixtures("installed_crds")

API = "clusterstack.x-k8s.io/v1alpha1"


def seed(name: str, namespace: str) -> dict[str, Any]:
    (document,) = load_sample(name)
    document = copy.deepcopy(document)
    document["metadata"]["namespace"] = namespace
    return document


def stack(namespace: str, **spec: Any) -> dict[str, Any]:
    document = seed("clusterstack_v1alpha1_clusterstack", namespace)
    document.pop("status")
    document["spec"]["providerRef"]["namespace"] = namespace
    document["spec"].update(spec)
    return document


async def test_the_seed_examples_apply_unchanged_status_included(kube: Kube, namespace: str) -> None:
    cluster_stack = seed("clusterstack_v1alpha1_clusterstack", namespace)
    status = cluster_stack.pop("status")
    created = await kube.create(cluster_stack)
    await kube.patch_status(API, "ClusterStack", "cs-xyz", namespace, status)

    release = seed("clusterstack_v1alpha1_clusterstackrelease", namespace)
    release_status = release.pop("status")
    release["metadata"]["ownerReferences"][0]["uid"] = created["metadata"]["uid"]
    await kube.create(release)
    patched = await kube.patch_status(
        API, "ClusterStackRelease", release["metadata"]["name"], namespace, release_status
    )
    assert patched["status"]["kubernetesVersion"] == "v1.26.6"
    assert [r["status"] for r in patched["status"]["resources"]] == ["synced"] * 5
    live = await kube.get(API, "ClusterStack", "cs-xyz", namespace)
    assert live is not None
    assert live["status"]["summary"][0] == {"message": "", "name": "v6", "phase": "done", "ready": True}

    addon = seed("clusterstack_v1alpha1_clusteraddon", namespace)
    addon_status = addon.pop("status")
    # Its owner is a Cluster, which this test has none of (the garbage collector would take the addon).
    addon["metadata"].pop("ownerReferences")
    addon["spec"]["clusterRef"]["namespace"] = namespace
    await kube.create(addon)
    patched = await kube.patch_status(API, "ClusterAddon", addon["metadata"]["name"], namespace, addon_status)
    assert patched["spec"]["clusterStack"] == "myprovider-xyz-1-26-v6"
    assert patched["status"]["resources"][0]["kind"] == "Deployment"
    assert [c["type"] for c in patched["status"]["conditions"]] == [
        "Ready",
        "ClusterStackReleaseDownloaded",
        "HelmChartApplied",
    ]


async def test_a_cluster_addon_belongs_to_one_cluster_for_its_whole_life(kube: Kube, namespace: str) -> None:
    addon = seed("clusterstack_v1alpha1_clusteraddon", namespace)
    addon.pop("status")
    addon["metadata"].pop("ownerReferences")
    await kube.create(addon)
    moved = copy.deepcopy(addon)
    moved["spec"]["clusterRef"]["name"] = "another"
    with pytest.raises(Invalid, match=r"spec\.clusterRef is immutable"):
        await kube.apply(moved)


def test_kubectl_shows_the_columns_a_user_needs(namespace: str, kubectl: Kubectl) -> None:
    document = seed("clusterstack_v1alpha1_clusterstack", namespace)
    document.pop("status")
    kubectl("apply", "-f", "-", input_text=yaml.safe_dump(document))
    header = kubectl("get", "csk", "-n", namespace).stdout.splitlines()[0].split()
    assert header == [
        "NAME",
        "PROVIDER",
        "CLUSTERSTACK",
        "K8S",
        "CHANNEL",
        "AUTOSUBSCRIBE",
        "LATEST",
        "READY",
        "AGE",
    ]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"kubernetesVersion": "1.26.3"}, "spec.kubernetesVersion in body should match"),
        ({"provider": "my-provider"}, "spec.provider in body should match"),
        ({"versions": ["6"]}, "spec.versions[0] in body should match"),
        ({"channel": "alpha"}, 'Unsupported value: "alpha"'),
        ({"providerRef": None}, "spec.providerRef is required unless spec.noProvider is true"),
        ({"source": {}}, "name exactly one release source: oci or github"),
        (
            {
                "source": {
                    "oci": {"repository": "r.example/x"},
                    "github": {"organization": "o", "repository": "r"},
                }
            },
            "name exactly one release source: oci or github",
        ),
        ({"source": {"oci": {"repository": "registry.example.com"}}}, "spec.source.oci.repository in body"),
        ({"source": {"github": {"organization": "o"}}}, "spec.source.github.repository: Required value"),
    ],
)
async def test_bad_input_is_refused_with_a_readable_message(
    kube: Kube, namespace: str, spec: dict[str, Any], message: str
) -> None:
    document = stack(namespace)
    if spec.get("providerRef", "") is None:
        document["spec"].pop("providerRef", None)
        spec = {}
    document["spec"].update(spec)
    with pytest.raises(Invalid, match=message.replace("[", r"\[").replace("]", r"\]")):
        await kube.create(document)


async def test_no_provider_needs_no_provider_ref(kube: Kube, namespace: str) -> None:
    document = stack(namespace, noProvider=True)
    document["spec"].pop("providerRef", None)
    await kube.create(document)


@pytest.mark.parametrize(
    ("field", "value"),
    [("provider", "other"), ("name", "abc"), ("kubernetesVersion", "1.27"), ("channel", "custom")],
)
async def test_the_identity_of_a_stack_never_changes(
    kube: Kube, namespace: str, field: str, value: str
) -> None:
    document = stack(namespace)
    await kube.create(document)
    document["spec"][field] = value
    with pytest.raises(Invalid, match=f"spec.{field} is immutable once set"):
        await kube.apply(document)


async def test_kubectl_gets_each_kind_by_its_singular_name_as_upstreams_docs_do(
    kube: Kube, namespace: str, kubectl: Kubectl
) -> None:
    """No category may shadow a kind's name: kubectl reads categories first."""
    await kube.create(stack(namespace))
    name = stack(namespace)["metadata"]["name"]
    got = kubectl("get", "clusterstack", name, "-n", namespace, "-o", "name", check=False)
    assert got.returncode == 0, got.stderr
    assert got.stdout.strip() == f"clusterstack.clusterstack.x-k8s.io/{name}"
    for kind in ("clusterstackrelease", "clusteraddon"):
        listed = kubectl("get", kind, "-n", namespace, check=False)
        assert listed.returncode == 0, listed.stderr
