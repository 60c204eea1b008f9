"""The Cluster Stack operator's admission webhooks, called by a real API server.

One operator process serves the module's tests, as its ServiceAccount, with a CA and serving
certificate made for this run (the test kit's PKI: tls.crt, tls.key and ca.crt, as a cert-manager
Secret mounts them). It registers its ValidatingWebhookConfiguration by a loopback URL, never by a
Service: the API server would dial the Service's ClusterIP, which no traffic may reach here. When it
stops, the registration must be gone; the module removes whatever is left in any case.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from operator_core import errors
from operator_core.admission import AdmissionRequest, AdmissionServer, ValidatingWebhook, Verdict
from operator_core.kube import Kube
from operator_testkit.clusterstack_tools import ClusterStackTools
from operator_testkit.controlplane import ControlPlane, free_port
from operator_testkit.fixtures import Kubectl, crd_documents, install_crds, wait_until
from operator_testkit.operators import OperatorProcess, service_account_kubeconfig
from operator_testkit.webhooks import (
    CONFIGURATION_NAME,
    registration_rbac,
    serving_certificates,
    webhook_settings,
)
from releases import capi_cluster as cluster

API = "clusterstack.x-k8s.io/v1alpha1"
PROVIDER_API = "infrastructure.clusterstack.x-k8s.io/v1alpha1"
TEMPLATE_KIND = "TestProviderClusterStackReleaseTemplate"
CONFIGURATION = ("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration")
TESTS = Path(__file__).parent.parent


async def _prepare(control_plane: ControlPlane, tools: ClusterStackTools, rootpath: Path) -> None:
    documents = [
        *crd_documents(rootpath / "deploy" / "crds"),
        *crd_documents(tools.capi_crds),
        *crd_documents(TESTS / "clusterstack"),
    ]
    await install_crds(control_plane, documents)
    async with Kube.connect(control_plane.kubeconfig) as admin:
        for document in registration_rbac():
            await admin.apply(document)


async def _clean_up(control_plane: ControlPlane) -> bool:
    """Remove the registration and its role; whether the registration was still there."""
    async with Kube.connect(control_plane.kubeconfig) as admin:
        left = await admin.delete(*CONFIGURATION, CONFIGURATION_NAME)
        for document in registration_rbac():
            await admin.delete(document["apiVersion"], document["kind"], document["metadata"]["name"])
        return left


async def _webhooks_answer(control_plane: ControlPlane) -> None:
    """Until the API server calls the webhooks: it learns of a new configuration within a second or
    so. Asked with a ClusterAddon that only the webhook refuses, deleted again if it got through."""
    async with Kube.connect(control_plane.kubeconfig) as admin:
        probe_namespace = "webhook-probe"
        if await admin.get("v1", "Namespace", probe_namespace) is None:
            await admin.create(
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": probe_namespace}}
            )

        async def refused() -> bool:
            try:
                await admin.create(addon("probe", probe_namespace, cluster_namespace="elsewhere"))
            except errors.Forbidden as error:
                return "clusteraddons.clusterstack.x-k8s.io" in str(error)
            await admin.delete(API, "ClusterAddon", "probe", probe_namespace)
            return False

        await wait_until(refused, timeout=30, what="the API server to call the webhooks")
        await admin.delete("v1", "Namespace", probe_namespace)


@pytest.fixture(scope="module")
def webhook_operator(
    control_plane: ControlPlane,
    clusterstack_tools: ClusterStackTools,
    tmp_path_factory: pytest.TempPathFactory,
    pytestconfig: pytest.Config,
) -> Iterator[OperatorProcess]:
    """The operator with its webhooks on, registered by a loopback URL; gone (and unregistered) after."""
    home = tmp_path_factory.mktemp("webhook-operator")
    asyncio.run(_prepare(control_plane, clusterstack_tools, pytestconfig.rootpath))
    rbac = pytestconfig.rootpath / "charts" / "cluster-stack-operator" / "files" / "rbac-rules.yaml"
    kubeconfig = service_account_kubeconfig(control_plane, rbac, home / "operator.kubeconfig")
    (home / "releases").mkdir()
    port = free_port()
    environment = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "OCI_", "OPERATOR_SUITE_"))},
        "OPERATOR_SUITE_RELEASE_SOURCE": "local",
        "OPERATOR_SUITE_LOCAL_RELEASES": str(home / "releases"),
        "OPERATOR_SUITE_RELEASE_DIR": str(home / "downloads"),
        "OPERATOR_SUITE_HELM": str(clusterstack_tools.helm),
        **webhook_settings(home, port),
    }
    process = OperatorProcess(
        "cluster-stack-operator", kubeconfig, home / "operator.log", "--verbose", environment=environment
    )
    left_behind = True
    try:
        process.start()
        asyncio.run(_webhooks_answer(control_plane))
        yield process
        process.stop()
    finally:
        process.stop()
        left_behind = asyncio.run(_clean_up(control_plane))
    assert not left_behind, f"the operator left {CONFIGURATION_NAME} registered:\n{process.log()[-3000:]}"


@pytest.fixture
def kube_with_webhooks(kube: Kube, webhook_operator: OperatorProcess) -> Kube:
    """The test's (admin) client, once the API server calls the webhooks."""
    return kube


def addon(
    name: str, namespace: str, *, cluster: str = "alpha", cluster_namespace: str | None = None
) -> dict[str, Any]:
    reference: dict[str, Any] = {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster", "name": cluster}
    if cluster_namespace is not None:
        reference["namespace"] = cluster_namespace
    return {
        "apiVersion": API,
        "kind": "ClusterAddon",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"clusterRef": reference},
    }


def stack(namespace: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "ClusterStack",
        "metadata": {"name": "ferrol", "namespace": namespace},
        "spec": {
            "provider": "docker",
            "name": "ferrol",
            "kubernetesVersion": "1.30",
            "autoSubscribe": False,
            **spec,
        },
    }


async def deleted_at_last(kube: Kube, api_version: str, kind: str, name: str, namespace: str) -> None:
    """Delete, again while the operator's cache still holds what was just removed (a denial then says
    so), then wait until the object is gone (a release's finalizer runs first)."""

    async def allowed() -> bool:
        try:
            await kube.delete(api_version, kind, name, namespace)
        except errors.Forbidden as error:
            if "is still in use" not in str(error):
                raise
            return False
        return True

    await wait_until(allowed, timeout=15, what=f"the deletion of {kind} {name} to be allowed")

    async def gone() -> bool:
        return await kube.get(api_version, kind, name, namespace) is None

    await wait_until(gone, timeout=30, what=f"{kind} {name} to be gone")


async def refusal(write: Any) -> str:
    """What the API server answered to a write it refused."""
    with pytest.raises(errors.KubeError) as refused:
        await write
    return str(refused.value)


async def test_a_release_that_a_cluster_uses_is_deleted_only_once_the_cluster_is_gone(
    kube_with_webhooks: Kube, namespace: str
) -> None:
    kube = kube_with_webhooks
    release = "docker-ferrol-1-30-v1"
    await kube.create(
        {
            "apiVersion": API,
            "kind": "ClusterStackRelease",
            "metadata": {"name": release, "namespace": namespace},
        }
    )
    await kube.create(cluster("alpha", namespace, "docker-ferrol-1-30-v1"))
    await kube.create(cluster("beta", namespace, "docker-ferrol-1-30-v2"))

    message = await refusal(kube.delete(API, "ClusterStackRelease", release, namespace))
    assert (
        'admission webhook "clusterstackreleases.clusterstack.x-k8s.io" denied the request: '
        f"ClusterStackRelease {release} is still in use in namespace {namespace}: "
        f"Cluster alpha uses ClusterClass {release}. Move them to another ClusterClass or delete them, "
        "then delete the ClusterStackRelease again."
    ) in message
    assert await kube.get(API, "ClusterStackRelease", release, namespace) is not None

    await kube.delete("cluster.x-k8s.io/v1beta2", "Cluster", "alpha", namespace)
    await deleted_at_last(kube, API, "ClusterStackRelease", release, namespace)


async def test_a_cluster_runs_its_releases_kubernetes_and_moves_one_minor_version_at_a_time(
    kube_with_webhooks: Kube, namespace: str
) -> None:
    """Upstream's Cluster webhook: the topology's version is the release's Kubernetes (its status says
    which, once downloaded), and a change of class keeps the stack and steps one minor version."""
    kube, release = kube_with_webhooks, "docker-upgrade-1-30-v1"
    await kube.create(
        {
            "apiVersion": API,
            "kind": "ClusterStackRelease",
            "metadata": {"name": release, "namespace": namespace},
        }
    )
    await kube.patch_status(API, "ClusterStackRelease", release, namespace, {"kubernetesVersion": "v1.30.10"})

    wrong = cluster("gamma", namespace, release)
    wrong["spec"]["topology"]["version"] = "v1.30.9"
    refused = await refusal(kube.create(wrong))
    assert (
        'admission webhook "clusters.clusterstack.x-k8s.io" denied the request: spec.topology.version is '
        f"v1.30.9, but ClusterClass {release} is built for Kubernetes v1.30.10"
    ) in refused
    await kube.create(cluster("gamma", namespace, release))  # v1.30.10

    jump = {"spec": {"topology": {"classRef": {"name": "docker-upgrade-1-32-v1"}, "version": "v1.32.1"}}}
    refused = await refusal(kube.patch("cluster.x-k8s.io/v1beta2", "Cluster", "gamma", namespace, jump))
    assert "Kubernetes moves one minor version at a time (to 1.31 at most)" in refused
    other = {"spec": {"topology": {"classRef": {"name": "docker-other-1-30-v1"}}}}
    refused = await refusal(kube.patch("cluster.x-k8s.io/v1beta2", "Cluster", "gamma", namespace, other))
    assert "a Cluster stays on its provider and stack" in refused
    await kube.delete("cluster.x-k8s.io/v1beta2", "Cluster", "gamma", namespace)


async def test_a_stack_that_a_cluster_uses_is_deleted_only_once_the_cluster_is_gone(
    kube_with_webhooks: Kube, namespace: str
) -> None:
    kube = kube_with_webhooks
    await kube.create(stack(namespace, noProvider=True))
    await kube.create(cluster("gamma", namespace, "docker-ferrol-1-30-v2"))

    message = await refusal(kube.delete(API, "ClusterStack", "ferrol", namespace))
    assert (
        'admission webhook "clusterstacks.clusterstack.x-k8s.io" denied the request: '
        f"ClusterStack ferrol is still in use in namespace {namespace}: "
        "Cluster gamma uses ClusterClass docker-ferrol-1-30-v2, a release of this stack."
    ) in message

    await kube.delete("cluster.x-k8s.io/v1beta2", "Cluster", "gamma", namespace)
    await deleted_at_last(kube, API, "ClusterStack", "ferrol", namespace)


async def test_a_provider_ref_must_name_a_template_kind_the_api_server_serves(
    kube_with_webhooks: Kube, namespace: str
) -> None:
    kube = kube_with_webhooks
    reference = {"apiVersion": PROVIDER_API, "kind": TEMPLATE_KIND, "name": "images"}

    unknown = await refusal(
        kube.create(stack(namespace, providerRef={**reference, "kind": "NoSuchTemplate"}))
    )
    assert (
        'admission webhook "clusterstacks.clusterstack.x-k8s.io" denied the request: '
        f"spec.providerRef names kind NoSuchTemplate of {PROVIDER_API}, which this API server does not "
        "serve: install the provider's CRDs first"
    ) in unknown
    not_a_template = await refusal(
        kube.create(stack(namespace, providerRef={**reference, "kind": "TestProviderClusterStackRelease"}))
    )
    assert "spec.providerRef.kind TestProviderClusterStackRelease does not end in Template" in not_a_template

    # A served template kind passes (the template object itself may come later: the stack waits).
    await kube.create(stack(namespace, providerRef=reference))
    await kube.patch(API, "ClusterStack", "ferrol", namespace, {"spec": {"versions": ["v1"]}})
    moved = await refusal(
        kube.patch(
            API, "ClusterStack", "ferrol", namespace, {"spec": {"providerRef": {"kind": "GoneTemplate"}}}
        )
    )
    assert "spec.providerRef names kind GoneTemplate" in moved
    await deleted_at_last(kube, API, "ClusterStack", "ferrol", namespace)


async def test_a_cluster_addon_stays_with_one_cluster_of_its_own_namespace(
    kube_with_webhooks: Kube, namespace: str
) -> None:
    kube = kube_with_webhooks
    elsewhere = await refusal(kube.create(addon("alpha", namespace, cluster_namespace="kube-system")))
    assert (
        'admission webhook "clusteraddons.clusterstack.x-k8s.io" denied the request: '
        "spec.clusterRef.namespace of ClusterAddon alpha is kube-system, but a ClusterAddon lives beside "
        f"its Cluster: name a Cluster of namespace {namespace}, or leave namespace out"
    ) in elsewhere

    await kube.create(addon("alpha", namespace, cluster_namespace=namespace))
    # CEL in the CRD refuses this first, before the API server calls any webhook.
    moved = await refusal(
        kube.patch(API, "ClusterAddon", "alpha", namespace, {"spec": {"clusterRef": {"name": "beta"}}})
    )
    assert "spec.clusterRef is immutable once set" in moved
    await kube.delete(API, "ClusterAddon", "alpha", namespace)


async def test_setting_a_cluster_addons_hook_is_allowed_with_a_warning_that_nothing_reads_it(
    kube_with_webhooks: Kube, namespace: str, kubectl: Kubectl, tmp_path: Path
) -> None:
    """Upstream's hook server sets spec.hook to start a hook's stages: kubectl prints the API server's
    warning (from the webhook) to whoever sets it, here."""
    manifest = addon("hooked", namespace, cluster_namespace=namespace)
    manifest["spec"]["hook"] = "BeforeClusterUpgrade"
    path = tmp_path / "addon.json"
    path.write_text(json.dumps(manifest))
    created = kubectl("apply", "-f", str(path))
    assert created.returncode == 0, created.stderr
    assert "Warning: spec.hook (BeforeClusterUpgrade) is ignored" in created.stderr
    assert "status.hook" in created.stderr
    unchanged = kubectl("annotate", "clusteraddon", "hooked", "-n", namespace, "touched=yes")
    assert unchanged.returncode == 0, unchanged.stderr
    assert "Warning" not in unchanged.stderr, "only who sets or changes it is told"
    await kube_with_webhooks.delete(API, "ClusterAddon", "hooked", namespace)


async def test_a_standby_replica_serves_the_webhooks_too(
    kube: Kube,
    namespace: str,
    control_plane: ControlPlane,
    clusterstack_tools: ClusterStackTools,
    tmp_path: Path,
    pytestconfig: pytest.Config,
) -> None:
    """A Service sends the API server's calls to any ready pod, and a standby is ready: it must answer.
    This one stands by (another holds the Lease) and still answers an AdmissionReview on its port."""
    lease = "standby-test-leader"
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    await kube.create(
        {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": lease, "namespace": namespace},
            "spec": {
                "holderIdentity": "the-leader",
                "leaseDurationSeconds": 3600,
                "acquireTime": now,
                "renewTime": now,
            },
        }
    )
    rbac = pytestconfig.rootpath / "charts" / "cluster-stack-operator" / "files" / "rbac-rules.yaml"
    kubeconfig = service_account_kubeconfig(control_plane, rbac, tmp_path / "operator.kubeconfig")
    port = free_port()
    settings = webhook_settings(tmp_path, port)
    del settings["OPERATOR_SUITE_WEBHOOK_URL"]  # served, not registered: the module's operator is
    environment = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "OCI_", "OPERATOR_SUITE_"))},
        "OPERATOR_SUITE_RELEASE_SOURCE": "local",
        "OPERATOR_SUITE_LOCAL_RELEASES": str(tmp_path),
        "OPERATOR_SUITE_RELEASE_DIR": str(tmp_path / "downloads"),
        "OPERATOR_SUITE_LEADER_ELECTION_NAMESPACE": namespace,
        "OPERATOR_SUITE_LEADER_ELECTION_LEASE": lease,
        **settings,
    }
    process = OperatorProcess(
        "cluster-stack-operator",
        kubeconfig,
        tmp_path / "operator.log",
        "--leader-elect",
        environment=environment,
    )
    process.start()
    try:
        review = {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": "standby-1",
                "operation": "CREATE",
                "namespace": namespace,
                "name": "probe",
                "object": addon("probe", namespace, cluster_namespace="elsewhere"),
            },
        }
        context = ssl.create_default_context(cafile=str(tmp_path / "webhook-tls" / "ca.crt"))

        async def answered() -> dict[str, Any] | None:
            async with httpx.AsyncClient(verify=context, trust_env=False, timeout=5) as http:
                try:
                    response = await http.post(
                        f"https://127.0.0.1:{port}/validate/clusteraddons.clusterstack.x-k8s.io", json=review
                    )
                except httpx.HTTPError:
                    return None
            return dict(response.json()["response"])

        response: Any = await wait_until(answered, timeout=30, what="the standby's webhooks to answer")
        assert response["allowed"] is False
        assert "a ClusterAddon lives beside its Cluster" in response["status"]["message"]
        assert "operator_leader 0.0" in process.metrics(), "it answered as a standby"
    finally:
        process.stop()
        await kube.delete("coordination.k8s.io/v1", "Lease", lease, namespace)


def test_webhooks_that_cannot_listen_or_connect_end_the_start_with_one_line(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    """Served before the election, the webhooks' start failures are the runner's one line, as the
    operator's own are: a port that is taken, a kubeconfig that cannot be read."""
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    settings = webhook_settings(tmp_path, port)
    del settings["OPERATOR_SUITE_WEBHOOK_URL"]
    base = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "OCI_", "OPERATOR_SUITE_"))},
        "OPERATOR_SUITE_RELEASE_SOURCE": "local",
        "OPERATOR_SUITE_LOCAL_RELEASES": str(tmp_path),
        **settings,
    }
    try:
        for kubeconfig, says in (
            (str(control_plane.kubeconfig), f"the admission webhooks cannot listen on 127.0.0.1:{port}: "),
            (str(tmp_path / "absent"), "no usable kubeconfig or in-cluster configuration: "),
        ):
            started = time.monotonic()
            done = subprocess.run(
                [str(Path(sys.executable).parent / "cluster-stack-operator")],
                env={**base, "KUBECONFIG": kubeconfig},
                capture_output=True, text=True, timeout=30, check=False,
            )  # fmt: skip
            # Well within the 30 s that would mean a hang: the process starts in about 1.5 s on an idle
            # machine, and once took 11 s in CI beside real nodes on two cores.
            assert time.monotonic() - started < 20
            assert done.returncode == 1
            (line,) = done.stderr.strip().splitlines()
            assert line.startswith(f"cluster-stack-operator: cannot start: {says}"), done.stderr
    finally:
        taken.close()


async def test_a_check_that_fails_or_is_slow_is_a_denial_that_says_to_try_again(tmp_path: Path) -> None:
    """The server behind the webhooks, on loopback with a CA made for the test, without an API server."""

    async def raises(_: AdmissionRequest) -> Verdict:
        raise errors.Unavailable("listing Cluster: no answer from the API server")

    async def slow(_: AdmissionRequest) -> Verdict:
        await asyncio.sleep(5)
        return Verdict.allow()

    async def allows(_: AdmissionRequest) -> Verdict:
        return Verdict.allow()

    hooks = [
        ValidatingWebhook(f"{name}.example.com", "example.com", "v1", "things", ("DELETE",), check)
        for name, check in (("raises", raises), ("slow", slow), ("allows", allows))
    ]
    certificates = serving_certificates(tmp_path)
    server = AdmissionServer(
        hooks,
        cert_file=certificates / "tls.crt",
        key_file=certificates / "tls.key",
        host="127.0.0.1",
        port=0,
        decide_within=0.5,
    )
    await server.start()
    review = {
        "request": {"uid": "u-1", "operation": "DELETE", "namespace": "team", "name": "x", "oldObject": {}}
    }
    try:
        async with httpx.AsyncClient(
            base_url=f"https://127.0.0.1:{server.port}",
            verify=ssl.create_default_context(cafile=certificates / "ca.crt"),
            trust_env=False,
        ) as client:
            answers = {
                hook.name: (await client.post(hook.path, json=review)).json()["response"] for hook in hooks
            }
            not_a_review = await client.post(hooks[0].path, content=b"{}")
    finally:
        await server.stop()
    assert answers["allows.example.com"] == {"uid": "u-1", "allowed": True}
    assert answers["raises.example.com"]["status"]["message"] == (
        "could not decide whether to allow this delete "
        "(Unavailable: listing Cluster: no answer from the API server): try again"
    )
    assert answers["slow.example.com"]["status"]["message"] == (
        "could not decide within 0.5 s whether to allow this delete: try again"
    )
    assert not_a_review.status_code == 400
