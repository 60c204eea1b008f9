"""Benchmark: how fast the Cluster Stack operator turns published releases into ClusterClasses, and what it
costs the API server while idle.

Runs a real local control plane with Cluster API's and the Docker provider's CRDs, the real helm,
and the cluster-stack-operator process (with the RBAC of its chart)
over a local release source. Releases are the tests' cluster-class chart packaged per release
(tests/releases.py), so each renders a ClusterClass and a DockerClusterTemplate. It measures:

- **one release**: a release is published, then a ClusterStack lists its version; seconds until its
  ClusterClass exists in the management cluster. Listing the version (``spec.versions``) instead of
  waiting for auto-subscribe leaves the source's poll interval out, as the issue asks;
- **20 releases**: 20 more are published, and the stack lists them all at once: seconds until
  every ClusterClass exists, per release and in all (p50, p95 of each release's time);
- **an idle minute** with those 21 releases ready: the operator's API requests by verb (from the
  audit log), its writes, CPU seconds and RSS. The target is zero writes;
- **cluster addons** in a workload cluster (a second local control plane, reached through the
  kubeconfig Secret as Cluster API writes it): seconds from a Cluster's creation (with its Secret)
  until its ClusterAddon is Ready with the addon objects in the workload cluster; then, over
  ``--class-changes`` moves between two releases with different cluster-addon versions, seconds
  from the Cluster's class change until the workload cluster has the other version's objects and
  the ClusterAddon is Ready again (p50, p95);
- **staged addons with a remote dependency** (scs2's shape: a stage chart naming a dependency in a
  chart repository, here on loopback, and no charts/ folder): seconds from a Cluster's creation until
  every stage is done and the dependency's object is in the workload cluster;
- **an openstack-shaped stack** (the test kit's stack laid out as upstream's openstack/scs2: four
  stages each naming a dependency in a chart repository on loopback, an ORC Image in the class; see
  operator_testkit.drivers.upstream_stacks), built as csctl builds it (hash mode) into the release
  source: seconds from the ClusterStack listing its version until its ClusterClass exists, and until
  the release is Ready (every object applied, the Image among them); then seconds from a Cluster's
  creation until all four stages are done and every dependency's object is in the workload cluster.

No Go peer runs beside it: the Go cluster-stack-operator is not built here (see the closing notes of
the Cluster Stack issue).

Usage: python bench/clusterstack.py [--releases 20] [--idle-seconds 60] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # the tests' release builder

from scale import (  # noqa: E402  (the scale benchmark's audit reading and process figures)
    Admin,
    AuditTail,
    cpu_seconds,
    memory_gib,
    proc_status_mib,
    source_state,
    spread,
    summary,
)

from operator_testkit.charts import chart_repository  # noqa: E402
from operator_testkit.clusterstack_tools import ensure_clusterstack_tools  # noqa: E402
from operator_testkit.controlplane import ControlPlane  # noqa: E402
from operator_testkit.drivers.csctl import create_release  # noqa: E402
from operator_testkit.drivers.upstream_stacks import (  # noqa: E402
    DEPENDENCIES,
    openstack_scs2,
)
from operator_testkit.drivers.upstream_stacks import dependency_chart as upstream_dependency  # noqa: E402
from operator_testkit.operators import OperatorProcess, service_account_kubeconfig  # noqa: E402
from releases import (  # noqa: E402
    ONE_STAGE,
    capi_cluster,
    dependency_chart,
    dependency_on,
    kubeconfig_secret,
    publish_release,
)

NAMESPACE = "bench"
USER = "system:serviceaccount:cluster-stack-system:cluster-stack-operator"
STACKS = f"/apis/clusterstack.x-k8s.io/v1alpha1/namespaces/{NAMESPACE}/clusterstacks"
RELEASES = f"/apis/clusterstack.x-k8s.io/v1alpha1/namespaces/{NAMESPACE}/clusterstackreleases"
CLASSES = f"/apis/cluster.x-k8s.io/v1beta2/namespaces/{NAMESPACE}/clusterclasses"
CLUSTERS = f"/apis/cluster.x-k8s.io/v1beta2/namespaces/{NAMESPACE}/clusters"
ADDONS = f"/apis/clusterstack.x-k8s.io/v1alpha1/namespaces/{NAMESPACE}/clusteraddons"
SECRETS = f"/api/v1/namespaces/{NAMESPACE}/secrets"
ADDON_OBJECT = "/api/v1/namespaces/addon-system/configmaps/only-in-{version}"


def tag(version: int) -> str:
    return f"docker-bench-1-30-v{version}"


def stack(versions: list[int]) -> dict[str, Any]:
    return {
        "apiVersion": "clusterstack.x-k8s.io/v1alpha1",
        "kind": "ClusterStack",
        "metadata": {"name": "bench", "namespace": NAMESPACE},
        "spec": {
            "provider": "docker",
            "name": "bench",
            "kubernetesVersion": "1.30",
            "autoSubscribe": False,
            "noProvider": True,
            "versions": [f"v{v}" for v in versions],
        },
    }


async def classes_appear(admin: Admin, names: set[str], started: float, timeout: float) -> dict[str, float]:
    """Seconds from ``started`` until each ClusterClass exists (polling is the measurement)."""
    seen: dict[str, float] = {}
    deadline = started + timeout
    while len(seen) < len(names) and time.monotonic() < deadline:
        try:
            present = await admin.names(CLASSES)
        except httpx.HTTPStatusError as error:  # a fresh CRD's storage answers 429 for a moment
            if error.response.status_code != 429:
                raise
            present = set()
        now = time.monotonic()
        for name in names & present:
            seen.setdefault(name, now - started)
        await asyncio.sleep(0.05)
    return seen


async def set_versions(admin: Admin, versions: list[int]) -> None:
    answer = await admin.http.patch(
        f"{STACKS}/bench",
        json={"spec": {"versions": [f"v{v}" for v in versions]}},
        headers={"Content-Type": "application/merge-patch+json"},
    )
    answer.raise_for_status()


async def addons_ready(
    admin: Admin, workload: Admin, name: str, version: str, started: float, timeout: float = 120
) -> float | None:
    """Seconds from ``started`` until ClusterAddon ``cluster-addon-<name>`` is Ready with addon
    ``version`` applied and that version's own object is in the workload cluster (polled)."""
    deadline = started + timeout
    while time.monotonic() < deadline:
        answer = await admin.http.get(f"{ADDONS}/cluster-addon-{name}")
        if answer.status_code == 200:
            addon = answer.json()
            if (
                (addon.get("status") or {}).get("ready")
                and (addon.get("spec") or {}).get("version") == version
                and await workload.exists(ADDON_OBJECT.format(version=version))
            ):
                return time.monotonic() - started
        await asyncio.sleep(0.05)
    return None


async def measure_addons(
    admin: Admin, workload_plane: ControlPlane, source: Path, helm: Path, class_changes: int
) -> dict[str, Any]:
    """A Cluster's addons: first applied, then moved between two addon versions ``class_changes`` times."""
    first, second = tag(900), tag(901)  # two releases with different cluster-addon versions
    publish_release(source, first, helm=helm, addon_version="v1")
    publish_release(source, second, helm=helm, addon_version="v2")
    await set_versions(admin, [1, 900, 901])
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        ready = {
            r["metadata"]["name"] for r in await admin.items(RELEASES) if (r.get("status") or {}).get("ready")
        }
        if {first, second} <= ready:
            break
        await asyncio.sleep(0.5)
    workload = Admin(workload_plane)
    try:
        started = time.monotonic()
        await admin.create(SECRETS, kubeconfig_secret("bench", NAMESPACE, workload_plane))
        await admin.create(CLUSTERS, capi_cluster("bench", NAMESPACE, first, endpoint_port=6443))
        created = await addons_ready(admin, workload, "bench", "v1", started)
        changes: list[float] = []
        for move in range(class_changes):
            target, version = (second, "v2") if move % 2 == 0 else (first, "v1")
            started = time.monotonic()
            answer = await admin.http.patch(
                f"{CLUSTERS}/bench",
                json={"spec": {"topology": {"classRef": {"name": target}}}},
                headers={"Content-Type": "application/merge-patch+json"},
            )
            answer.raise_for_status()
            took = await addons_ready(admin, workload, "bench", version, started)
            if took is None:
                break
            changes.append(took)
            await asyncio.sleep(1)
    finally:
        await workload.close()
    return {
        "cluster_created_to_addons_ready_seconds": round(created, 3) if created is not None else None,
        "class_change_to_updated_addons": {
            "changes": class_changes,
            "completed": len(changes),
            **(spread(changes) if changes else {}),
        },
    }


async def seconds_until(
    check: Any, started: float, timeout: float = 120, pause: float = 0.05
) -> float | None:
    """Seconds from ``started`` until ``check()`` is true, or None if ``timeout`` passes first."""
    while time.monotonic() < started + timeout:
        if await check():
            return round(time.monotonic() - started, 3)
        await asyncio.sleep(pause)
    return None


async def release_ready(admin: Admin, name: str) -> bool:
    answer = await admin.http.get(f"{RELEASES}/{name}")
    return answer.status_code == 200 and bool((answer.json().get("status") or {}).get("ready"))


DEPENDENCY_OBJECT = "/api/v1/namespaces/kube-system/configmaps/from-dependency"


async def measure_staged_addons(
    admin: Admin, workload_plane: ControlPlane, source: Path, helm: Path, home: Path
) -> dict[str, Any]:
    """scs2's shape: a staged release whose stage chart declares a dependency in a chart repository (on
    loopback here) and ships no charts/ folder. Seconds from a Cluster's creation until its ClusterAddon
    has every stage done and the dependency's object is in the workload cluster."""
    dependency = dependency_chart(home)
    staged = tag(910)
    async with chart_repository(home / "helm", [dependency]) as repository:
        publish_release(
            source,
            staged,
            helm=helm,
            staged=True,
            stages=ONE_STAGE,
            stage_dependencies={"stage-one": [dependency_on(dependency, repository.url)]},
        )
        await set_versions(admin, [1, 900, 901, 910])
        await seconds_until(lambda: release_ready(admin, staged), time.monotonic(), pause=0.5)
        workload = Admin(workload_plane)
        try:
            started = time.monotonic()
            await admin.create(SECRETS, kubeconfig_secret("staged", NAMESPACE, workload_plane))
            await admin.create(CLUSTERS, capi_cluster("staged", NAMESPACE, staged, endpoint_port=6443))

            async def stages_done() -> bool:
                answer = await admin.http.get(f"{ADDONS}/cluster-addon-staged")
                status = (answer.json().get("status") or {}) if answer.status_code == 200 else {}
                stages = [s.get("phase") for s in status.get("stages") or []]
                return (
                    bool(stages)
                    and all(p == "done" for p in stages)
                    and await workload.exists(DEPENDENCY_OBJECT)
                )

            took = await seconds_until(stages_done, started)
        finally:
            await workload.close()
    return {"stages": 1, "remote_dependencies": 1, "cluster_created_to_stages_done_seconds": took}


async def measure_openstack_shaped(
    admin: Admin, workload_plane: ControlPlane, source: Path, helm: Path, home: Path
) -> dict[str, Any]:
    """The openstack/scs2-shaped stack, built as csctl builds it into the release source: seconds
    from its ClusterStack listing the version to its ClusterClass, and to the release Ready; then
    from a Cluster's creation to every stage done with every dependency's object in the workload
    cluster."""
    stages = ["cni", "metrics-server", "csi", "ccm"]
    dependencies = [upstream_dependency(home / "scs2-charts", *DEPENDENCIES[stage]) for stage in stages]
    async with chart_repository(home / "scs2-helm", dependencies) as repository:
        stack_dir = openstack_scs2(home / "stacks", repository.url, cluster_api="v1beta2")
        release = await asyncio.to_thread(create_release, stack_dir, source, helm=helm)
        metadata = yaml.safe_load((release / "metadata.yaml").read_text())
        listed = {
            "apiVersion": "clusterstack.x-k8s.io/v1alpha1",
            "kind": "ClusterStack",
            "metadata": {"name": "scs2", "namespace": NAMESPACE},
            "spec": {
                "provider": "openstack",
                "name": "scs2",
                "kubernetesVersion": "1.30",
                "channel": "custom",
                "autoSubscribe": False,
                "noProvider": True,
                "versions": [metadata["versions"]["clusterStack"]],
            },
        }
        started = time.monotonic()
        await admin.create(STACKS, listed)

        # The chart names the class {{ .Release.Name }}-{{ .Chart.Version }}: the version's dot form.
        class_name = f"openstack-scs2-1-30-{metadata['versions']['clusterStack']}"

        async def class_exists() -> bool:
            return (await admin.http.get(f"{CLASSES}/{class_name}")).status_code == 200

        to_class = await seconds_until(class_exists, started)
        to_ready = await seconds_until(
            lambda: release_ready(admin, release.name), started, timeout=120 + (to_class or 0)
        )
        workload = Admin(workload_plane)
        try:
            started = time.monotonic()
            await admin.create(SECRETS, kubeconfig_secret("scs2", NAMESPACE, workload_plane))
            await admin.create(CLUSTERS, capi_cluster("scs2", NAMESPACE, class_name, endpoint_port=6443))

            async def stages_done() -> bool:
                answer = await admin.http.get(f"{ADDONS}/cluster-addon-scs2")
                status = (answer.json().get("status") or {}) if answer.status_code == 200 else {}
                phases = [s.get("phase") for s in status.get("stages") or []]
                if phases != ["done"] * len(stages):
                    return False
                for stage in stages:
                    name = DEPENDENCIES[stage][0]
                    if not await workload.exists(f"/api/v1/namespaces/kube-system/configmaps/{name}"):
                        return False
                return True

            to_addons = await seconds_until(stages_done, started)
        finally:
            await workload.close()
    return {
        "stages": len(stages),
        "remote_dependencies": len(stages),
        "listed_to_cluster_class_seconds": to_class,
        "listed_to_release_ready_seconds": to_ready,
        "cluster_created_to_stages_done_seconds": to_addons,
        "dependency_downloads": len([r for r in repository.requests if r.endswith(".tgz")]),
    }


async def run(settings: argparse.Namespace) -> dict[str, Any]:
    tools = ensure_clusterstack_tools()
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="bench-clusterstack-") as scratch:
        home = Path(scratch)
        source = home / "releases"
        source.mkdir()
        with ControlPlane(home / "cp") as plane, ControlPlane(home / "workload") as workload_plane:
            for directory in (tools.capi_crds, tools.capd_crds, tools.orc_crds, ROOT / "deploy" / "crds"):
                await asyncio.to_thread(plane.kubectl, "apply", "--server-side", "-f", str(directory))
            await asyncio.to_thread(
                plane.kubectl, "wait", "--for=condition=Established", "--timeout=60s", "crd", "--all"
            )
            await asyncio.to_thread(plane.kubectl, "create", "namespace", NAMESPACE)
            rbac = ROOT / "charts" / "cluster-stack-operator" / "files" / "rbac-rules.yaml"
            kubeconfig = service_account_kubeconfig(plane, rbac, home / "operator.kubeconfig")
            environment = {
                **os.environ,
                "OPERATOR_SUITE_RELEASE_SOURCE": "local",
                "OPERATOR_SUITE_LOCAL_RELEASES": str(source),
                "OPERATOR_SUITE_RELEASE_DIR": str(home / "downloads"),
                "OPERATOR_SUITE_HELM": str(tools.helm),
            }
            operator = OperatorProcess(
                "cluster-stack-operator", kubeconfig, home / "operator.log", environment=environment
            )
            admin = Admin(plane)
            audit = AuditTail(plane.audit_log, USER)
            try:
                await asyncio.to_thread(operator.start)
                await asyncio.sleep(2)  # its watches are up before the clock starts

                publish_release(source, tag(1), helm=tools.helm)
                started = time.monotonic()
                await admin.create(STACKS, stack([1]))
                first = await classes_appear(admin, {tag(1)}, started, timeout=120)

                versions = list(range(2, settings.releases + 2))
                for version in versions:
                    publish_release(source, tag(version), helm=tools.helm)
                started = time.monotonic()
                await set_versions(admin, [1, *versions])
                names = {tag(v) for v in versions}
                many = await classes_appear(admin, names, started, timeout=60 + 10 * len(names))

                everything = [1, *versions]
                ready: list[dict[str, Any]] = []
                deadline = time.monotonic() + 120
                while time.monotonic() < deadline:
                    ready = [r for r in await admin.items(RELEASES) if (r.get("status") or {}).get("ready")]
                    if len(ready) == len(everything):
                        break
                    await asyncio.sleep(1)
                await asyncio.sleep(settings.settle_seconds)
                audit.new_requests()
                cpu_before = cpu_seconds(operator.pid)
                await asyncio.sleep(settings.idle_seconds)
                idle = {
                    "releases_ready": len(ready),
                    "seconds": settings.idle_seconds,
                    "requests": summary(audit.new_requests()),
                    "cpu_seconds": round(cpu_seconds(operator.pid) - cpu_before, 2),
                    "rss_mib": round(proc_status_mib(operator.pid, "VmRSS"), 1),
                }
                addons = await measure_addons(
                    admin, workload_plane, source, tools.helm, settings.class_changes
                )
                staged = await measure_staged_addons(admin, workload_plane, source, tools.helm, home)
                openstack = await measure_openstack_shaped(admin, workload_plane, source, tools.helm, home)
            finally:
                operator.stop()
                await admin.close()
                if settings.keep_log:
                    settings.keep_log.write_bytes((home / "operator.log").read_bytes())
    times = list(many.values())
    return {
        "benchmark": "clusterstack",
        "machine": {"cpus": os.cpu_count(), "memory_gib": memory_gib()},
        "python_operator": source_state(),
        "settings": {"releases": settings.releases, "idle_seconds": settings.idle_seconds},
        "one_release_listed_to_cluster_class_seconds": round(first[tag(1)], 3) if first else None,
        "many_releases": {
            "releases": len(names),
            "applied": len(many),
            "seconds_to_all": round(max(times), 2) if len(times) == len(names) else None,
            "seconds_per_release": round(max(times) / len(names), 3) if len(times) == len(names) else None,
            **(spread(times) if times else {}),
        },
        "idle": idle,
        "staged_addons_with_remote_dependencies": staged,
        "openstack_shaped_stack": openstack,
        "cluster_addons": addons,
        "wall_seconds": round(time.monotonic() - began, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--releases", type=int, default=20)
    parser.add_argument("--idle-seconds", type=float, default=60)
    parser.add_argument("--settle-seconds", type=float, default=5)
    parser.add_argument("--class-changes", type=int, default=10)
    parser.add_argument("--keep-log", type=Path, help="copy the operator's log here")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "clusterstack.json")
    settings = parser.parse_args()
    result = asyncio.run(run(settings))
    settings.out.parent.mkdir(parents=True, exist_ok=True)
    settings.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
