"""The Cluster Stack operator's sandbox entry: what ``operator-suite-dev sandbox up`` runs for it (Cluster
API's CRDs, a local registry with one published stack, and a ClusterStack that follows it), and its
journey (``operator-suite-dev sandbox journey``, :mod:`.clusterstack_journey`).

It sits above both the release helpers (:mod:`.clusterstack`) and the journey, so that neither imports
the other back.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from operator_testkit.clusterstack_tools import ensure_clusterstack_tools
from operator_testkit.controlplane import ControlPlane
from operator_testkit.drivers.clusterstack import publish_release, push_release
from operator_testkit.drivers.clusterstack_journey import run_journey
from operator_testkit.registry import start_detached_registry
from operator_testkit.sandbox import SandboxEntry

__all__ = ["SANDBOX", "SANDBOX_RELEASE", "SANDBOX_REPOSITORY"]

SANDBOX_REPOSITORY = "stacks/cluster-stacks"
SANDBOX_RELEASE = "docker-sandbox-1-30-v1"


def _prepare_sandbox(plane: ControlPlane, home: Path) -> Mapping[str, str]:
    """Cluster API's CRDs, a registry on loopback holding one stack, and the operator's settings for it."""
    tools = ensure_clusterstack_tools()
    for crds in (tools.capi_crds, tools.capd_crds):
        plane.kubectl("apply", "--server-side", "-f", str(crds))
    plane.kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
    registry = start_detached_registry(home / "registry", tools.registry)
    _, release = publish_release(home / "published", SANDBOX_RELEASE, helm=tools.helm)
    push_release(registry, release, SANDBOX_REPOSITORY)
    return {
        "OCI_REPOSITORY": f"{registry.host}/{SANDBOX_REPOSITORY}",
        "OPERATOR_SUITE_OCI_PLAIN_HTTP": "true",
        "OPERATOR_SUITE_HELM": str(tools.helm),
        "OPERATOR_SUITE_RELEASE_DIR": str(home / "downloads"),
    }


def _journey(directory: Path, pause: bool) -> int:
    return run_journey(directory, pause=pause)


SANDBOX = SandboxEntry(
    script="cluster-stack-operator",
    rbac="charts/cluster-stack-operator/files/rbac-rules.yaml",
    samples=("deploy/samples/clusterstack_sandbox.yaml",),
    prepare=_prepare_sandbox,
    journey=_journey,
    usage="""  kubectl get clusterstacks,clusterstackreleases,clusterclasses
  (a local registry holds the stack docker-sandbox-1-30-v1; the operator follows it by auto-subscribe)""",
)
