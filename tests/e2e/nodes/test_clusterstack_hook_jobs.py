"""A cluster addon chart's Helm hook Jobs, run on real nodes: the workload cluster is the real nodes'
cluster itself (its kubeconfig Secret names its own API server), so each hook Job's pod is made by
the real job controller and run by a real kubelet, containerd and runc, and the addon's ClusterAddon
waits for it to end as ``helm install`` and ``helm upgrade`` wait."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from operator_core.kube import Kube
from operator_testkit.assertions import wait_for_events
from operator_testkit.clusterstack_tools import ClusterStackTools
from operator_testkit.controlplane import ControlPlane
from operator_testkit.drivers.clusterstack import HOOKS_ADDON_CHART, WEBHOOK_ADDON_CHART
from operator_testkit.fixtures import wait_until
from operator_testkit.nodes.images import NGINX_IMAGE
from operator_testkit.operators import OperatorProcess
from releases import capi_cluster, kubeconfig_secret
from stack_operator import (
    API,
    Releases,
    condition,
    hook_writes,
    install_cluster_api,
    launch,
    ready_release,
    stack,
)

pytestmark = pytest.mark.usefixtures("installed_crds")

# Debian's nginx image, which the real nodes hold: its /bin/sh runs the hook Jobs' commands.
JOBS = {"jobImage": NGINX_IMAGE, "jobCommand": "sleep 2", "postJobCommand": "sleep 1"}
FAILING = {**JOBS, "jobCommand": "echo 'the migration found no schema' >&2; exit 3"}
LEFT_CONFIGMAPS = ("addon-main", "hook-pre-upgrade-v3")
ADMISSION = ("admission",)
"""The names of the webhook chart's objects and hooks."""
IDLE_SECONDS = 60
"""How long nothing may be written after the install (#52 says an idle minute): 30 looks at the workload
cluster (every 2 s)."""


@pytest.fixture
def stack_operator(
    control_plane: ControlPlane,
    clusterstack_tools: ClusterStackTools,
    tmp_path: Path,
    pytestconfig: pytest.Config,
) -> Iterator[tuple[OperatorProcess, Releases]]:
    """The Cluster Stack operator against the real nodes' API server, over a local release source."""
    install_cluster_api(control_plane, clusterstack_tools)
    releases = Releases(tmp_path / "source", clusterstack_tools.helm)
    releases.root.mkdir()
    source = {"OPERATOR_SUITE_RELEASE_SOURCE": "local", "OPERATOR_SUITE_LOCAL_RELEASES": str(releases.root)}
    process = launch(control_plane, clusterstack_tools, tmp_path, pytestconfig.rootpath, source)
    try:
        yield process, releases
    finally:
        process.stop()


async def test_hook_jobs_run_on_real_nodes_in_helms_order_and_a_failing_one_keeps_the_chart_out(
    kube: Kube,
    namespace: str,
    control_plane: ControlPlane,
    stack_operator: tuple[OperatorProcess, Releases],
) -> None:
    process, releases = stack_operator
    failing = {**FAILING, "namespace": f"{namespace}-failing"}
    for version, values in ((1, failing), (2, JOBS), (3, JOBS)):
        releases.publish(
            f"docker-jobs-1-30-v{version}",
            addon_version=f"v{version}",
            addon_chart=HOOKS_ADDON_CHART,
            addon_values=values,
        )
    spec = {"name": "jobs", "autoSubscribe": False, "noProvider": True, "versions": ["v1", "v2", "v3"]}
    await kube.create(stack("jobs", namespace, **spec))
    for version in (1, 2, 3):
        await ready_release(kube, namespace, f"docker-jobs-1-30-v{version}")

    async def addon_where(cluster: str, check: Any) -> dict[str, Any] | None:
        found = await kube.get(API, "ClusterAddon", f"cluster-addon-{cluster}", namespace)
        return found if found is not None and check(found) else None

    def hook_failed(addon: dict[str, Any]) -> bool:
        return condition(addon, "HelmChartApplied").get("reason") == "HelmHookFailed"

    def hooks_done(version: str) -> Any:
        def done(addon: dict[str, Any]) -> bool:
            hooks = (addon.get("status") or {}).get("helmHooks") or {}
            return hooks.get("version") == version and hooks.get("event") == "done"

        return done

    async with Kube.connect(control_plane.kubeconfig) as workload:
        # 1. A pre-install Job that fails (in a namespace of its own of the same workload cluster): the
        # chart's objects are never applied, and the addon says why.
        await workload.create(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": failing["namespace"]}}
        )
        await kube.create(capi_cluster("failing", namespace, "docker-jobs-1-30-v1", endpoint_port=6443))
        await kube.create(kubeconfig_secret("failing", namespace, control_plane))
        stopped: Any = await wait_until(
            lambda: addon_where("failing", hook_failed), timeout=120, what="the failed pre-install Job"
        )
        said = condition(stopped, "HelmChartApplied")["message"]
        assert said.startswith(f"pre-install hook Job {failing['namespace']}/hook-job failed: "), said
        assert "BackoffLimitExceeded" in said, said
        assert "the chart's objects are not applied" in said
        assert await workload.get_live("v1", "ConfigMap", "addon-main", failing["namespace"]) is None
        failed_job = await workload.get_live("batch/v1", "Job", "hook-job", failing["namespace"])
        assert failed_job is not None, "a failed Job without hook-failed stays, for its logs"
        assert hook_writes(control_plane, failing["namespace"]) == [
            ("create", "hook-made-secret"),
            ("create", "hook-pre-install"),
            ("create", "hook-job"),
            ("delete", "hook-pre-install"),  # hook-succeeded: it did succeed, before the Job failed
        ]
        (warning,) = await wait_for_events(kube, namespace, "HelmHookFailed")
        assert warning["type"] == "Warning"

        # 2. An install whose Jobs succeed: the weighted pre-install hooks, each waited for, then the
        # chart's objects, then the post-install Job; each deleted by its hook-succeeded policy.
        start = len(hook_writes(control_plane))
        await kube.create(capi_cluster("jobs", namespace, "docker-jobs-1-30-v2", endpoint_port=6443))
        await kube.create(kubeconfig_secret("jobs", namespace, control_plane))
        installed: Any = await wait_until(
            lambda: addon_where("jobs", hooks_done("v2")), timeout=180, what="installed"
        )
        assert condition(installed, "HelmChartApplied")["status"] == "True"
        assert [(r["kind"], r["name"]) for r in installed["status"]["resources"]] == [
            ("ConfigMap", "addon-main")
        ]
        writes = hook_writes(control_plane)[start:]
        assert writes == [
            ("create", "hook-made-secret"),  # weight -5
            ("create", "hook-pre-install"),  # weight 1
            ("create", "hook-job"),  # weight 2: ran on a node for 2 s
            ("delete", "hook-job"),  # hook-succeeded, the last first
            ("delete", "hook-pre-install"),
            ("create", "addon-main"),
            ("create", "hook-post-install"),
            ("create", "hook-post-job"),  # ran on a node for 1 s
            ("delete", "hook-post-job"),
            ("delete", "hook-post-install"),
        ], writes
        for job in ("hook-job", "hook-post-job"):
            assert await workload.get_live("batch/v1", "Job", job, "kube-system") is None

        # 3. Idle: no hook is made again (hooks are not kept against drift), nothing is deleted.
        mark = len(hook_writes(control_plane))
        await asyncio.sleep(IDLE_SECONDS)
        assert hook_writes(control_plane)[mark:] == []

        # 4. An upgrade: the pre-upgrade hooks run once (the Job among them); no install hook.
        await kube.patch("cluster.x-k8s.io/v1beta2", "Cluster", "jobs", namespace,
                         {"spec": {"topology": {"classRef": {"name": "docker-jobs-1-30-v3"}}}})  # fmt: skip
        upgraded: Any = await wait_until(
            lambda: addon_where("jobs", hooks_done("v3")), timeout=120, what="upgraded"
        )
        assert upgraded["spec"]["version"] == "v3"
        main = await workload.get_live("v1", "ConfigMap", "addon-main", "kube-system")
        assert main is not None
        assert main["data"] == {"version": "v3"}
        await asyncio.sleep(6)  # three more looks
        creates = [w for w in hook_writes(control_plane)[mark:] if w[0] == "create"]
        assert creates == [("create", "hook-pre-upgrade-v3"), ("create", "hook-job")], creates

        # The workload cluster is the test session's: what the addons left there goes.
        for cluster in ("jobs", "failing"):
            await kube.delete("cluster.x-k8s.io/v1beta2", "Cluster", cluster, namespace)
        for kind, name in (("Secret", "hook-made-secret"), *(("ConfigMap", n) for n in LEFT_CONFIGMAPS)):
            await workload.delete("v1", kind, name, "kube-system")
        await workload.delete("v1", "Namespace", failing["namespace"])
    assert "Traceback" not in process.log()


async def test_an_admission_webhook_chart_gets_its_certificate_from_hook_jobs_as_ingress_nginx_does(
    kube: Kube,
    namespace: str,
    control_plane: ControlPlane,
    stack_operator: tuple[OperatorProcess, Releases],
    backup_job_image: str,
) -> None:
    """The pattern ingress-nginx's chart uses, on real nodes: a pre-install Job (with a ServiceAccount
    and RBAC that are hooks too) makes the certificate Secret the chart's Deployment mounts; a
    post-install Job patches the webhook configuration's caBundle; the hooks go once they succeeded.
    Drift repair of the chart's objects keeps the patched caBundle, and an upgrade runs both Jobs once
    more, keeping the Secret."""
    process, releases = stack_operator
    values = {"jobImage": backup_job_image, "serverImage": NGINX_IMAGE}
    for version in (1, 2):
        releases.publish(f"docker-webhook-1-30-v{version}", addon_version=f"v{version}",
                         addon_chart=WEBHOOK_ADDON_CHART, addon_values=values)  # fmt: skip
    spec = {"name": "webhook", "autoSubscribe": False, "noProvider": True, "versions": ["v1", "v2"]}
    await kube.create(stack("webhook", namespace, **spec))
    for version in (1, 2):
        await ready_release(kube, namespace, f"docker-webhook-1-30-v{version}")

    async def addon_at(version: str) -> dict[str, Any] | None:
        found = await kube.get(API, "ClusterAddon", "cluster-addon-webhook", namespace)
        hooks = ((found or {}).get("status") or {}).get("helmHooks") or {}
        return found if hooks.get("version") == version and hooks.get("event") == "done" else None

    async with Kube.connect(control_plane.kubeconfig) as workload:
        try:
            await kube.create(
                capi_cluster("webhook", namespace, "docker-webhook-1-30-v1", endpoint_port=6443)
            )
            await kube.create(kubeconfig_secret("webhook", namespace, control_plane))
            installed: Any = await wait_until(lambda: addon_at("v1"), timeout=240, what="installed")
            assert condition(installed, "HelmChartApplied")["status"] == "True"
            secret = await workload.get_live("v1", "Secret", "admission-cert", "kube-system")
            assert secret is not None, "made by the pre-install Job"
            ca = secret["data"]["ca.crt"]

            async def ca_bundle() -> str | None:
                webhook = await workload.get_live(
                    "admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration", "admission"
                )
                return ((webhook or {}).get("webhooks") or [{}])[0].get("clientConfig", {}).get("caBundle")

            assert await ca_bundle() == ca, "patched in by the post-install Job"

            async def available() -> bool:
                deployment = await workload.get_live("apps/v1", "Deployment", "admission", "kube-system")
                return ((deployment or {}).get("status") or {}).get("availableReplicas") == 1

            await wait_until(available, timeout=120, what="the Deployment mounting the hooks' Secret")
            writes = hook_writes(control_plane, names=ADMISSION)
            for hook in ("admission-create", "admission-patch", "admission-certgen"):
                assert ("delete", hook) in writes, f"{hook} deleted once it succeeded"
            assert writes.index(("delete", "admission-create")) < writes.index(("create", "admission-patch"))
            for kind, name, where in (
                ("batch/v1/Job", "admission-create", "kube-system"),
                ("batch/v1/Job", "admission-patch", "kube-system"),
                ("v1/ServiceAccount", "admission-certgen", "kube-system"),
                ("rbac.authorization.k8s.io/v1/ClusterRole", "admission-certgen", None),
            ):
                api, _, kind_name = kind.rpartition("/")
                assert await workload.get_live(api, kind_name, name, where) is None, f"{kind_name} {name}"

            # A few looks at the workload cluster later, drift repair has kept the Job's caBundle.
            await asyncio.sleep(6)
            assert await ca_bundle() == ca

            # An upgrade: both Jobs run once more; the Secret made the first time stays.
            mark = len(hook_writes(control_plane, names=ADMISSION))
            moved = {"spec": {"topology": {"classRef": {"name": "docker-webhook-1-30-v2"}}}}
            await kube.patch("cluster.x-k8s.io/v1beta2", "Cluster", "webhook", namespace, moved)
            await wait_until(lambda: addon_at("v2"), timeout=240, what="upgraded")
            creates = [
                name for verb, name in hook_writes(control_plane, names=ADMISSION)[mark:] if verb == "create"
            ]
            assert creates.count("admission-create") == 1, creates
            assert creates.count("admission-patch") == 1, creates
            assert await ca_bundle() == ca
        finally:
            await kube.delete("cluster.x-k8s.io/v1beta2", "Cluster", "webhook", namespace)
            for api, kind, name, where in (
                ("apps/v1", "Deployment", "admission", "kube-system"),
                ("v1", "Service", "admission", "kube-system"),
                ("v1", "Secret", "admission-cert", "kube-system"),
                ("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration", "admission", None),
            ):
                await workload.delete(api, kind, name, where)
    assert "Traceback" not in process.log()
