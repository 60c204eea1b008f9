"""The Cluster Stack operator as the tests run it: its process with the chart's RBAC over a release
source, Cluster API's CRDs on the control plane, and the objects and waits the tests share
(``tests/integration/test_clusterstack_operator.py``, and the real-nodes tests of hooks)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from operator_core.kube import Kube
from operator_testkit.clusterstack_tools import ClusterStackTools
from operator_testkit.controlplane import ControlPlane
from operator_testkit.fixtures import crd_documents, install_crds, wait_until
from operator_testkit.operators import OperatorProcess, service_account_kubeconfig
from releases import publish_release

API = "clusterstack.x-k8s.io/v1alpha1"
PROVIDER_API = "infrastructure.clusterstack.x-k8s.io/v1alpha1"
TESTS = Path(__file__).parent
_crds_on: set[str] = set()


def install_cluster_api(control_plane: ControlPlane, clusterstack_tools: ClusterStackTools) -> None:
    """Cluster API's and the Docker provider's CRDs, and the tests' own provider CRDs (once per control
    plane and session)."""
    if control_plane.api_url in _crds_on:
        return
    documents = [
        *crd_documents(clusterstack_tools.capi_crds),
        *crd_documents(clusterstack_tools.capd_crds),
        *crd_documents(TESTS / "clusterstack"),
    ]
    asyncio.run(install_crds(control_plane, documents))
    _crds_on.add(control_plane.api_url)


class Releases:
    """The operator's local release source: publish a release there as a provider would."""

    def __init__(self, root: Path, helm: Path) -> None:
        self.root, self.helm = root, helm

    def publish(self, tag: str, **options: Any) -> None:
        publish_release(self.root, tag, helm=self.helm, **options)


def chart_rules(rootpath: Path) -> Path:
    return rootpath / "charts" / "cluster-stack-operator" / "files" / "rbac-rules.yaml"


def launch(
    control_plane: ControlPlane,
    tools: ClusterStackTools,
    home: Path,
    rootpath: Path,
    source: dict[str, str],
    kubeconfig: Path | None = None,
) -> OperatorProcess:
    """The operator as its own ServiceAccount (the chart's, unless ``kubeconfig`` is another's), over the
    release ``source`` (OPERATOR_SUITE_* variables)."""
    if kubeconfig is None:
        kubeconfig = service_account_kubeconfig(
            control_plane, chart_rules(rootpath), home / "operator.kubeconfig"
        )
    environment = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "OCI_"))},
        **source,
        "OPERATOR_SUITE_RELEASE_DIR": str(home / "downloads"),
        "OPERATOR_SUITE_HELM": str(tools.helm),
        "OPERATOR_SUITE_POLL_SECONDS": "1",
        "OPERATOR_SUITE_ADDON_CHECK_SECONDS": "2",
    }
    process = OperatorProcess(
        "cluster-stack-operator", kubeconfig, home / "operator.log", "--verbose", environment=environment
    )
    process.start()
    return process


def stack(object_name: str, namespace: str, /, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "ClusterStack",
        "metadata": {"name": object_name, "namespace": namespace},
        "spec": {"provider": "docker", "kubernetesVersion": "1.30", **spec},
    }


def provider_template(namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": PROVIDER_API,
        "kind": "TestProviderClusterStackReleaseTemplate",
        "metadata": {"name": "images", "namespace": namespace},
        "spec": {"template": {"metadata": {"labels": {"from": "template"}}, "spec": {"nodeImages": ["v1"]}}},
    }


def condition(obj: dict[str, Any] | None, kind: str) -> dict[str, Any]:
    for entry in ((obj or {}).get("status") or {}).get("conditions") or []:
        if entry["type"] == kind:
            return dict(entry)
    return {}


async def ready_release(kube: Kube, namespace: str, name: str, timeout: float = 60) -> dict[str, Any]:
    async def ready() -> dict[str, Any] | None:
        found = await kube.get(API, "ClusterStackRelease", name, namespace)
        return found if found and (found.get("status") or {}).get("ready") else None

    result: dict[str, Any] = await wait_until(
        ready, timeout=timeout, what=f"ClusterStackRelease {name} ready"
    )
    return result


def hook_writes(
    plane: ControlPlane,
    namespace: str = "kube-system",
    names: tuple[str, ...] = ("hook-", "addon-main"),
    resources: tuple[str, ...] | None = None,
) -> list[tuple[str, str]]:
    """The creates and deletes of the hooks chart's objects in a workload cluster's ``namespace``, in
    order, from its API server's audit log (not their Jobs' pods, which the job controller makes)."""
    writes = []
    for event in plane.audit_events():
        code = event.get("responseStatus", {}).get("code", 0)
        where = event.get("objectRef") or {}
        if where.get("namespace") != namespace or not where.get("name", "").startswith(names):
            continue
        if where.get("resource") in ("pods", "events") or where.get("subresource"):
            continue
        if resources is not None and where.get("resource") not in resources:
            continue
        # A server-side apply that makes the object is a PATCH answered 201.
        if event["verb"] == "create" or (event["verb"] == "patch" and code == 201):
            writes.append(("create", where["name"]))
        elif event["verb"] == "delete" and code < 300:
            writes.append(("delete", where["name"]))
    return writes


def stages_of(addon: dict[str, Any] | None) -> list[tuple[str, str]]:
    """A ClusterAddon's stages as (name, phase), in order."""
    return [(s["name"], s["phase"]) for s in ((addon or {}).get("status") or {}).get("stages") or []]
