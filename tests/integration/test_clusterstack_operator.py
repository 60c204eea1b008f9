"""The Cluster Stack operator against a real API server with Cluster API's own CRDs: releases from a
local source, rendered by the real helm, applied and reported per object, repaired, kept while used.

Each test runs its own operator process (with the RBAC of its chart)
over its own release directory, and publishes releases of a stack of its own.
"""

from __future__ import annotations

import asyncio
import base64
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from operator_core.kube import Kube
from operator_testkit.assertions import events_for, wait_for_events
from operator_testkit.charts import chart_repository, push_chart, run_helm
from operator_testkit.clusterstack_tools import ClusterStackTools
from operator_testkit.controlplane import ControlPlane, free_port
from operator_testkit.drivers.clusterstack import CLUSTER_ADDON_CHART, HOOKS_ADDON_CHART
from operator_testkit.drivers.csctl import StackConfig, create_release, publish_release_oci
from operator_testkit.drivers.upstream_stacks import DEPENDENCIES, docker_scs, openstack_scs2
from operator_testkit.drivers.upstream_stacks import dependency_chart as upstream_dependency
from operator_testkit.fakegithub import fake_github
from operator_testkit.fixtures import crd_documents, install_crds, wait_until
from operator_testkit.operators import (
    OperatorProcess,
    account_kubeconfig,
    operator_rbac,
)
from operator_testkit.oras_cli import oras_push
from operator_testkit.registry import RunningRegistry, running_registry
from operator_testkit.registry_auth import htpasswd_auth, token_service
from releases import (
    ONE_STAGE,
    dependency_chart,
    dependency_on,
    kubeconfig_secret,
    publish_release,
    push_release,
)
from releases import capi_cluster as cluster
from stack_operator import (
    API,
    PROVIDER_API,
    Releases,
    chart_rules,
    condition,
    hook_writes,
    install_cluster_api,
    launch,
    provider_template,
    ready_release,
    stack,
    stages_of,
)

pytestmark = pytest.mark.usefixtures("installed_crds")


@pytest.fixture
def cluster_api(control_plane: ControlPlane, clusterstack_tools: ClusterStackTools) -> None:
    install_cluster_api(control_plane, clusterstack_tools)


@pytest.fixture
def releases(tmp_path: Path, clusterstack_tools: ClusterStackTools) -> Releases:
    root = tmp_path / "source"
    root.mkdir()
    return Releases(root, clusterstack_tools.helm)


async def gone(
    kube: Kube, api_version: str, kind: str, name: str, namespace: str, timeout: float = 60
) -> None:
    async def absent() -> bool:
        return await kube.get(api_version, kind, name, namespace) is None

    await wait_until(absent, timeout=timeout, what=f"{kind} {name} to be gone")


@pytest.fixture
def late_stack_operator(
    cluster_api: None,
    control_plane: ControlPlane,
    clusterstack_tools: ClusterStackTools,
    releases: Releases,
    tmp_path: Path,
    pytestconfig: pytest.Config,
) -> Iterator[Callable[[], OperatorProcess]]:
    """Starts the operator when the test says, over what the test made before it."""
    started: list[OperatorProcess] = []
    source = {"OPERATOR_SUITE_RELEASE_SOURCE": "local", "OPERATOR_SUITE_LOCAL_RELEASES": str(releases.root)}

    def start() -> OperatorProcess:
        started.append(launch(control_plane, clusterstack_tools, tmp_path, pytestconfig.rootpath, source))
        return started[-1]

    try:
        yield start
    finally:
        for process in started:
            process.stop()


@pytest.fixture
def stack_operator(late_stack_operator: Callable[[], OperatorProcess]) -> OperatorProcess:
    return late_stack_operator()


@pytest.fixture
def operator_kube(kube: Kube, stack_operator: OperatorProcess) -> Kube:
    """The test's client, once the operator runs."""
    return kube


async def test_a_listed_release_waits_for_its_provider_then_applies_its_cluster_class_object_by_object(
    operator_kube: Kube, namespace: str, releases: Releases
) -> None:
    kube = operator_kube
    releases.publish("docker-ferrol-1-30-v1")
    await kube.create(provider_template(namespace))
    await kube.create(
        stack(
            "ferrol",
            namespace,
            name="ferrol",
            versions=["v1"],
            autoSubscribe=False,
            providerRef={
                "apiVersion": PROVIDER_API,
                "kind": "TestProviderClusterStackReleaseTemplate",
                "name": "images",
            },
        )
    )
    tag = "docker-ferrol-1-30-v1"

    async def waiting_for_provider() -> dict[str, Any] | None:
        found = await kube.get(API, "ClusterStackRelease", tag, namespace)
        waiting = condition(found, "ProviderClusterStackReleaseReady")
        # Past "does not exist yet" (the first look, before the provider object is made): it exists,
        # and waits to be ready (a CI run under load read the first look).
        made = f"TestProviderClusterStackRelease {tag} is not ready yet" in condition(found, "Ready").get(
            "message", ""
        )
        return found if waiting.get("reason") == "ProcessOngoing" and made else None

    release: Any = await wait_until(
        waiting_for_provider, timeout=60, what="the release to wait for its provider"
    )
    assert condition(release, "ClusterStackReleaseDownloaded")["status"] == "True"
    assert condition(release, "ProviderClusterStackReleaseReady")["severity"] == "Info"
    # Ready means ready (upstream #59): not while its node images are not, and it says which part waits.
    waits = condition(release, "Ready")
    assert waits["status"] == "False", waits
    assert f"TestProviderClusterStackRelease {tag} is not ready yet" in waits["message"], waits
    assert not release["status"].get("ready")
    assert release["spec"]["providerRef"]["kind"] == "TestProviderClusterStackRelease"
    assert (
        await kube.get("cluster.x-k8s.io/v1beta2", "ClusterClass", "docker-ferrol-1-30-v1", namespace) is None
    )

    provider = await kube.get(PROVIDER_API, "TestProviderClusterStackRelease", tag, namespace)
    assert provider is not None
    assert provider["spec"] == {"nodeImages": ["v1"]}, "the template's spec.template.spec, copied"
    assert provider["metadata"]["labels"]["from"] == "template"
    assert {o["kind"] for o in provider["metadata"]["ownerReferences"]} == {
        "ClusterStack",
        "ClusterStackRelease",
    }

    await kube.patch_status(PROVIDER_API, "TestProviderClusterStackRelease", tag, namespace, {"ready": True})
    release = await ready_release(kube, namespace, tag)
    assert release["status"]["kubernetesVersion"] == "v1.30.10"
    assert sorted((r["kind"], r["name"], r["status"]) for r in release["status"]["resources"]) == [
        ("ClusterClass", "docker-ferrol-1-30-v1", "synced"),
        ("DockerClusterTemplate", "docker-ferrol-1-30-v1-cluster", "synced"),
    ]
    assert await kube.get("cluster.x-k8s.io/v1beta2", "ClusterClass", "docker-ferrol-1-30-v1", namespace)

    async def stack_reports_it() -> dict[str, Any] | None:
        found = await kube.get(API, "ClusterStack", "ferrol", namespace)
        return found if (found or {}).get("status", {}).get("usableVersions") == "v1" else None

    reported: Any = await wait_until(stack_reports_it, timeout=30, what="the stack to report v1 usable")
    assert reported["status"]["latestRelease"] == "docker-ferrol-1-30-v1 | v1.30.10"
    assert reported["status"]["summary"] == [{"name": "v1", "ready": True, "phase": "done", "message": ""}]
    assert condition(reported, "Ready")["status"] == "True"

    # An applied object deleted by hand comes back at once (its deletion wakes the release).
    await kube.delete(
        "infrastructure.cluster.x-k8s.io/v1beta2", "DockerClusterTemplate", f"{tag}-cluster", namespace
    )

    async def restored() -> bool:
        return bool(
            await kube.get(
                "infrastructure.cluster.x-k8s.io/v1beta2",
                "DockerClusterTemplate",
                f"{tag}-cluster",
                namespace,
            )
        )

    await wait_until(restored, timeout=15, what="the deleted template to be restored")

    # Its provider release no longer ready (new node images being built): neither is the release.
    await kube.patch_status(PROVIDER_API, "TestProviderClusterStackRelease", tag, namespace, {"ready": False})

    async def not_ready_again() -> dict[str, Any] | None:
        found = await kube.get(API, "ClusterStackRelease", tag, namespace)
        return condition(found, "Ready") if not (found or {}).get("status", {}).get("ready") else None

    again: Any = await wait_until(not_ready_again, timeout=15, what="the release not Ready with its provider")
    assert again["status"] == "False", again
    assert f"TestProviderClusterStackRelease {tag} is not ready yet" in again["message"], again


async def test_auto_subscribe_follows_new_releases_and_keeps_the_one_a_cluster_uses(
    operator_kube: Kube, namespace: str, releases: Releases
) -> None:
    kube = operator_kube
    releases.publish("docker-auto-1-30-v1")
    await kube.create(stack("auto", namespace, name="auto", noProvider=True))
    await ready_release(kube, namespace, "docker-auto-1-30-v1")
    await kube.create(cluster("uses-v1", namespace, "docker-auto-1-30-v1"))

    releases.publish("docker-auto-1-30-v2")  # published while the operator runs
    await ready_release(kube, namespace, "docker-auto-1-30-v2")
    await asyncio.sleep(3)  # a few polls: v1 must stay, a Cluster uses it
    assert await kube.get(API, "ClusterStackRelease", "docker-auto-1-30-v1", namespace) is not None

    await kube.delete("cluster.x-k8s.io/v1beta2", "Cluster", "uses-v1", namespace)
    await gone(kube, API, "ClusterStackRelease", "docker-auto-1-30-v1", namespace)
    await gone(kube, "cluster.x-k8s.io/v1beta2", "ClusterClass", "docker-auto-1-30-v1", namespace)
    assert await kube.get("cluster.x-k8s.io/v1beta2", "ClusterClass", "docker-auto-1-30-v2", namespace)


async def test_a_release_seen_before_all_its_assets_are_there_is_downloaded_again_within_seconds(
    operator_kube: Kube, namespace: str, releases: Releases, tmp_path: Path
) -> None:
    """A release is seen while its assets are still being uploaded (as ``gh release create`` uploads them
    after the release exists): said in ValidateHelmChartFailed, and downloaded again within seconds,
    not at the next resync ten minutes later."""
    kube = operator_kube
    tag = "docker-partial-1-30-v1"
    _, whole = publish_release(tmp_path, tag, helm=releases.helm)
    uploading = releases.root / tag
    uploading.mkdir(parents=True)
    for first in ("metadata.yaml", "hashes.json"):
        shutil.copy(whole / first, uploading / first)
    await kube.create(
        stack("partial", namespace, name="partial", versions=["v1"], autoSubscribe=False, noProvider=True)
    )
    (said,) = await wait_for_events(kube, namespace, "ValidateHelmChartFailed")
    assert "the release lacks" in said["message"]
    for rest in whole.iterdir():
        if not (uploading / rest.name).exists():
            shutil.copy(rest, uploading / rest.name)
    await ready_release(kube, namespace, tag, timeout=20)


async def test_deleting_a_release_waits_while_a_cluster_uses_its_class(
    operator_kube: Kube, namespace: str, releases: Releases
) -> None:
    kube = operator_kube
    releases.publish("docker-held-1-30-v1")
    await kube.create(
        stack("held", namespace, name="held", versions=["v1"], autoSubscribe=False, noProvider=True)
    )
    await ready_release(kube, namespace, "docker-held-1-30-v1")
    # v1beta2, as Cluster API v1.13 stores it: without Cluster API's conversion webhook the API server
    # prunes a v1beta1 Cluster's topology.class here. The v1beta1 spelling has a test of its own, on a
    # control plane with Cluster API v1.8's CRDs (the last that stores v1beta1).
    await kube.create(cluster("user", namespace, "docker-held-1-30-v1"))

    # The stack no longer lists it, and the user deletes it: the Cluster still holds it.
    await kube.apply(
        stack("held", namespace, name="held", versions=["v2"], autoSubscribe=False, noProvider=True)
    )
    await kube.delete(API, "ClusterStackRelease", "docker-held-1-30-v1", namespace)

    async def held() -> dict[str, Any] | None:
        found = await kube.get(API, "ClusterStackRelease", "docker-held-1-30-v1", namespace)
        return found if condition(found, "Ready").get("reason") == "ClusterClassInUse" else None

    waiting: Any = await wait_until(held, timeout=30, what="the deletion to wait for the Cluster")
    assert "Cluster user" in condition(waiting, "Ready")["message"]
    assert await kube.get("cluster.x-k8s.io/v1beta2", "ClusterClass", "docker-held-1-30-v1", namespace)

    await kube.delete("cluster.x-k8s.io/v1beta2", "Cluster", "user", namespace)
    await gone(kube, API, "ClusterStackRelease", "docker-held-1-30-v1", namespace)
    await gone(kube, "cluster.x-k8s.io/v1beta2", "ClusterClass", "docker-held-1-30-v1", namespace)


async def test_a_tenants_cluster_on_the_stacks_class_gets_its_addon_and_holds_its_release(
    operator_kube: Kube, namespace: str, releases: Releases
) -> None:
    """Upstream's scs2 layout (its issue 336): the stacks in a namespace of the platform's, Clusters in
    tenants' namespaces naming it as their class namespace."""
    kube, tenant = operator_kube, f"{namespace}-tenant"
    releases.publish("docker-shared-1-30-v1")
    await kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": tenant}})
    try:
        spec = {"name": "shared", "autoSubscribe": False, "noProvider": True}
        await kube.create(stack("shared", namespace, versions=["v1"], **spec))
        await ready_release(kube, namespace, "docker-shared-1-30-v1")
        tenants_cluster = cluster("team-a", tenant, "docker-shared-1-30-v1")
        tenants_cluster["spec"]["topology"]["classRef"]["namespace"] = namespace
        await kube.create(tenants_cluster)
        addon: Any = await wait_until(
            lambda: kube.get(API, "ClusterAddon", "cluster-addon-team-a", tenant),
            timeout=30,
            what="the tenant Cluster's ClusterAddon, beside it",
        )
        assert addon["spec"]["clusterRef"]["name"] == "team-a"

        # The stack no longer lists v1, and the user deletes it: the tenant's Cluster still holds it.
        await kube.apply(stack("shared", namespace, versions=[], **spec))
        await kube.delete(API, "ClusterStackRelease", "docker-shared-1-30-v1", namespace)

        async def held() -> dict[str, Any] | None:
            found = await kube.get(API, "ClusterStackRelease", "docker-shared-1-30-v1", namespace)
            return found if condition(found, "Ready").get("reason") == "ClusterClassInUse" else None

        waiting: Any = await wait_until(
            held, timeout=30, what="the deletion to wait for the tenant's Cluster"
        )
        assert f"Cluster {tenant}/team-a" in condition(waiting, "Ready")["message"]
        await kube.delete("cluster.x-k8s.io/v1beta2", "Cluster", "team-a", tenant)
        await gone(kube, API, "ClusterStackRelease", "docker-shared-1-30-v1", namespace)
    finally:
        await kube.delete("v1", "Namespace", tenant)


async def test_a_cluster_on_a_class_of_the_stack_gets_its_cluster_addon_for_its_whole_life(
    operator_kube: Kube, namespace: str, releases: Releases
) -> None:
    kube = operator_kube
    tag = "docker-addon-1-30-v1"
    releases.publish(tag)
    await kube.create(
        stack("addon", namespace, name="addon", versions=["v1"], autoSubscribe=False, noProvider=True)
    )
    await ready_release(kube, namespace, tag)
    workload = await kube.create(cluster("workload", namespace, tag))
    await kube.create(cluster("own-class", namespace, "my-own-class"))

    async def addon_of(name: str, not_uid: str | None = None) -> dict[str, Any] | None:
        found = await kube.get(API, "ClusterAddon", f"cluster-addon-{name}", namespace)
        return found if found is not None and found["metadata"]["uid"] != not_uid else None

    addon: Any = await wait_until(lambda: addon_of("workload"), timeout=30, what="the Cluster's ClusterAddon")
    reference = addon["spec"]["clusterRef"]
    assert (reference["kind"], reference["name"], reference["uid"]) == (
        "Cluster",
        "workload",
        workload["metadata"]["uid"],
    )
    (owner,) = addon["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["uid"], owner["controller"]) == (
        "Cluster",
        workload["metadata"]["uid"],
        True,
    )

    # Deleted by hand while its Cluster lives: made again at once.
    await kube.delete(API, "ClusterAddon", "cluster-addon-workload", namespace)
    await wait_until(
        lambda: addon_of("workload", not_uid=addon["metadata"]["uid"]), timeout=15, what="a new ClusterAddon"
    )
    assert await addon_of("own-class") is None, "a class of no cluster stack gets no addon"

    # The Cluster goes: the garbage collector takes its ClusterAddon.
    await kube.delete("cluster.x-k8s.io/v1beta2", "Cluster", "workload", namespace)
    await gone(kube, API, "ClusterAddon", "cluster-addon-workload", namespace)


async def test_a_broken_release_is_reported_and_an_idle_operator_writes_nothing(
    operator_kube: Kube, namespace: str, releases: Releases, stack_operator: OperatorProcess
) -> None:
    kube = operator_kube
    releases.publish("docker-broken-1-30-v1", with_addon_chart=False)
    await kube.create(
        stack("broken", namespace, name="broken", versions=["v1"], autoSubscribe=False, noProvider=True)
    )

    async def reported() -> dict[str, Any] | None:
        found = await kube.get(API, "ClusterStackRelease", "docker-broken-1-30-v1", namespace)
        downloaded = condition(found, "ClusterStackReleaseDownloaded")
        return found if downloaded.get("reason") == "IssueWithReleaseAssets" else None

    broken: Any = await wait_until(reported, timeout=60, what="the broken release to be reported")
    downloaded = condition(broken, "ClusterStackReleaseDownloaded")
    assert downloaded["severity"] == "Error"
    assert "cluster-addon" in downloaded["message"]
    assert not broken["status"]["ready"]
    # Looked at again (downloaded afresh, broken again): the Warning its status already says is not
    # posted again.
    await kube.patch(
        API,
        "ClusterStackRelease",
        "docker-broken-1-30-v1",
        namespace,
        {"metadata": {"annotations": {"poke": "1"}}},
    )
    await asyncio.sleep(3)
    warnings = [
        e for e in await events_for(kube, namespace, "ValidateHelmChartFailed") if e["type"] == "Warning"
    ]
    (warning,) = warnings
    assert warning.get("count", 1) == 1, warning


async def test_a_release_deleted_in_one_namespace_keeps_the_download_the_same_release_elsewhere_uses(
    operator_kube: Kube, namespace: str, releases: Releases, tmp_path: Path
) -> None:
    kube, tag, other = operator_kube, "docker-shared-1-30-v1", f"{namespace}-other"
    releases.publish(tag)
    await kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": other}})
    try:
        spec = {"name": "shared", "autoSubscribe": False, "noProvider": True}
        for where in (namespace, other):
            await kube.create(stack("shared", where, versions=["v1"], **spec))
            await ready_release(kube, where, tag)
        download = tmp_path / "downloads" / "cluster-stacks" / tag
        assert download.is_dir()

        await kube.delete(API, "ClusterStack", "shared", namespace)
        await gone(kube, API, "ClusterStackRelease", tag, namespace)
        assert download.is_dir(), "the release in the other namespace still uses the download"
        await kube.delete(API, "ClusterStackRelease", tag, other)  # the stack makes it again, from it
        await ready_release(kube, other, tag)

        await kube.delete(API, "ClusterStack", "shared", other)
        await gone(kube, API, "ClusterStackRelease", tag, other)
        await wait_until(lambda: not download.exists(), timeout=10, what="the download to go with the last")
    finally:
        await kube.delete("v1", "Namespace", other)


async def test_a_stack_taken_over_from_upstream_keeps_its_unlabelled_releases_and_frees_its_addons(
    kube: Kube, namespace: str, releases: Releases, late_stack_operator: Callable[[], OperatorProcess]
) -> None:
    """What the upstream operator leaves: releases owned by their stack without our labels, and
    ClusterAddons holding its finalizer. Ours, started after them, takes the releases over (labels
    them, applies them, no second one made) and lets the ClusterAddons be deleted."""
    tag = "docker-took-1-30-v1"
    releases.publish(tag)
    spec = {"name": "took", "autoSubscribe": False, "noProvider": True}
    # Made before our operator starts, as the upstream operator left them: with ours running, the
    # release could be made by ours first, or deleted as not listed while the stack lists nothing.
    made = await kube.create(stack("took", namespace, versions=["v1"], **spec))
    owner = {
        "apiVersion": API,
        "kind": "ClusterStack",
        "name": "took",
        "uid": made["metadata"]["uid"],
        "controller": True,
    }
    upstreams = await kube.create(
        {
            "apiVersion": API,
            "kind": "ClusterStackRelease",
            "metadata": {
                "name": tag,
                "namespace": namespace,
                "ownerReferences": [owner],
                "finalizers": ["clusterstackrelease.clusterstack.x-k8s.io"],
            },
            "spec": {},
        }
    )
    late_stack_operator()
    taken: Any = await ready_release(kube, namespace, tag)
    assert taken["metadata"]["labels"]["app.kubernetes.io/instance"] == "took"
    assert taken["metadata"]["uid"] == upstreams["metadata"]["uid"], "the same object, taken over"

    await kube.create(
        {
            "apiVersion": API,
            "kind": "ClusterAddon",
            "metadata": {
                "name": "cluster-addon-old",
                "namespace": namespace,
                "finalizers": ["clusteraddon.clusterstack.x-k8s.io"],
            },
            "spec": {
                "clusterRef": {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster", "name": "old"}
            },
        }
    )
    await kube.delete(API, "ClusterAddon", "cluster-addon-old", namespace)
    await gone(kube, API, "ClusterAddon", "cluster-addon-old", namespace, timeout=20)


async def test_explicit_versions_jump_from_v1_to_v3_and_v1_goes(
    operator_kube: Kube, namespace: str, releases: Releases
) -> None:
    kube = operator_kube
    for version in (1, 2, 3):
        releases.publish(f"docker-jump-1-30-v{version}")
    spec = {"name": "jump", "autoSubscribe": False, "noProvider": True}
    await kube.create(stack("jump", namespace, versions=["v1"], **spec))
    await ready_release(kube, namespace, "docker-jump-1-30-v1")
    await kube.apply(stack("jump", namespace, versions=["v3"], **spec))
    await ready_release(kube, namespace, "docker-jump-1-30-v3")
    await gone(kube, API, "ClusterStackRelease", "docker-jump-1-30-v1", namespace)
    assert await kube.get(API, "ClusterStackRelease", "docker-jump-1-30-v2", namespace) is None, (
        "never wanted"
    )


async def test_a_stack_published_to_an_oci_registry_is_followed_and_applied(
    cluster_api: None,
    kube: Kube,
    namespace: str,
    control_plane: ControlPlane,
    clusterstack_tools: ClusterStackTools,
    oci_registry: RunningRegistry,
    tmp_path: Path,
    pytestconfig: pytest.Config,
) -> None:
    """The whole path a provider's user takes: csctl-style releases in a real registry, auto-subscribe."""
    repository = f"stacks/{namespace}"
    source = {"OCI_REPOSITORY": f"{oci_registry.host}/{repository}", "OPERATOR_SUITE_OCI_PLAIN_HTTP": "true"}
    _, first = publish_release(tmp_path / "published", "docker-oci-1-30-v1", helm=clusterstack_tools.helm)
    await asyncio.to_thread(push_release, oci_registry, first, repository)
    process = launch(control_plane, clusterstack_tools, tmp_path, pytestconfig.rootpath, source)
    try:
        await kube.create(stack("oci", namespace, name="oci", noProvider=True))
        await ready_release(kube, namespace, "docker-oci-1-30-v1")
        _, second = publish_release(
            tmp_path / "published", "docker-oci-1-30-v2", helm=clusterstack_tools.helm
        )
        await asyncio.to_thread(push_release, oci_registry, second, repository)
        await ready_release(kube, namespace, "docker-oci-1-30-v2")
        await gone(kube, API, "ClusterStackRelease", "docker-oci-1-30-v1", namespace)
        assert await kube.get("cluster.x-k8s.io/v1beta2", "ClusterClass", "docker-oci-1-30-v2", namespace)
    finally:
        process.stop()


def launch_over_nothing(
    control_plane: ControlPlane, tools: ClusterStackTools, home: Path, rootpath: Path
) -> OperatorProcess:
    """The operator with an empty local directory as its own source: only a stack's spec.source has
    releases."""
    (home / "nothing").mkdir()
    local = {"OPERATOR_SUITE_RELEASE_SOURCE": "local", "OPERATOR_SUITE_LOCAL_RELEASES": str(home / "nothing")}
    return launch(control_plane, tools, home, rootpath, local)


def oci_source(registry: RunningRegistry, repository: str, credentials: str, **more: Any) -> dict[str, Any]:
    return {
        "oci": {
            "repository": f"{registry.host}/{repository}",
            "credentialsSecretRef": {"name": credentials},
            **more,
        }
    }


def secret(name: str, namespace: str, data: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace},
        "stringData": data,
    }


async def test_two_stacks_follow_two_registries_with_their_own_credentials_and_a_refusal_stops_only_its_own(
    cluster_api: None,
    kube: Kube,
    namespace: str,
    control_plane: ControlPlane,
    clusterstack_tools: ClusterStackTools,
    tmp_path: Path,
    pytestconfig: pytest.Config,
) -> None:
    """Two ClusterStacks of one namespace, each with its own ``spec.source``: one registry asks for an
    htpasswd password over TLS (its CA from a Secret) and holds a release pushed by plain ``oras push``
    (no csctl annotations, no artifact type); the other buys tokens from a token service. The first
    stack's password is wrong at first: that stack alone says so, without the password; the other is
    Ready meanwhile; the corrected Secret is read at the next retry."""
    tools, published = clusterstack_tools, tmp_path / "published"
    _, alpha = publish_release(published, "docker-alpha-1-30-v1", helm=tools.helm)
    _, beta = publish_release(published, "docker-beta-1-30-v1", helm=tools.helm)
    alpha_users, beta_users = {"alpha": "alpha-htpasswd-pa55"}, {"beta": "beta-token-pa55"}
    async with token_service(beta_users) as tokens:
        with running_registry(tmp_path / "beta", binary=tools.registry) as open_beta:
            await asyncio.to_thread(push_release, open_beta, beta, "stacks/beta")
        with (
            running_registry(
                tmp_path / "alpha",
                binary=tools.registry,
                tls=True,
                auth=htpasswd_auth(tmp_path / "alpha-auth", alpha_users),
            ) as alpha_registry,
            running_registry(
                tmp_path / "beta", binary=tools.registry, auth=tokens.auth(tmp_path / "beta-auth")
            ) as beta_registry,
        ):
            assert alpha_registry.ca_cert is not None
            await asyncio.to_thread(
                oras_push,
                alpha_registry,
                "stacks/alpha:docker-alpha-1-30-v1",
                alpha,
                username="alpha",
                password=alpha_users["alpha"],
            )
            wrong = "not-the-alpha-pa55word"
            await kube.create(secret("alpha-registry", namespace, {"username": "alpha", "password": wrong}))
            await kube.create(secret("alpha-ca", namespace, {"ca.crt": alpha_registry.ca_cert.read_text()}))
            await kube.create(
                secret("beta-registry", namespace, {"username": "beta", "password": beta_users["beta"]})
            )
            process = launch_over_nothing(control_plane, tools, tmp_path, pytestconfig.rootpath)
            try:
                alpha_source = oci_source(
                    alpha_registry, "stacks/alpha", "alpha-registry", caSecretRef={"name": "alpha-ca"}
                )
                beta_source = oci_source(beta_registry, "stacks/beta", "beta-registry", plainHTTP=True)
                await kube.create(
                    stack("alpha", namespace, name="alpha", noProvider=True, source=alpha_source)
                )
                await kube.create(stack("beta", namespace, name="beta", noProvider=True, source=beta_source))
                await ready_release(kube, namespace, "docker-beta-1-30-v1")
                assert {t.account for t in tokens.issued} == {"beta"}

                async def alpha_refused() -> dict[str, Any] | None:
                    synced = condition(
                        await kube.get(API, "ClusterStack", "alpha", namespace), "ReleasesSynced"
                    )
                    return synced if synced.get("status") == "False" else None

                said = await wait_until(
                    alpha_refused, timeout=30, what="stack alpha to say its source refused it"
                )
                assert f"OCI repository {alpha_registry.host}/stacks/alpha" in said["message"], said
                assert "refused the credentials (HTTP 401)" in said["message"], said
                warnings = await events_for(kube, namespace, "ReleaseSourceFailed")
                assert [e["involvedObject"]["name"] for e in warnings] == ["alpha"], warnings
                assert all(wrong not in e["message"] for e in warnings)
                assert wrong not in process.log()
                await wait_until(
                    lambda: _stack_ready(kube, namespace, "beta"), timeout=30, what="stack beta Ready"
                )

                await kube.apply(
                    secret(
                        "alpha-registry", namespace, {"username": "alpha", "password": alpha_users["alpha"]}
                    )
                )
                release = await ready_release(kube, namespace, "docker-alpha-1-30-v1", timeout=60)
                assert await kube.get(
                    "cluster.x-k8s.io/v1beta2", "ClusterClass", "docker-alpha-1-30-v1", namespace
                )
                key = release["metadata"]["annotations"]["clusterstack.x-k8s.io/release-source"]
                source_dir = tmp_path / "downloads" / "cluster-stacks" / "sources" / key
                # Under its source, and under the identity (its credentials) that downloaded it.
                kept = list(source_dir.glob("*/docker-alpha-1-30-v1/metadata.yaml"))
                assert len(kept) == 1, "kept apart from other sources' and credentials' downloads"
                await wait_until(
                    lambda: _stack_ready(kube, namespace, "alpha"), timeout=30, what="stack alpha Ready"
                )
                assert (
                    condition(await kube.get(API, "ClusterStack", "beta", namespace), "Ready")["status"]
                    == "True"
                )
            finally:
                process.stop()


async def test_a_stack_follows_a_github_repository_of_its_own_with_a_token_from_a_secret(
    cluster_api: None,
    kube: Kube,
    namespace: str,
    control_plane: ControlPlane,
    clusterstack_tools: ClusterStackTools,
    tmp_path: Path,
    pytestconfig: pytest.Config,
) -> None:
    """``spec.source.github`` with ``tokenSecretRef`` and ``apiURL`` (GitHub Enterprise's, here the
    fake GitHub's), while the operator's own source is elsewhere: the token is read from the Secret
    and sent."""
    token = "ghp_stack0wnT0ken"
    published = tmp_path / "github"
    publish_release(published, "docker-gh-1-30-v1", helm=clusterstack_tools.helm)
    async with fake_github(published, "my-org", "stacks", token=token) as github:
        await kube.create(secret("github-token", namespace, {"token": token}))
        process = launch_over_nothing(control_plane, clusterstack_tools, tmp_path, pytestconfig.rootpath)
        try:
            source = {
                "github": {
                    "organization": "my-org",
                    "repository": "stacks",
                    "tokenSecretRef": {"name": "github-token"},
                    "apiURL": github.base_url,
                }
            }
            await kube.create(stack("gh", namespace, name="gh", noProvider=True, source=source))
            release = await ready_release(kube, namespace, "docker-gh-1-30-v1")
            assert release["metadata"]["annotations"]["clusterstack.x-k8s.io/release-source"].startswith(
                "github-"
            )
            await wait_until(lambda: _stack_ready(kube, namespace, "gh"), timeout=30, what="stack gh Ready")
            synced = condition(await kube.get(API, "ClusterStack", "gh", namespace), "ReleasesSynced")
            assert synced["message"] == "GitHub repository my-org/stacks has 1 release(s) of this stack", (
                synced
            )
            assert token not in process.log()
        finally:
            process.stop()


async def _tenants(kube: Kube, namespace: str, *tenants: str) -> list[str]:
    """Namespaces of other tenants beside the test's own, deleted by the caller."""
    names = [f"{namespace}-{tenant}"[:63] for tenant in tenants]
    for name in names:
        await kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    return names


async def _drop(kube: Kube, namespaces: list[str]) -> None:
    for name in namespaces:
        await kube.delete("v1", "Namespace", name)


async def _refused(kube: Kube, namespace: str, tag: str, *said: str) -> dict[str, Any]:
    """The release ``tag`` of ``namespace`` exists and says its download is refused, with ``said``."""

    async def refused() -> dict[str, Any] | None:
        release = await kube.get(API, "ClusterStackRelease", tag, namespace)
        downloaded = condition(release, "ClusterStackReleaseDownloaded")
        if downloaded.get("status") == "False" and all(part in downloaded["message"] for part in said):
            return downloaded
        return None

    found: dict[str, Any] = await wait_until(
        refused, timeout=30, what=f"{tag} in {namespace} to be refused with {said}"
    )
    return found


async def _served_nothing(kube: Kube, namespaces: list[str], tag: str) -> None:
    """No tenant of ``namespaces`` has the release Ready, or its ClusterClass."""
    for namespace in namespaces:
        release = await kube.get(API, "ClusterStackRelease", tag, namespace)
        assert not (release or {}).get("status", {}).get("ready"), (namespace, release)
        assert condition(release, "Ready").get("status") != "True", (namespace, release)
        assert await kube.get("cluster.x-k8s.io/v1beta2", "ClusterClass", tag, namespace) is None, namespace


async def test_a_tenant_with_wrong_missing_or_another_tenants_registry_credentials_never_gets_its_release(
    cluster_api: None,
    kube: Kube,
    namespace: str,
    control_plane: ControlPlane,
    clusterstack_tools: ClusterStackTools,
    tmp_path: Path,
    pytestconfig: pytest.Config,
) -> None:
    """One private OCI repository (htpasswd over TLS); its tenant's stack downloads and applies its
    release first, so that the operator holds it. Then, each in a namespace of its own, stacks naming
    the same repository and the same version: with a wrong password, with no credentials, with the
    name of the first tenant's Secret (which is not in their namespace), and a ClusterStackRelease
    written by hand with the first release's annotations. None gets the release, its ClusterClass or
    a Ready: each says the registry's refusal (or why it has no credentials). A stack given the right
    password later gets it."""
    tools, tag = clusterstack_tools, "docker-private-1-30-v1"
    _, release_dir = publish_release(tmp_path / "published", tag, helm=tools.helm)
    users = {"owner": "owner-htpasswd-pa55"}
    wrong = "not-the-owner-pa55word"
    with running_registry(
        tmp_path / "private",
        binary=tools.registry,
        tls=True,
        auth=htpasswd_auth(tmp_path / "private-auth", users),
    ) as registry:
        assert registry.ca_cert is not None
        ca = registry.ca_cert.read_text()
        await asyncio.to_thread(
            oras_push,
            registry,
            f"stacks/private:{tag}",
            release_dir,
            username="owner",
            password=users["owner"],
        )
        tenants = await _tenants(kube, namespace, "wrong", "anonymous", "borrowed", "forged")
        process = launch_over_nothing(control_plane, tools, tmp_path, pytestconfig.rootpath)
        try:
            for where in (namespace, *tenants):
                await kube.create(secret("registry-ca", where, {"ca.crt": ca}))
            await kube.create(
                secret("owner-registry", namespace, {"username": "owner", "password": users["owner"]})
            )
            await kube.create(secret("owner-registry", tenants[0], {"username": "owner", "password": wrong}))

            def source(credentials: str | None) -> dict[str, Any]:
                oci = oci_source(
                    registry, "stacks/private", credentials or "", caSecretRef={"name": "registry-ca"}
                )
                if credentials is None:
                    del oci["oci"]["credentialsSecretRef"]
                return oci

            await kube.create(
                stack("private", namespace, name="private", noProvider=True, source=source("owner-registry"))
            )
            owned = await ready_release(kube, namespace, tag)
            assert await kube.get("cluster.x-k8s.io/v1beta2", "ClusterClass", tag, namespace)

            pinned = {"noProvider": True, "autoSubscribe": False, "versions": ["v1"]}
            wrong_ns, anonymous_ns, borrowed_ns, forged_ns = tenants
            for where, credentials in (
                (wrong_ns, "owner-registry"),
                (anonymous_ns, None),
                (borrowed_ns, "owner-registry"),
            ):
                await kube.create(
                    stack("private", where, name="private", source=source(credentials), **pinned)
                )
            await kube.create(
                {
                    "apiVersion": API,
                    "kind": "ClusterStackRelease",
                    "metadata": {
                        "name": tag,
                        "namespace": forged_ns,
                        "annotations": owned["metadata"]["annotations"],
                    },
                    "spec": {},
                }
            )
            await _refused(kube, wrong_ns, tag, "refused the credentials (HTTP 401)")
            await _refused(kube, anonymous_ns, tag, "HTTP 401", "none are set")
            await _refused(
                kube, borrowed_ns, tag, "Secret owner-registry", f"does not exist in namespace {borrowed_ns}"
            )
            await _refused(kube, forged_ns, tag, "no ClusterStack of its namespace owns it")
            await asyncio.sleep(5)  # several more looks of each: still nothing served
            await _served_nothing(kube, tenants, tag)
            assert wrong not in process.log()
            assert all(wrong not in e["message"] for e in await events_for(kube, wrong_ns, "DownloadFailed"))

            await kube.apply(
                secret("owner-registry", wrong_ns, {"username": "owner", "password": users["owner"]})
            )
            await ready_release(kube, wrong_ns, tag, timeout=60)
            await _served_nothing(kube, [anonymous_ns, borrowed_ns, forged_ns], tag)
        finally:
            process.stop()
            await _drop(kube, tenants)


async def test_a_tenant_without_the_github_token_never_gets_the_private_repositorys_release(
    cluster_api: None,
    kube: Kube,
    namespace: str,
    control_plane: ControlPlane,
    clusterstack_tools: ClusterStackTools,
    tmp_path: Path,
    pytestconfig: pytest.Config,
) -> None:
    """A private GitHub repository: its tenant's stack (the token) gets the release; stacks of other
    namespaces naming the same repository with a wrong token or none get a refusal, never the
    operator's download of it."""
    token, tag = "ghp_privateT0ken", "docker-gh-1-30-v1"
    published = tmp_path / "github"
    publish_release(published, tag, helm=clusterstack_tools.helm)
    async with fake_github(published, "my-org", "stacks", token=token) as github:
        tenants = await _tenants(kube, namespace, "wrong", "anonymous")
        process = launch_over_nothing(control_plane, clusterstack_tools, tmp_path, pytestconfig.rootpath)
        try:

            def source(secret_name: str | None) -> dict[str, Any]:
                reference = {"tokenSecretRef": {"name": secret_name}} if secret_name else {}
                return {
                    "github": {
                        "organization": "my-org",
                        "repository": "stacks",
                        "apiURL": github.base_url,
                        **reference,
                    }
                }

            await kube.create(secret("github-token", namespace, {"token": token}))
            await kube.create(secret("github-token", tenants[0], {"token": "ghp_n0tTheT0ken"}))
            await kube.create(
                stack("gh", namespace, name="gh", noProvider=True, source=source("github-token"))
            )
            await ready_release(kube, namespace, tag)
            pinned = {"noProvider": True, "autoSubscribe": False, "versions": ["v1"]}
            await kube.create(stack("gh", tenants[0], name="gh", source=source("github-token"), **pinned))
            await kube.create(stack("gh", tenants[1], name="gh", source=source(None), **pinned))
            for where in tenants:
                await _refused(kube, where, tag, "GitHub repository my-org/stacks", "401")
            await asyncio.sleep(5)
            await _served_nothing(kube, tenants, tag)
            assert "ghp_n0tTheT0ken" not in process.log()
        finally:
            process.stop()
            await _drop(kube, tenants)


async def _stack_ready(kube: Kube, namespace: str, name: str) -> bool:
    return condition(await kube.get(API, "ClusterStack", name, namespace), "Ready").get("status") == "True"


@pytest.fixture(scope="module")
def capi_v1beta1_plane(
    start_module_control_plane: Any, clusterstack_tools: ClusterStackTools, pytestconfig: pytest.Config
) -> ControlPlane:
    """A management cluster of Cluster API v1.8, its own control plane: Clusters and ClusterClasses are
    served (and stored) in v1beta1 only, and a Cluster names its class in ``spec.topology.class``.
    ORC's CRDs too, for the openstack stacks' Images."""
    plane: ControlPlane = start_module_control_plane("capi-v1beta1")
    documents = [
        *crd_documents(pytestconfig.rootpath / "deploy" / "crds"),
        *crd_documents(clusterstack_tools.capi_v1beta1_crds),
        *crd_documents(clusterstack_tools.capd_crds),
        *crd_documents(clusterstack_tools.orc_crds),
    ]
    asyncio.run(install_crds(plane, documents))
    return plane


async def test_on_cluster_api_v1_8_a_v1beta1_cluster_holds_its_release_until_it_goes(
    capi_v1beta1_plane: ControlPlane,
    clusterstack_tools: ClusterStackTools,
    tmp_path: Path,
    pytestconfig: pytest.Config,
) -> None:
    """The seed's spelling end to end: a stack written for v1beta1, a v1beta1 Cluster using its class,
    on an API server that serves no v1beta2 at all (the operator's v1beta2 watch finds nothing)."""
    plane, tools = capi_v1beta1_plane, clusterstack_tools
    source_root = tmp_path / "source"
    source_root.mkdir()
    tag = "docker-old-1-30-v1"
    publish_release(source_root, tag, helm=tools.helm, cluster_api="v1beta1")
    source = {"OPERATOR_SUITE_RELEASE_SOURCE": "local", "OPERATOR_SUITE_LOCAL_RELEASES": str(source_root)}
    async with Kube.connect(plane.kubeconfig) as kube:
        namespace = "old-capi"
        await kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
        process = launch(plane, tools, tmp_path, pytestconfig.rootpath, source)
        try:
            spec = {"name": "old", "autoSubscribe": False, "noProvider": True}
            await kube.create(stack("old", namespace, versions=["v1"], **spec))
            release = await ready_release(kube, namespace, tag)
            assert sorted((r["kind"], r["version"], r["status"]) for r in release["status"]["resources"]) == [
                ("ClusterClass", "v1beta1", "synced"),
                ("DockerClusterTemplate", "v1beta1", "synced"),
            ]
            await kube.create(cluster("user", namespace, tag, version="v1beta1"))
            used = await kube.get("cluster.x-k8s.io/v1beta1", "Cluster", "user", namespace)
            assert used is not None
            assert used["spec"]["topology"]["class"] == tag

            async def addon() -> dict[str, Any] | None:
                return await kube.get(API, "ClusterAddon", "cluster-addon-user", namespace)

            made: Any = await wait_until(addon, timeout=30, what="the v1beta1 Cluster's ClusterAddon")
            assert made["spec"]["clusterRef"]["apiVersion"] == "cluster.x-k8s.io/v1beta1"

            await kube.apply(stack("old", namespace, versions=["v2"], **spec))
            await kube.delete(API, "ClusterStackRelease", tag, namespace)

            async def held() -> dict[str, Any] | None:
                found = await kube.get(API, "ClusterStackRelease", tag, namespace)
                return found if condition(found, "Ready").get("reason") == "ClusterClassInUse" else None

            waiting: Any = await wait_until(held, timeout=30, what="the deletion to wait for the Cluster")
            assert "Cluster user" in condition(waiting, "Ready")["message"]
            assert await kube.get("cluster.x-k8s.io/v1beta1", "ClusterClass", tag, namespace)

            await kube.delete("cluster.x-k8s.io/v1beta1", "Cluster", "user", namespace)
            await gone(kube, API, "ClusterStackRelease", tag, namespace)
            await gone(kube, "cluster.x-k8s.io/v1beta1", "ClusterClass", tag, namespace)
        finally:
            process.stop()


@pytest.fixture(scope="module")
def workload_plane(start_module_control_plane: Any) -> ControlPlane:
    """A second control plane: the workload cluster that the Cluster object stands for."""
    plane: ControlPlane = start_module_control_plane("workload")
    return plane


async def test_a_clusters_addons_follow_its_class_in_the_workload_cluster(
    kube: Kube,
    stack_operator: OperatorProcess,
    namespace: str,
    releases: Releases,
    workload_plane: ControlPlane,
) -> None:
    """The whole journey of a Cluster's addons: waiting for the workload cluster, applied there with
    values from the Cluster, repaired, kept across a class with the same addons and across an
    operator restart (nothing written again), replaced by new ones; once the Cluster is gone, its
    ClusterAddon goes and the old releases can go."""
    releases.publish("docker-journey-1-30-v1", addon_version="v1")
    releases.publish("docker-journey-1-30-v2", addon_version="v1")
    releases.publish("docker-journey-1-30-v3", addon_version="v2")
    spec = {"name": "journey", "autoSubscribe": False, "noProvider": True}
    await kube.create(stack("journey", namespace, versions=["v1", "v2", "v3"], **spec))
    for version in (1, 2, 3):
        await ready_release(kube, namespace, f"docker-journey-1-30-v{version}")
    # The infrastructure object the Cluster references: its values template reads it as .InfraCluster.
    infrastructure = "infrastructure.cluster.x-k8s.io"
    await kube.create(
        {
            "apiVersion": f"{infrastructure}/v1beta2",
            "kind": "DockerCluster",
            "metadata": {"name": "journey", "namespace": namespace},
            "spec": {},
        }
    )
    workload_cluster = cluster("journey", namespace, "docker-journey-1-30-v1", endpoint_port=6443)
    workload_cluster["spec"]["infrastructureRef"] = {
        "apiGroup": infrastructure,
        "kind": "DockerCluster",
        "name": "journey",
    }
    await kube.create(workload_cluster)

    async def addon_where(check: Any) -> dict[str, Any] | None:
        found = await kube.get(API, "ClusterAddon", "cluster-addon-journey", namespace)
        return found if found is not None and check(found) else None

    waiting: Any = await wait_until(
        lambda: addon_where(lambda a: condition(a, "ClusterReady").get("reason") == "WaitingForKubeconfig"),
        timeout=30,
        what="the ClusterAddon to wait for the kubeconfig",
    )
    assert "journey-kubeconfig" in condition(waiting, "ClusterReady")["message"]

    await kube.create(kubeconfig_secret("journey", namespace, workload_plane))
    applied: Any = await wait_until(
        lambda: addon_where(lambda a: (a.get("status") or {}).get("ready")),
        timeout=60,
        what="the addons applied",
    )
    assert (applied["spec"]["clusterStack"], applied["spec"]["version"]) == ("docker-journey-1-30-v1", "v1")
    assert {(r["kind"], r["name"], r["status"]) for r in applied["status"]["resources"]} == {
        ("CustomResourceDefinition", "addonwidgets.addons.example.com", "synced"),
        ("Namespace", "addon-system", "synced"),
        ("ConfigMap", "addon-info", "synced"),
        ("ConfigMap", "only-in-v1", "synced"),
    }
    async with Kube.connect(workload_plane.kubeconfig) as workload:
        info = await workload.get("v1", "ConfigMap", "addon-info", "kube-system")
        assert info is not None
        assert info["data"] == {
            "controlPlaneHost": "127.0.0.1",
            "infraCluster": "DockerCluster/journey",  # found through the Cluster's v1beta2 reference
            "addonVersion": "v1",
            "kubernetesVersion": "v1.30.10",
        }
        assert await workload.get(
            "apiextensions.k8s.io/v1", "CustomResourceDefinition", "addonwidgets.addons.example.com"
        )

        # Deleted by hand in the workload cluster: restored at the next look.
        await workload.delete("v1", "ConfigMap", "addon-info", "kube-system")
        restored: Any = await wait_until(
            lambda: workload.get("v1", "ConfigMap", "addon-info", "kube-system"),
            timeout=30,
            what="addon-info back",
        )

        # v2 has the same cluster addons: nothing is applied again.
        await kube.apply(
            {
                **workload_cluster,
                "spec": {
                    **workload_cluster["spec"],
                    "topology": {"classRef": {"name": "docker-journey-1-30-v2"}, "version": "v1.30.10"},
                },
            }
        )
        await wait_until(
            lambda: addon_where(lambda a: a["spec"]["clusterStack"] == "docker-journey-1-30-v2"),
            timeout=30,
            what="the addon to follow the class to v2",
        )

        async def told() -> bool:
            notes = [e.get("message", "") for e in await events_for(kube, namespace, "ClusterAddonApplied")]
            return any("docker-journey-1-30-v2 has the same cluster addons" in n for n in notes)

        # The Event tells the story (the condition shows the state, which the next look rewrites).
        await wait_until(told, timeout=15, what="an Event saying nothing was re-applied")
        kept = await workload.get("v1", "ConfigMap", "addon-info", "kube-system")
        assert kept is not None
        assert kept["metadata"]["resourceVersion"] == restored["metadata"]["resourceVersion"]

        # The operator restarts mid-journey: it looks again, and writes nothing, here or there. First
        # the look after the move has rewritten HelmChartApplied from the move's words to the steady ones.
        async def steady() -> dict[str, Any] | None:
            found = await addon_where(
                lambda a: "objects of" in condition(a, "HelmChartApplied").get("message", "")
            )
            await asyncio.sleep(3)  # more than one look: a status write still under way shows now
            again = await kube.get(API, "ClusterAddon", "cluster-addon-journey", namespace)
            unchanged = found is not None and again is not None
            return found if unchanged and found["metadata"] == again["metadata"] else None

        before = await wait_until(steady, timeout=30, what="the steady state after the move")
        assert before is not None
        stack_operator.stop()
        stack_operator.start()
        await asyncio.sleep(5)  # more than two looks at the workload cluster (every 2 s here)
        after = await kube.get(API, "ClusterAddon", "cluster-addon-journey", namespace)
        assert after is not None
        assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
        still = await workload.get("v1", "ConfigMap", "addon-info", "kube-system")
        assert still is not None
        assert still["metadata"]["resourceVersion"] == restored["metadata"]["resourceVersion"]

        # v3 has new cluster addons: applied, and what only v1's had is gone.
        await kube.apply(
            {
                **workload_cluster,
                "spec": {
                    **workload_cluster["spec"],
                    "topology": {"classRef": {"name": "docker-journey-1-30-v3"}, "version": "v1.30.10"},
                },
            }
        )
        await wait_until(
            lambda: addon_where(lambda a: a["spec"]["version"] == "v2" and a["status"]["ready"]),
            timeout=30,
            what="the addons of v3",
        )
        assert await workload.get("v1", "ConfigMap", "only-in-v2", "addon-system")
        assert await workload.get("v1", "ConfigMap", "only-in-v1", "addon-system") is None
        updated = await workload.get("v1", "ConfigMap", "addon-info", "kube-system")
        assert updated is not None
        assert updated["data"]["addonVersion"] == "v2"

    await kube.delete("cluster.x-k8s.io/v1beta2", "Cluster", "journey", namespace)
    await gone(kube, API, "ClusterAddon", "cluster-addon-journey", namespace)
    # No Cluster uses v1 or v2 any more: the stack can let them go.
    await kube.patch(API, "ClusterStack", "journey", namespace, {"spec": {"versions": ["v3"]}})
    for old in ("docker-journey-1-30-v1", "docker-journey-1-30-v2"):
        await gone(kube, API, "ClusterStackRelease", old, namespace)
    assert await kube.get(API, "ClusterStackRelease", "docker-journey-1-30-v3", namespace)


async def test_a_paused_cluster_gets_no_writes_until_it_is_unpaused(
    kube: Kube,
    stack_operator: OperatorProcess,
    namespace: str,
    releases: Releases,
    workload_plane: ControlPlane,
) -> None:
    """As clusterctl move pauses a Cluster (spec.paused): its ClusterAddon says Paused and applies
    nothing, whatever wakes it, until the pause ends; a Cluster made paused gets no ClusterAddon."""
    releases.publish("docker-pausing-1-30-v1", addon_version="v1")
    spec = {"name": "pausing", "autoSubscribe": False, "noProvider": True}
    await kube.create(stack("pausing", namespace, versions=["v1"], **spec))
    await ready_release(kube, namespace, "docker-pausing-1-30-v1")
    await kube.create(cluster("pausing", namespace, "docker-pausing-1-30-v1", endpoint_port=6443))

    async def addon_where(check: Any) -> dict[str, Any] | None:
        found = await kube.get(API, "ClusterAddon", "cluster-addon-pausing", namespace)
        return found if found is not None and check(found) else None

    await wait_until(
        lambda: addon_where(lambda a: condition(a, "ClusterReady").get("reason") == "WaitingForKubeconfig"),
        timeout=30,
        what="the ClusterAddon to wait for the kubeconfig",
    )
    await kube.patch("cluster.x-k8s.io/v1beta2", "Cluster", "pausing", namespace, {"spec": {"paused": True}})
    paused: Any = await wait_until(
        lambda: addon_where(lambda a: condition(a, "Paused").get("status") == "True"),
        timeout=30,
        what="the ClusterAddon to say Paused",
    )
    assert "Cluster pausing is paused" in condition(paused, "Paused")["message"]
    await kube.create(kubeconfig_secret("pausing", namespace, workload_plane))  # wakes it: still paused
    await asyncio.sleep(5)
    still: Any = await kube.get(API, "ClusterAddon", "cluster-addon-pausing", namespace)
    assert not (still.get("status") or {}).get("resources"), "nothing applied while paused"
    assert not still["spec"].get("version")
    assert condition(still, "ClusterReady")["reason"] == "WaitingForKubeconfig", "left as it was"

    moved_in = cluster("moved-in", namespace, "docker-pausing-1-30-v1")
    moved_in["spec"]["paused"] = True
    await kube.create(moved_in)
    await kube.patch("cluster.x-k8s.io/v1beta2", "Cluster", "pausing", namespace, {"spec": {"paused": False}})
    applied: Any = await wait_until(
        lambda: addon_where(lambda a: (a.get("status") or {}).get("ready")),
        timeout=60,
        what="the addons applied once unpaused",
    )
    assert condition(applied, "Paused")["status"] == "False"
    assert applied["spec"]["version"] == "v1"
    assert await kube.get(API, "ClusterAddon", "cluster-addon-moved-in", namespace) is None, (
        "a Cluster made paused (clusterctl move) gets no ClusterAddon: its own is moved with it"
    )
    for name in ("pausing", "moved-in"):
        await kube.delete("cluster.x-k8s.io/v1beta2", "Cluster", name, namespace)


async def test_a_stage_chart_declaring_remote_dependencies_gets_them_from_their_repository(
    kube: Kube,
    stack_operator: OperatorProcess,
    namespace: str,
    releases: Releases,
    workload_plane: ControlPlane,
    tmp_path: Path,
) -> None:
    """As scs2's stages: a chart folder whose Chart.yaml names a dependency in a chart repository, and
    no charts/ folder. Rendered as upstream renders it (--dependency-update), the dependency's objects
    land in the workload cluster with the stage's own."""
    dependency = dependency_chart(tmp_path)
    async with chart_repository(tmp_path / "helm", [dependency]) as repository:
        releases.publish(
            "docker-remote-1-30-v1",
            staged=True,
            stages=ONE_STAGE,
            stage_dependencies={"stage-one": [dependency_on(dependency, repository.url)]},
        )
        await _cluster_on_its_release(kube, namespace, workload_plane, "remote")
        await _stage_done_with_dependency(kube, namespace, workload_plane, "remote")
        assert "/index.yaml" in repository.requests, "the dependency came from its repository"
    await _cluster_removed(kube, namespace, workload_plane, "remote", DEPENDENCY_STAGE_LEFT)


DEPENDENCY_STAGE_LEFT = ("stage-one", "from-dependency")
"""What a one-stage release with a dependency leaves in the workload cluster."""


async def _cluster_removed(
    kube: Kube, namespace: str, workload_plane: ControlPlane, name: str, left: tuple[str, ...]
) -> None:
    """Delete Cluster ``name``, wait for its ClusterAddon to go, then delete the ConfigMaps ``left`` in
    the workload cluster's kube-system: the next test of this module shares that workload cluster (one
    asserts that no stage-one is there). The ClusterAddon goes first: alive, it would restore them."""
    await kube.delete("cluster.x-k8s.io/v1beta2", "Cluster", name, namespace)

    async def addon_gone() -> bool:
        return await kube.get(API, "ClusterAddon", f"cluster-addon-{name}", namespace) is None

    await wait_until(addon_gone, timeout=60, what="the ClusterAddon of the deleted Cluster to go")
    async with Kube.connect(workload_plane.kubeconfig) as workload:
        for config_map in left:
            await workload.delete("v1", "ConfigMap", config_map, "kube-system")


async def _cluster_on_its_release(
    kube: Kube, namespace: str, workload_plane: ControlPlane, name: str, **spec: Any
) -> None:
    """ClusterStack ``name`` (its release docker-<name>-1-30-v1 alone, no provider; ``spec`` besides),
    that release Ready, and a Cluster ``name`` on its class whose workload cluster is ``workload_plane``."""
    tag = f"docker-{name}-1-30-v1"
    spec = {"name": name, "versions": ["v1"], "autoSubscribe": False, "noProvider": True, **spec}
    await kube.create(stack(name, namespace, **spec))
    await ready_release(kube, namespace, tag)
    await kube.create(cluster(name, namespace, tag, endpoint_port=6443))
    await kube.create(kubeconfig_secret(name, namespace, workload_plane))


def _with_packaged_dependency(chart_source: Path, dependency: Path, helm_home: Path, into: Path) -> Path:
    """A copy of the cluster-addon chart ``chart_source`` that carries ``dependency`` packaged in its
    ``charts/`` and names it in its Chart.yaml, from a repository where nothing listens (discard's
    port 9 of loopback: rendering it must never ask there)."""
    chart = into / "cluster-addon-with-subchart"
    shutil.copytree(chart_source, chart)
    (chart / "charts").mkdir()
    done = run_helm(helm_home, "package", str(dependency), "--destination", str(chart / "charts"))
    assert done.returncode == 0, done.stderr
    metadata = yaml.safe_load((chart / "Chart.yaml").read_text())
    metadata["dependencies"] = [dependency_on(dependency, "oci://127.0.0.1:9/never-asked")]
    (chart / "Chart.yaml").write_text(yaml.safe_dump(metadata))
    return chart


async def _stage_done_with_dependency(
    kube: Kube, namespace: str, workload_plane: ControlPlane, name: str
) -> None:
    """Until the ClusterAddon of Cluster ``name`` has its one stage done, then the dependency's
    ConfigMap and the stage's own are in the workload cluster."""

    async def stage_done() -> dict[str, Any] | None:
        found = await kube.get(API, "ClusterAddon", f"cluster-addon-{name}", namespace)
        return found if stages_of(found) == [("stage-one", "done")] else None

    await wait_until(stage_done, timeout=60, what="the stage, with its dependency, done")
    await _dependency_applied(workload_plane, also="stage-one")


async def _dependency_applied(workload_plane: ControlPlane, also: str) -> None:
    """The dependency's ConfigMap is in the workload cluster, beside the chart's own ConfigMap ``also``."""
    async with Kube.connect(workload_plane.kubeconfig) as workload:
        fetched = await workload.get("v1", "ConfigMap", "from-dependency", "kube-system")
        assert fetched is not None
        assert fetched["data"] == {"chart": "addon-dependency"}
        assert await workload.get("v1", "ConfigMap", also, "kube-system") is not None


async def test_an_addon_chart_with_a_packaged_subchart_renders_it_and_asks_no_repository(
    kube: Kube,
    stack_operator: OperatorProcess,
    namespace: str,
    releases: Releases,
    workload_plane: ControlPlane,
    tmp_path: Path,
) -> None:
    """Upstream #277: a cluster-addon chart whose Chart.yaml lists a dependency that its charts/
    carries, packaged (``helm dependency build`` before ``helm package``, as a provider publishes it).
    Its objects reach the workload cluster with the chart's own; the dependency's repository, where
    nothing listens, is never asked."""
    dependency = dependency_chart(tmp_path / "charts")
    chart = _with_packaged_dependency(CLUSTER_ADDON_CHART, dependency, tmp_path / "helm", tmp_path)
    releases.publish("docker-subchart-1-30-v1", addon_chart=chart)
    await _cluster_on_its_release(kube, namespace, workload_plane, "subchart")

    async def applied() -> dict[str, Any] | None:
        found = await kube.get(API, "ClusterAddon", "cluster-addon-subchart", namespace)
        return found if condition(found, "HelmChartApplied").get("status") == "True" else None

    found = await wait_until(applied, timeout=60, what="the cluster addons applied")
    resources = [(r["kind"], r["name"]) for r in found["status"]["resources"]]
    assert ("ConfigMap", "from-dependency") in resources, resources
    await _dependency_applied(workload_plane, also="addon-info")
    await kube.delete("cluster.x-k8s.io/v1beta2", "Cluster", "subchart", namespace)


async def test_a_stage_charts_dependency_in_the_stacks_own_registry_is_fetched_with_the_stacks_credentials(
    cluster_api: None,
    kube: Kube,
    namespace: str,
    control_plane: ControlPlane,
    clusterstack_tools: ClusterStackTools,
    workload_plane: ControlPlane,
    tmp_path: Path,
    pytestconfig: pytest.Config,
) -> None:
    """scs2's stage charts name their dependencies and ship no charts/; here the dependency is in the
    stack's own OCI registry (TLS with its own CA, an htpasswd password), pushed there by ``helm push``.
    The stage renders with it, fetched with the stack's credentials and CA from its Secrets (helm is
    given them in files of its own, removed after), and the password is in no log."""
    tools, users = clusterstack_tools, {"provider": "provider-pa55-for-charts"}
    dependency = dependency_chart(tmp_path / "charts")
    with running_registry(
        tmp_path / "registry",
        binary=tools.registry,
        tls=True,
        auth=htpasswd_auth(tmp_path / "registry-auth", users),
    ) as registry:
        assert registry.ca_cert is not None
        pushed = await asyncio.to_thread(
            push_chart,
            tmp_path / "helm",
            dependency,
            registry,
            "charts",
            username="provider",
            password=users["provider"],
        )
        _, published = publish_release(
            tmp_path / "published",
            "docker-deps-1-30-v1",
            helm=tools.helm,
            staged=True,
            stages=ONE_STAGE,
            stage_dependencies={"stage-one": [dependency_on(dependency, pushed)]},
        )
        await asyncio.to_thread(
            oras_push,
            registry,
            "stacks/deps:docker-deps-1-30-v1",
            published,
            username="provider",
            password=users["provider"],
        )
        credentials = {"username": "provider", "password": users["provider"]}
        await kube.create(secret("deps-registry", namespace, credentials))
        await kube.create(secret("deps-ca", namespace, {"ca.crt": registry.ca_cert.read_text()}))
        process = launch_over_nothing(control_plane, tools, tmp_path, pytestconfig.rootpath)
        try:
            source = oci_source(registry, "stacks/deps", "deps-registry", caSecretRef={"name": "deps-ca"})
            await _cluster_on_its_release(kube, namespace, workload_plane, "deps", source=source)
            await _stage_done_with_dependency(kube, namespace, workload_plane, "deps")
            assert users["provider"] not in process.log()
            helm_home = tmp_path / "downloads"
            left = [p for p in helm_home.rglob("config.json") if users["provider"] in p.read_text()]
            assert left == [], f"helm's registry config with the password left behind: {left}"
            await _cluster_removed(kube, namespace, workload_plane, "deps", DEPENDENCY_STAGE_LEFT)
        finally:
            process.stop()


async def test_a_staged_release_resumes_its_stages_after_the_operator_is_killed_between_them(
    kube: Kube,
    stack_operator: OperatorProcess,
    namespace: str,
    releases: Releases,
    workload_plane: ControlPlane,
) -> None:
    """Upstream's clusteraddon.yaml: stage one is applied, stage two waits for its pre-condition; the
    operator is killed there; once the condition holds, the restarted operator applies stage two
    (not stage one again) and reports both done, from the state it left in the ClusterAddon's status."""
    releases.publish("docker-staged-1-30-v1", staged=True)
    spec = {"name": "staged", "autoSubscribe": False, "noProvider": True}
    await kube.create(stack("staged", namespace, versions=["v1"], **spec))
    await ready_release(kube, namespace, "docker-staged-1-30-v1")
    workload_cluster = cluster("staged", namespace, "docker-staged-1-30-v1", endpoint_port=6443)
    await kube.create(workload_cluster)
    await kube.create(kubeconfig_secret("staged", namespace, workload_plane))

    async def addon() -> dict[str, Any] | None:
        return await kube.get(API, "ClusterAddon", "cluster-addon-staged", namespace)

    async def stages_are(*wanted: tuple[str, str]) -> dict[str, Any] | None:
        found = await addon()
        # The stages and the Ready condition may land in two status writes: wait for both.
        ready = condition(found or {}, "Ready") or {}
        return found if stages_of(found) == list(wanted) and "status" in ready else None

    async with Kube.connect(workload_plane.kubeconfig) as workload:
        try:
            waiting: Any = await wait_until(
                lambda: stages_are(("stage-one", "done"), ("stage-two", "waitingForPreCondition")),
                timeout=60,
                what="stage one done and stage two waiting for its pre-condition",
            )
            assert waiting["status"]["hook"] == "AfterControlPlaneInitialized"
            assert waiting["status"]["hookRelease"] == "docker-staged-1-30-v1"
            assert condition(waiting, "EvaluatedCEL")["reason"] == "FailedToEvaluatePreCondition"
            assert "goAhead to exist" in condition(waiting, "EvaluatedCEL")["message"]
            assert condition(waiting, "Ready")["status"] == "False"
            stage_one = await workload.get("v1", "ConfigMap", "stage-one", "kube-system")
            assert stage_one is not None
            assert stage_one["data"] == {"host": "127.0.0.1"}  # its overwrite.yaml, over the Cluster
            assert await workload.get("v1", "ConfigMap", "stage-two", "kube-system") is None

            stack_operator.kill()
            await workload.create(
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {"name": "go-ahead", "namespace": "kube-system"},
                    "data": {"ready": "yes"},
                }
            )
            stack_operator.start()

            done: Any = await wait_until(
                lambda: stages_are(("stage-one", "done"), ("stage-two", "done")),
                timeout=60,
                what="both stages done after the restart",
            )
            assert await workload.get("v1", "ConfigMap", "stage-two", "kube-system")
            # Stage two's chart has Helm hooks: its pre-install hook ran, its pre-upgrade hook did not.
            assert await workload.get_live("v1", "ConfigMap", "stage-two-installed", "kube-system")
            assert await workload.get_live("v1", "ConfigMap", "stage-two-upgraded-v1", "kube-system") is None
            assert done["status"]["stages"][1]["helmHooks"]["event"] == "done"

            async def ready() -> dict[str, Any] | None:
                found = await addon()
                return found if (found or {}).get("status", {}).get("ready") else None

            done = await wait_until(ready, timeout=30, what="the ClusterAddon Ready")
            assert (done["spec"]["clusterStack"], done["spec"]["version"]) == ("docker-staged-1-30-v1", "v1")
            assert {r["name"] for r in done["status"]["resources"]} == {
                "stage-one",
                "stage-one-v1",
                "stage-two",
            }
            notes = [e.get("message", "") for e in await events_for(kube, namespace, "StageDone")]
            assert sum("(stage-one)" in n for n in notes) == 1, notes  # not applied again after the restart
            assert sum("(stage-two)" in n for n in notes) == 1, notes

            # A release with other addons: its BeforeClusterUpgrade stages run, and what only v1 had goes.
            releases.publish("docker-staged-1-30-v2", staged=True, addon_version="v2")
            await kube.patch(API, "ClusterStack", "staged", namespace, {"spec": {"versions": ["v1", "v2"]}})
            await ready_release(kube, namespace, "docker-staged-1-30-v2")
            await kube.patch(
                "cluster.x-k8s.io/v1beta2",
                "Cluster",
                "staged",
                namespace,
                {"spec": {"topology": {"classRef": {"name": "docker-staged-1-30-v2"}}}},
            )

            async def upgraded() -> dict[str, Any] | None:
                found = await addon()
                return found if (found or {}).get("spec", {}).get("version") == "v2" else None

            moved: Any = await wait_until(upgraded, timeout=60, what="the addons of v2")
            assert moved["status"]["hook"] == "BeforeClusterUpgrade"
            assert stages_of(moved) == [("stage-one", "done"), ("stage-two", "done")]
            assert await workload.get("v1", "ConfigMap", "stage-one-v2", "kube-system")
            assert await workload.get("v1", "ConfigMap", "stage-one-v1", "kube-system") is None
            # The upgrade ran stage two's pre-upgrade hook; hooks are never among the applied objects.
            assert await workload.get_live("v1", "ConfigMap", "stage-two-upgraded-v2", "kube-system")
            assert not {r["name"] for r in moved["status"]["resources"]} & {
                "stage-two-installed",
                "stage-two-upgraded-v2",
            }
        finally:
            left = ("go-ahead", "stage-one", "stage-two", "stage-one-v1", "stage-one-v2")
            hooks_left = ("stage-two-installed", "stage-two-upgraded-v2")
            await _cluster_removed(kube, namespace, workload_plane, "staged", left + hooks_left)


BROKEN_STAGES = """\
apiVersion: clusteraddonconfig.x-k8s.io/v1alpha1
addonStages:
  AfterControlPlaneInitialized:
    - name: stage-one
      action: apply
      waitForPostCondition:
        objects:
          - {key: one, apiVersion: v1, kind: ConfigMap, name: stage-one, namespace: kube-system}
        conditions: one.data.host ==
"""


async def test_a_stage_condition_that_does_not_compile_is_reported_with_its_expression_and_nothing_applied(
    operator_kube: Kube, namespace: str, releases: Releases, workload_plane: ControlPlane
) -> None:
    kube = operator_kube
    releases.publish("docker-broken-1-30-v1", staged=True, stages=BROKEN_STAGES)
    spec = {"name": "broken", "autoSubscribe": False, "noProvider": True}
    await kube.create(stack("broken", namespace, versions=["v1"], **spec))
    await ready_release(kube, namespace, "docker-broken-1-30-v1")
    await kube.create(cluster("broken", namespace, "docker-broken-1-30-v1"))
    await kube.create(kubeconfig_secret("broken", namespace, workload_plane))

    async def refused() -> dict[str, Any] | None:
        found = await kube.get(API, "ClusterAddon", "cluster-addon-broken", namespace)
        return found if condition(found, "ClusterAddonConfigValidated").get("status") == "False" else None

    addon: Any = await wait_until(refused, timeout=60, what="the broken condition reported")
    reported = condition(addon, "ClusterAddonConfigValidated")
    assert reported["reason"] == "InvalidCondition"
    assert reported["severity"] == "Error"
    assert "'one.data.host ==' does not compile: syntax error at line 1" in reported["message"]
    assert condition(addon, "Ready")["reason"] == "InvalidCondition"
    assert not (addon.get("status") or {}).get("stages")
    warnings = await events_for(kube, namespace, "ParsingClusterAddonConfigFailed")
    assert len(warnings) == 1
    async with Kube.connect(workload_plane.kubeconfig) as workload:
        assert await workload.get("v1", "ConfigMap", "stage-one", "kube-system") is None


class LateServer:
    """A workload API server that is not reachable yet: a loopback port where nothing listens, until
    :meth:`come_up` forwards it (TCP, TLS passing through) to the real one."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.port = free_port()
        self._server: asyncio.Server | None = None
        self._writers: list[asyncio.StreamWriter] = []

    async def come_up(self) -> None:
        self._server = await asyncio.start_server(self._forward, "127.0.0.1", self.port)

    async def close(self) -> None:
        """Stop listening and end every forwarded connection (their tasks then end by themselves)."""
        if self._server is not None:
            self._server.close()
        for writer in self._writers:
            writer.close()
        await asyncio.sleep(0.1)

    async def _forward(self, client_in: asyncio.StreamReader, client_out: asyncio.StreamWriter) -> None:
        server_in, server_out = await asyncio.open_connection("127.0.0.1", self.target_port)
        self._writers += [client_out, server_out]

        async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            try:
                while data := await reader.read(65536):
                    writer.write(data)
                    await writer.drain()
            except (ConnectionError, RuntimeError):
                pass  # the other side, or close(), ended it
            finally:
                writer.close()

        await asyncio.gather(pipe(client_in, server_out), pipe(server_in, client_out))


async def test_a_workload_cluster_not_reachable_yet_is_waited_for_and_served_once_it_answers(
    operator_kube: Kube, namespace: str, releases: Releases, workload_plane: ControlPlane
) -> None:
    kube = operator_kube
    releases.publish("docker-late-1-30-v1", addon_version="v1")
    spec = {"name": "late", "autoSubscribe": False, "noProvider": True}
    await kube.create(stack("late", namespace, versions=["v1"], **spec))
    await ready_release(kube, namespace, "docker-late-1-30-v1")
    late = LateServer(int(workload_plane.api_url.rsplit(":", 1)[1]))
    secret = kubeconfig_secret("late", namespace, workload_plane)
    text = workload_plane.kubeconfig.read_text().replace(
        workload_plane.api_url, f"https://127.0.0.1:{late.port}"
    )
    secret["data"]["value"] = base64.b64encode(text.encode()).decode()
    await kube.create(secret)
    workload_cluster = cluster("late", namespace, "docker-late-1-30-v1", endpoint_port=late.port)
    await kube.create(workload_cluster)

    async def addon_where(check: Any) -> dict[str, Any] | None:
        found = await kube.get(API, "ClusterAddon", "cluster-addon-late", namespace)
        return found if found is not None and check(found) else None

    try:
        waiting: Any = await wait_until(
            lambda: addon_where(
                lambda a: condition(a, "ClusterReady").get("reason") == "ControlPlaneNotReady"
            ),
            timeout=30,
            what="the ClusterAddon to wait for the workload API server",
        )
        said = condition(waiting, "ClusterReady")
        assert said["status"] == "False"
        assert said["severity"] == "Info"
        assert "does not answer yet" in said["message"]
        assert condition(waiting, "Ready")["reason"] == "ControlPlaneNotReady"

        await late.come_up()
        applied: Any = await wait_until(
            lambda: addon_where(lambda a: (a.get("status") or {}).get("ready")),
            timeout=30,
            what="the addons applied once the workload API server answers",
        )
        assert condition(applied, "ClusterReady")["status"] == "True"
    finally:
        await late.close()


async def test_a_release_rendering_a_kind_the_operator_may_not_watch_says_so_while_another_stack_gets_ready(
    operator_kube: Kube, namespace: str, releases: Releases, stack_operator: OperatorProcess
) -> None:
    """A chart that renders a ConfigMap (which the chart's RBAC does not grant at all) and a Secret
    (granted read only): that release reports both, with the API server's refusal, and one Warning;
    the operator's other stacks are not held up by a watch that can never sync; and the rendered Secret
    is watched by its labels, not as every Secret in the cluster."""
    kube = operator_kube
    outside = "docker-outside-1-30-v1"
    releases.publish(
        outside,
        extra_objects=[
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "stack-settings"},
                "data": {"a": "b"},
            },
            {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "stack-credentials"}, "data": {}},
        ],
    )
    await kube.create(
        stack("outside", namespace, name="outside", versions=["v1"], autoSubscribe=False, noProvider=True)
    )

    async def refused() -> dict[str, Any] | None:
        found = await kube.get(API, "ClusterStackRelease", outside, namespace)
        return found if condition(found, "HelmChartApplied").get("reason") == "FailedToApplyObjects" else None

    release: Any = await wait_until(refused, timeout=60, what="the release to report what it may not apply")
    entries = {(r["kind"], r["name"]): r for r in release["status"]["resources"]}
    config_map = entries[("ConfigMap", "stack-settings")]
    assert config_map["status"] == "not-synced"
    assert "may not watch ConfigMap objects" in config_map["error"]
    assert 'cannot list resource "configmaps"' in config_map["error"], "the missing permission, named"
    credentials = entries[("Secret", "stack-credentials")]
    assert credentials["status"] == "not-synced"
    assert 'cannot patch resource "secrets"' in credentials["error"]
    assert "may not watch" not in credentials["error"], "its labels' Secrets may be watched"
    assert entries[("ClusterClass", outside)]["status"] == "synced", "the rest is applied"
    assert not release["status"]["ready"]

    # The other stack of the same operator goes its whole way meanwhile.
    releases.publish("docker-inside-1-30-v1")
    await kube.create(
        stack("inside", namespace, name="inside", versions=["v1"], autoSubscribe=False, noProvider=True)
    )
    await ready_release(kube, namespace, "docker-inside-1-30-v1", timeout=30)

    warnings = [
        e for e in await events_for(kube, namespace, "ApplyFailed") if e["involvedObject"]["name"] == outside
    ]
    assert len(warnings) == 1, warnings
    caches = stack_operator.health()["caches"]
    assert "Secret.v1" not in caches, "no informer of every Secret in the cluster"
    assert caches["Secret.v1 app.kubernetes.io/managed-by=cluster-stack-operator"]["synced"]
    assert caches["Secret.v1 cluster.x-k8s.io/cluster-name"]["synced"]
    assert (
        "forbidden" in caches["ConfigMap.v1 app.kubernetes.io/managed-by=cluster-stack-operator"]["forbidden"]
    )


def without_secrets(documents: list[dict[str, Any]], suffix: str) -> list[dict[str, Any]]:
    """The chart's RBAC under other names (``suffix`` added: the chart's own account is left as it is),
    with no rule on Secrets."""
    narrowed = []
    for document in documents:
        document = {**document, "metadata": dict(document["metadata"])}
        if document["kind"] != "Namespace":
            document["metadata"]["name"] += suffix
        if "roleRef" in document:
            document["roleRef"] = {**document["roleRef"], "name": document["roleRef"]["name"] + suffix}
            document["subjects"] = [{**s, "name": s["name"] + suffix} for s in document["subjects"]]
        if "rules" in document:
            rules = [
                {**r, "resources": [x for x in r["resources"] if x != "secrets"]} for r in document["rules"]
            ]
            document["rules"] = [rule for rule in rules if rule["resources"]]
        narrowed.append(document)
    return narrowed


async def test_an_operator_that_may_not_watch_secrets_reports_it_on_each_cluster_addon_and_stacks_go_on(
    kube: Kube,
    cluster_api: None,
    control_plane: ControlPlane,
    clusterstack_tools: ClusterStackTools,
    releases: Releases,
    namespace: str,
    tmp_path: Path,
    pytestconfig: pytest.Config,
) -> None:
    """RBAC without the Secrets rule: the ClusterAddon controller, the only one that reads Secrets (the
    workload clusters' kubeconfigs), reports it on each ClusterAddon with one Warning; the ClusterStack
    and ClusterStackRelease controllers, which do not need them, go on."""
    documents = without_secrets(operator_rbac(chart_rules(pytestconfig.rootpath)), "-no-secrets")
    kubeconfig = account_kubeconfig(control_plane, documents, tmp_path / "narrow.kubeconfig")
    source = {"OPERATOR_SUITE_RELEASE_SOURCE": "local", "OPERATOR_SUITE_LOCAL_RELEASES": str(releases.root)}
    process = launch(
        control_plane, clusterstack_tools, tmp_path, pytestconfig.rootpath, source, kubeconfig=kubeconfig
    )
    try:
        tag = "docker-nosecrets-1-30-v1"
        releases.publish(tag)
        await kube.create(
            stack(
                "nosecrets",
                namespace,
                name="nosecrets",
                versions=["v1"],
                autoSubscribe=False,
                noProvider=True,
            )
        )
        await ready_release(kube, namespace, tag, timeout=30)
        await kube.create(cluster("workload", namespace, tag))

        async def reported() -> dict[str, Any] | None:
            found = await kube.get(API, "ClusterAddon", "cluster-addon-workload", namespace)
            return found if condition(found, "Ready").get("reason") == "WatchForbidden" else None

        addon: Any = await wait_until(
            reported, timeout=30, what="the ClusterAddon to report the watch refused"
        )
        ready = condition(addon, "Ready")
        assert ready["status"] == "False"
        assert ready["severity"] == "Error"
        assert ready["message"].startswith("the operator may not watch Secret (v1): ")
        assert 'cannot list resource "secrets"' in ready["message"]
        (warning,) = await wait_for_events(kube, namespace, "WatchForbidden")
        assert warning["involvedObject"]["name"] == "cluster-addon-workload"
        assert warning["type"] == "Warning"
        assert "Secret.v1 cluster.x-k8s.io/cluster-name" in process.health()["caches"]
        assert "looking again soon, then every 60 s" in process.log()
    finally:
        process.stop()


UPSTREAM_SHAPES = {
    # shape: (builder, stages, the stages whose overwrite.yaml names the Cluster, ORC Images in the class)
    "docker-scs": (docker_scs, ["cni", "metrics-server"], set(), False),
    "openstack-scs2": (
        openstack_scs2,
        ["cni", "metrics-server", "csi", "ccm"],
        {"metrics-server", "csi", "ccm"},
        True,
    ),
}


@pytest.mark.parametrize("shape", sorted(UPSTREAM_SHAPES))
async def test_an_upstream_shaped_stack_built_and_published_as_csctl_does_reaches_ready_with_its_addons(
    shape: str,
    capi_v1beta1_plane: ControlPlane,
    workload_plane: ControlPlane,
    clusterstack_tools: ClusterStackTools,
    oci_registry: RunningRegistry,
    tmp_path: Path,
    pytestconfig: pytest.Config,
) -> None:
    """A stack laid out as upstream's providers/docker/scs (stage charts vendoring their dependency)
    or providers/openstack/scs2 (stage charts naming theirs in a chart repository, an ORC Image in the
    class), built in hash mode and pushed as csctl builds and pushes it, followed from the registry:
    the release is Ready with its v1beta1 ClusterClass and templates applied, and a Cluster on it gets
    every stage of its addons in the workload cluster, dependencies and overwrite.yaml included."""
    build, stages, overwritten, with_image = UPSTREAM_SHAPES[shape]
    plane, tools = capi_v1beta1_plane, clusterstack_tools
    repository = f"upstream/{shape}"
    dependencies = [upstream_dependency(tmp_path / "charts", *DEPENDENCIES[stage]) for stage in stages]
    async with chart_repository(tmp_path / "helm", dependencies) as chart_repo:
        stack_dir = build(tmp_path / "stacks", chart_repo.url)
        release = await asyncio.to_thread(create_release, stack_dir, tmp_path / "releases", helm=tools.helm)
        await asyncio.to_thread(publish_release_oci, oci_registry, release, repository)
        config = StackConfig.read(stack_dir)
        version = yaml.safe_load((release / "metadata.yaml").read_text())["versions"]["clusterStack"]
        source = {
            "OCI_REPOSITORY": f"{oci_registry.host}/{repository}",
            "OPERATOR_SUITE_OCI_PLAIN_HTTP": "true",
        }
        namespace, cluster_name = shape, f"{shape}-cluster"
        async with Kube.connect(plane.kubeconfig) as kube:
            await kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
            process = launch(plane, tools, tmp_path, pytestconfig.rootpath, source)
            try:
                spec = {"name": config.name, "provider": config.provider, "channel": "custom"}
                await kube.create(
                    stack(
                        config.name,
                        namespace,
                        versions=[version],
                        autoSubscribe=False,
                        noProvider=True,
                        **spec,
                    )
                )
                ready = await ready_release(kube, namespace, release.name)
                # The class is named by its chart, {{ .Release.Name }}-{{ .Chart.Version }}: the dot form.
                class_name = f"{config.provider}-{config.name}-{config.kubernetes_minor}-{version}"
                assert "." in class_name, "a hash version's class name has its dot"
                assert await kube.get("cluster.x-k8s.io/v1beta1", "ClusterClass", class_name, namespace)
                applied = sorted((r["kind"], r["version"], r["status"]) for r in ready["status"]["resources"])
                expected = [
                    ("ClusterClass", "v1beta1", "synced"),
                    ("DockerClusterTemplate", "v1beta1", "synced"),
                ]
                if with_image:
                    expected = sorted([*expected, ("Image", "v1alpha1", "synced")])
                assert applied == expected
                if with_image:
                    image = await kube.get(
                        "openstack.k-orc.cloud/v1alpha1", "Image", "ubuntu-capi-image-v1.30.10", namespace
                    )
                    assert image is not None, "granted by the chart's default rbac.additionalRules"
                    assert image["spec"]["managementPolicy"] == "managed"

                await kube.create(
                    cluster(cluster_name, namespace, class_name, version="v1beta1", endpoint_port=6443)
                )
                await kube.create(kubeconfig_secret(cluster_name, namespace, workload_plane))

                async def all_done() -> dict[str, Any] | None:
                    found = await kube.get(API, "ClusterAddon", f"cluster-addon-{cluster_name}", namespace)
                    return found if stages_of(found) == [(stage, "done") for stage in stages] else None

                await wait_until(all_done, timeout=90, what=f"every stage of {shape} done")
            finally:
                process.stop()
            await kube.delete("cluster.x-k8s.io/v1beta1", "Cluster", cluster_name, namespace)
        fetched = [request for request in chart_repo.requests if request.endswith(".tgz")]
    if shape == "docker-scs":
        assert fetched == [], "vendored dependencies are not fetched"
    else:
        wanted = {f"/{name}-{version}.tgz" for name, version in map(DEPENDENCIES.get, stages)}
        assert set(fetched) == wanted, "each stage's dependency came from the chart repository"
    async with Kube.connect(workload_plane.kubeconfig) as workload:
        for stage in stages:
            name, dependency_version = DEPENDENCIES[stage]
            made = await workload.get("v1", "ConfigMap", name, "kube-system")
            assert made is not None, f"{stage}'s dependency {name} in the workload cluster"
            assert made["data"]["chart"] == f"{name}-{dependency_version}"
            assert made["data"]["setting"] == f"{stage}-default", "the stage's values.yaml, under its alias"
            assert made["data"]["cluster"] == (cluster_name if stage in overwritten else "")


async def test_an_addon_charts_helm_hooks_run_in_helms_order_and_a_refused_one_stops_the_upgrade(
    kube: Kube,
    stack_operator: OperatorProcess,
    namespace: str,
    releases: Releases,
    workload_plane: ControlPlane,
) -> None:
    """Hooks that need no node (a Secret and ConfigMaps): pre-install in weight order, the chart's
    objects, post-install; deleted by their policies, never kept against drift; an upgrade runs the
    pre-upgrade hook once; a hook the API server refuses stops the upgrade before the chart's objects.
    A hook Job that runs on real nodes is not tested yet (#52 goes on)."""
    refused = {"refusedPreInstall": True, "jobCommand": ""}
    releases.publish("docker-hooks-1-30-v1", addon_version="v1", addon_chart=HOOKS_ADDON_CHART)
    releases.publish("docker-hooks-1-30-v2", addon_version="v2", addon_chart=HOOKS_ADDON_CHART)
    releases.publish("docker-hooks-1-30-v3", addon_version="v3", addon_chart=HOOKS_ADDON_CHART,
                     addon_values=refused)  # fmt: skip
    spec = {"name": "hooks", "autoSubscribe": False, "noProvider": True}
    await kube.create(stack("hooks", namespace, versions=["v1", "v2", "v3"], **spec))
    for version in (1, 2, 3):
        await ready_release(kube, namespace, f"docker-hooks-1-30-v{version}")
    before = len(hook_writes(workload_plane))
    await kube.create(cluster("hooks", namespace, "docker-hooks-1-30-v1", endpoint_port=6443))
    await kube.create(kubeconfig_secret("hooks", namespace, workload_plane))

    async def addon_where(check: Any) -> dict[str, Any] | None:
        found = await kube.get(API, "ClusterAddon", "cluster-addon-hooks", namespace)
        return found if found is not None and check(found) else None

    def hooks_done(version: str) -> Any:
        def done(addon: dict[str, Any]) -> bool:
            hooks = (addon.get("status") or {}).get("helmHooks") or {}
            return hooks.get("version") == version and hooks.get("event") == "done"

        return done

    installed: Any = await wait_until(lambda: addon_where(hooks_done("v1")), timeout=60, what="installed")
    assert [(r["kind"], r["name"]) for r in installed["status"]["resources"]] == [("ConfigMap", "addon-main")]
    assert installed["spec"]["version"] == "v1"
    assert condition(installed, "HelmChartApplied")["status"] == "True"
    assert hook_writes(workload_plane)[before:] == [
        ("create", "hook-made-secret"),  # weight -5
        ("create", "hook-pre-install"),  # weight 1
        ("delete", "hook-pre-install"),  # hook-succeeded, once the pre-install hooks ran
        ("create", "addon-main"),
        ("create", "hook-post-install"),
        ("delete", "hook-post-install"),
    ]
    ran = [e["message"] for e in await wait_for_events(kube, namespace, "HelmHooksRan", count=2)]
    assert (
        "pre-install hooks ran: Secret kube-system/hook-made-secret, ConfigMap kube-system/hook-pre-install"
        in ran
    )

    async with Kube.connect(workload_plane.kubeconfig) as workload:
        assert await workload.get_live("v1", "Secret", "hook-made-secret", "kube-system") is not None
        # An event Helm does not know: helm template itself leaves the object out.
        assert await workload.get_live("v1", "ConfigMap", "hook-misspelt", "kube-system") is None
        # A hook is not kept against drift: deleted by hand, it stays deleted; the chart's object comes back.
        await workload.delete("v1", "Secret", "hook-made-secret", "kube-system")
        await workload.delete("v1", "ConfigMap", "addon-main", "kube-system")
        await wait_until(
            lambda: workload.get_live("v1", "ConfigMap", "addon-main", "kube-system"),
            timeout=30,
            what="addon-main restored",
        )
        await asyncio.sleep(4)  # two more looks (every 2 s here)
        assert await workload.get_live("v1", "Secret", "hook-made-secret", "kube-system") is None

        # An upgrade: the pre-upgrade hook runs once, no install hook again.
        mark = len(hook_writes(workload_plane))
        await kube.patch("cluster.x-k8s.io/v1beta2", "Cluster", "hooks", namespace,
                         {"spec": {"topology": {"classRef": {"name": "docker-hooks-1-30-v2"}}}})  # fmt: skip
        upgraded: Any = await wait_until(lambda: addon_where(hooks_done("v2")), timeout=60, what="upgraded")
        assert upgraded["spec"]["version"] == "v2"
        assert hook_writes(workload_plane)[mark:] == [("create", "hook-pre-upgrade-v2")]
        main = await workload.get_live("v1", "ConfigMap", "addon-main", "kube-system")
        assert main is not None
        assert main["data"] == {"version": "v2"}
        # The same state reads the same on every later look (issue 65: a periodic look rewrote it).
        applied = condition(upgraded, "HelmChartApplied")
        assert applied["message"].endswith("-cluster-addon-v2.tgz applied; its hooks ran"), applied
        await asyncio.sleep(5)  # two more looks
        later = await kube.get(API, "ClusterAddon", "cluster-addon-hooks", namespace)
        # observedGeneration may move on: the operator's own write of spec.version follows the
        # condition's, and a later look stamps the same condition with the new generation.
        said = ("status", "reason", "message", "lastTransitionTime")
        assert {k: condition(later, "HelmChartApplied")[k] for k in said} == {k: applied[k] for k in said}

        # A pre-upgrade hook the API server refuses: the run stops there, the chart's objects stay v2.
        await kube.patch("cluster.x-k8s.io/v1beta2", "Cluster", "hooks", namespace,
                         {"spec": {"topology": {"classRef": {"name": "docker-hooks-1-30-v3"}}}})  # fmt: skip

        def failed(addon: dict[str, Any]) -> bool:
            return condition(addon, "HelmChartApplied").get("reason") == "HelmHookFailed"

        stopped: Any = await wait_until(lambda: addon_where(failed), timeout=60, what="the refused hook")
        said = condition(stopped, "HelmChartApplied")["message"]
        assert said.startswith(
            "pre-upgrade hook ConfigMap kube-system/hook-refused failed: the API server refused it"
        )
        assert "the chart's objects are not applied" in said
        assert stopped["status"]["helmHooks"]["failed"].startswith("pre-upgrade hook ConfigMap")
        assert stopped["spec"]["version"] == "v2"
        await asyncio.sleep(4)
        main = await workload.get_live("v1", "ConfigMap", "addon-main", "kube-system")
        assert main is not None
        assert main["data"] == {"version": "v2"}, "nothing after the failed hook is applied"
        (warning,) = await wait_for_events(kube, namespace, "HelmHookFailed")
        assert warning["type"] == "Warning"

        # Asked to retry (as a user would once the cause is fixed): the failed event starts over, and
        # fails again here, said again; the same value does not retry twice.
        retry = {"metadata": {"annotations": {"clusterstack.x-k8s.io/retry-helm-hooks": "1"}}}
        await kube.patch(API, "ClusterAddon", "cluster-addon-hooks", namespace, retry)

        async def said_twice() -> bool:
            said = await events_for(kube, namespace, "HelmHookFailed")
            return sum(max(e.get("count") or 1, (e.get("series") or {}).get("count") or 1) for e in said) >= 2

        await wait_until(said_twice, timeout=30, what="the failure said again after the retry")
        (again,) = await wait_for_events(kube, namespace, "HelmHooksRetried")
        assert "running the pre-upgrade hooks of addon version v3 again" in again["message"]
        retried: Any = await wait_until(
            lambda: addon_where(lambda a: a["status"]["helmHooks"].get("retried") == "1"),
            timeout=30,
            what="the retry recorded",
        )
        assert retried["status"]["helmHooks"]["failed"].startswith("pre-upgrade hook ConfigMap")
        await asyncio.sleep(4)
        assert not await said_thrice(kube, namespace), "the same value retries once"
    assert "Traceback" not in stack_operator.log()


async def said_thrice(kube: Kube, namespace: str) -> bool:
    said = await events_for(kube, namespace, "HelmHookFailed")
    return sum(max(e.get("count") or 1, (e.get("series") or {}).get("count") or 1) for e in said) >= 3


def class_hook(name: str, event: str) -> dict[str, Any]:
    """A hook of a cluster-class chart, of a kind the operator may write in the management cluster."""
    return {
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2",
        "kind": "DockerClusterTemplate",
        "metadata": {"name": name, "annotations": {"helm.sh/hook": event}},
        "spec": {"template": {"spec": {}}},
    }


async def test_a_cluster_class_charts_install_and_delete_hooks_run_around_its_objects(
    operator_kube: Kube,
    stack_operator: OperatorProcess,
    namespace: str,
    releases: Releases,
    control_plane: ControlPlane,
) -> None:
    """The cluster-class chart's hooks, in the management cluster: its pre-install hook before its
    ClusterClass, once; when the release is deleted, its pre-delete hook before the ClusterClass goes
    and its post-delete hook after, as ``helm install`` and ``helm uninstall`` run them."""
    kube, tag = operator_kube, "docker-classhooks-1-30-v1"
    hooks = [
        class_hook("class-pre-install", "pre-install"),
        class_hook("class-pre-delete", "pre-delete"),
        class_hook("class-post-delete", "post-delete"),
    ]
    releases.publish(tag, extra_objects=hooks)
    spec = {"name": "classhooks", "versions": ["v1"], "autoSubscribe": False, "noProvider": True}
    await kube.create(stack("classhooks", namespace, **spec))
    release = await ready_release(kube, namespace, tag)
    assert release["status"]["helmHooks"]["event"] == "done"
    assert release["status"]["helmHooks"]["version"] == tag
    assert "class-pre-install" not in {r["name"] for r in release["status"]["resources"]}
    names, kinds = ("class-", tag), ("clusterclasses", "dockerclustertemplates")
    writes = hook_writes(control_plane, namespace, names, kinds)
    assert writes.index(("create", "class-pre-install")) < writes.index(("create", tag)), writes
    assert ("create", "class-pre-delete") not in writes

    await kube.delete(API, "ClusterStack", "classhooks", namespace)  # its release goes with it
    await gone(kube, API, "ClusterStackRelease", tag, namespace)
    writes = hook_writes(control_plane, namespace, names, kinds)
    assert writes.count(("create", "class-pre-install")) == 1, writes
    order = [
        writes.index(w)
        for w in (("create", "class-pre-delete"), ("delete", tag), ("create", "class-post-delete"))
    ]
    assert order == sorted(order), writes
    for name in ("class-pre-install", "class-pre-delete", "class-post-delete"):  # kept, as helm keeps them
        assert await kube.get_live(
            "infrastructure.cluster.x-k8s.io/v1beta2", "DockerClusterTemplate", name, namespace
        )


async def test_an_addon_with_delete_hooks_is_uninstalled_as_helm_does_while_its_cluster_is_there(
    kube: Kube,
    stack_operator: OperatorProcess,
    namespace: str,
    releases: Releases,
    workload_plane: ControlPlane,
) -> None:
    """A chart with a pre-delete and a post-delete hook: its ClusterAddon carries the uninstall
    finalizer. Its Cluster deleted with foreground propagation (the ClusterAddon goes first, while the
    Cluster is there): the pre-delete hook, the chart's objects deleted, the post-delete hook, as helm
    uninstall runs them. A Cluster deleted as Cluster API removes it (gone before its ClusterAddon):
    nothing runs and nothing is deleted in the workload cluster, said in an Event."""
    where = f"un-{namespace}"[:63]  # the workload cluster's namespace of this test's objects
    tag = "docker-uninstall-1-30-v1"
    values = {"deleteHooks": True, "namespace": where}
    releases.publish(tag, addon_version="v1", addon_chart=HOOKS_ADDON_CHART, addon_values=values)
    spec = {"name": "uninstall", "versions": ["v1"], "autoSubscribe": False, "noProvider": True}
    await kube.create(stack("uninstall", namespace, **spec))
    await ready_release(kube, namespace, tag)
    async with Kube.connect(workload_plane.kubeconfig) as workload:
        await workload.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": where}})

        async def installed(name: str) -> dict[str, Any] | None:
            found = await kube.get(API, "ClusterAddon", f"cluster-addon-{name}", namespace)
            hooks = ((found or {}).get("status") or {}).get("helmHooks") or {}
            finalizers = ((found or {}).get("metadata") or {}).get("finalizers") or []
            done = hooks.get("event") == "done" and "clusterstack.x-k8s.io/helm-delete-hooks" in finalizers
            return found if done else None

        await kube.create(cluster("foreground", namespace, tag, endpoint_port=6443))
        await kube.create(kubeconfig_secret("foreground", namespace, workload_plane))
        addon: Any = await wait_until(lambda: installed("foreground"), timeout=60, what="installed")
        assert addon["status"]["deleteHooks"] == [
            f"ConfigMap {where}/hook-pre-delete",
            f"ConfigMap {where}/hook-post-delete",
        ]
        assert await workload.get_live("v1", "ConfigMap", "hook-pre-delete", where) is None, "not at install"
        mark = len(hook_writes(workload_plane, where))
        await kube.delete(
            "cluster.x-k8s.io/v1beta2", "Cluster", "foreground", namespace, propagation="Foreground"
        )
        await gone(kube, API, "ClusterAddon", "cluster-addon-foreground", namespace)
        await gone(kube, "cluster.x-k8s.io/v1beta2", "Cluster", "foreground", namespace)
        assert hook_writes(workload_plane, where)[mark:] == [
            ("create", "hook-pre-delete"),
            ("delete", "hook-pre-delete"),  # hook-succeeded
            ("delete", "addon-main"),
            ("create", "hook-post-delete"),  # kept, as helm keeps it
        ]
        (said,) = await wait_for_events(kube, namespace, "ClusterAddonUninstalled")
        assert "deleted ConfigMap addon-main" in said["message"]
        assert await workload.get_live("v1", "ConfigMap", "hook-post-delete", where) is not None

        # Gone as Cluster API removes a Cluster (before its ClusterAddon): its workload cluster is gone
        # too, so nothing is run or deleted there, and the ClusterAddon does not hang.
        await kube.create(cluster("background", namespace, tag, endpoint_port=6443))
        await kube.create(kubeconfig_secret("background", namespace, workload_plane))
        await wait_until(lambda: installed("background"), timeout=60, what="installed again")
        mark = len(hook_writes(workload_plane, where))
        await kube.delete("cluster.x-k8s.io/v1beta2", "Cluster", "background", namespace)
        await gone(kube, API, "ClusterAddon", "cluster-addon-background", namespace)
        (not_run,) = await wait_for_events(kube, namespace, "HelmDeleteHooksNotRun")
        assert "its Cluster is gone" in not_run["message"]
        assert not_run["type"] == "Normal"
        assert hook_writes(workload_plane, where)[mark:] == []
        assert await workload.get_live("v1", "ConfigMap", "addon-main", where) is not None
    assert "Traceback" not in stack_operator.log()
