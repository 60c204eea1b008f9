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
from operator_testkit.clusterstack_tools import ClusterStackTools
from operator_testkit.controlplane import ControlPlane
from operator_testkit.drivers.clusterstack import HOOKS_ADDON_CHART
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

ADDON = "cluster-addon-jobs"
# Debian's nginx image, which the real nodes hold: its /bin/sh runs the hook Jobs' commands.
JOBS = {"jobImage": NGINX_IMAGE, "jobCommand": "sleep 2", "postJobCommand": "sleep 1"}
FAILING = {**JOBS, "jobCommand": "echo 'the migration found no schema' >&2; exit 3"}
IDLE_SECONDS = 30
"""How long nothing may be written after the install: 15 looks at the workload cluster (every 2 s)."""


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
    for version, values in ((1, FAILING), (2, JOBS), (3, JOBS)):
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

    async def addon_where(check: Any) -> dict[str, Any] | None:
        found = await kube.get(API, "ClusterAddon", ADDON, namespace)
        return found if found is not None and check(found) else None

    def applied(reason: str) -> Any:
        return lambda addon: condition(addon, "HelmChartApplied").get("reason") == reason

    def hooks_done(version: str) -> Any:
        def done(addon: dict[str, Any]) -> bool:
            hooks = (addon.get("status") or {}).get("helmHooks") or {}
            return hooks.get("version") == version and hooks.get("event") == "done"

        return done

    async with Kube.connect(control_plane.kubeconfig) as workload:
        # 1. A pre-install Job that fails: the chart's objects are never applied, and the addon says why.
        start = len(hook_writes(control_plane))
        await kube.create(capi_cluster("jobs", namespace, "docker-jobs-1-30-v1", endpoint_port=6443))
        await kube.create(kubeconfig_secret("jobs", namespace, control_plane))
        stopped: Any = await wait_until(
            lambda: addon_where(applied("HelmHookFailed")), timeout=120, what="the failed pre-install Job"
        )
        said = condition(stopped, "HelmChartApplied")["message"]
        assert said.startswith("pre-install hook Job kube-system/hook-job failed: "), said
        assert "BackoffLimitExceeded" in said, said
        assert "the chart's objects are not applied" in said
        assert await workload.get_live("v1", "ConfigMap", "addon-main", "kube-system") is None
        failed_job = await workload.get_live("batch/v1", "Job", "hook-job", "kube-system")
        assert failed_job is not None, "a failed Job without hook-failed stays, for its logs"
        assert hook_writes(control_plane)[start:] == [
            ("create", "hook-made-secret"),
            ("create", "hook-pre-install"),
            ("create", "hook-job"),
            ("delete", "hook-pre-install"),  # hook-succeeded: deleted once the run stopped
        ]

        # 2. Another release: a fresh install, whose pre-install Job replaces the failed one
        # (before-hook-creation), runs and is deleted; then the chart's objects; then the post-install Job.
        mark = len(hook_writes(control_plane))
        await kube.patch("cluster.x-k8s.io/v1beta2", "Cluster", "jobs", namespace,
                         {"spec": {"topology": {"classRef": {"name": "docker-jobs-1-30-v2"}}}})  # fmt: skip
        installed: Any = await wait_until(
            lambda: addon_where(hooks_done("v2")), timeout=180, what="installed"
        )
        assert condition(installed, "HelmChartApplied")["status"] == "True"
        assert [(r["kind"], r["name"]) for r in installed["status"]["resources"]] == [
            ("ConfigMap", "addon-main")
        ]
        assert hook_writes(control_plane)[mark:] == [
            ("delete", "hook-made-secret"),  # before-hook-creation, the default
            ("create", "hook-made-secret"),  # weight -5
            ("create", "hook-pre-install"),  # weight 1
            ("delete", "hook-job"),  # the failed one, before-hook-creation
            ("create", "hook-job"),  # weight 2: ran on a node, 2 s
            ("delete", "hook-pre-install"),  # hook-succeeded
            ("delete", "hook-job"),  # hook-succeeded
            ("create", "addon-main"),
            ("create", "hook-post-install"),
            ("create", "hook-post-job"),  # ran on a node, 1 s
            ("delete", "hook-post-job"),  # hook-succeeded, the last first
            ("delete", "hook-post-install"),
        ]
        for job in ("hook-job", "hook-post-job"):
            assert await workload.get_live("batch/v1", "Job", job, "kube-system") is None

        # 3. Idle: nothing is made again (no drift repair of hooks), nothing is deleted.
        mark = len(hook_writes(control_plane))
        await asyncio.sleep(IDLE_SECONDS)
        assert hook_writes(control_plane)[mark:] == []

        # 4. An upgrade: the pre-upgrade Job runs once, with the pre-upgrade ConfigMap; no install hook.
        await kube.patch("cluster.x-k8s.io/v1beta2", "Cluster", "jobs", namespace,
                         {"spec": {"topology": {"classRef": {"name": "docker-jobs-1-30-v3"}}}})  # fmt: skip
        upgraded: Any = await wait_until(lambda: addon_where(hooks_done("v3")), timeout=120, what="upgraded")
        assert upgraded["spec"]["version"] == "v3"
        upgrade_writes = hook_writes(control_plane)[mark:]
        assert [w for w in upgrade_writes if w[0] == "create"] == [
            ("create", "hook-job"),
            ("create", "hook-pre-upgrade-v3"),
        ], upgrade_writes
        main = await workload.get_live("v1", "ConfigMap", "addon-main", "kube-system")
        assert main is not None
        assert main["data"] == {"version": "v3"}
        await asyncio.sleep(6)  # three more looks
        assert [w for w in hook_writes(control_plane)[mark:] if w[0] == "create"] == [
            ("create", "hook-job"),
            ("create", "hook-pre-upgrade-v3"),
        ], "the upgrade's Job ran once"

        # The Cluster goes: its addon's objects go with it; hooks kept by their policy stay, as helm's.
        await kube.delete("cluster.x-k8s.io/v1beta2", "Cluster", "jobs", namespace)
        await wait_until(
            lambda: _absent(workload, "ConfigMap", "addon-main"), timeout=60, what="addon-main deleted"
        )
        for kind, name in (("Secret", "hook-made-secret"), ("ConfigMap", "hook-pre-upgrade-v3")):
            await workload.delete("v1", kind, name, "kube-system")
    assert "Traceback" not in process.log()


async def _absent(workload: Kube, kind: str, name: str) -> bool:
    return await workload.get_live("v1", kind, name, "kube-system") is None
