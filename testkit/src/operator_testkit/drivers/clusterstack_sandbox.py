"""The Cluster Stack operator's sandbox entry: what ``operator-suite-dev sandbox up`` runs for it (Cluster
API's CRDs, a local registry with one published stack, and a ClusterStack that follows it), and its
journey (``operator-suite-dev sandbox journey``, :mod:`.clusterstack_journey`).

It sits above both the release helpers (:mod:`.clusterstack`) and the journey, so that neither imports
the other back.
"""

from __future__ import annotations

from pathlib import Path

from operator_testkit.clusterstack_tools import ensure_clusterstack_tools
from operator_testkit.drivers.clusterstack import publish_release, push_release
from operator_testkit.drivers.clusterstack_journey import run_journey
from operator_testkit.registry import start_detached_registry
from operator_testkit.sandbox import Prepared, SandboxEntry, SandboxSite

__all__ = ["SANDBOX", "SANDBOX_RELEASE", "SANDBOX_REPOSITORY"]

SANDBOX_REPOSITORY = "stacks/cluster-stacks"
SANDBOX_RELEASE = "docker-sandbox-1-30-v1"


def _prepare_sandbox(site: SandboxSite) -> Prepared:
    """Cluster API's CRDs, a registry holding one stack where the operator's pod reaches it, and the
    operator's settings for it."""
    tools = ensure_clusterstack_tools()
    for crds in (tools.capi_crds, tools.capd_crds):
        site.plane.kubectl("apply", "--server-side", "-f", str(crds))
    site.plane.kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
    registry = start_detached_registry(site.home / "registry", tools.registry, address=site.address)
    _, release = publish_release(site.home / "published", SANDBOX_RELEASE, helm=tools.helm)
    push_release(registry, release, SANDBOX_REPOSITORY)
    return Prepared(
        env={
            "OPERATOR_SUITE_RELEASE_SOURCE": "oci",
            "OPERATOR_SUITE_OCI_REPOSITORY": f"{registry.host}/{SANDBOX_REPOSITORY}",
            "OPERATOR_SUITE_OCI_PLAIN_HTTP": "true",
        }
    )


def _journey(directory: Path, pause: bool) -> int:
    return run_journey(directory, pause=pause)


SANDBOX = SandboxEntry(
    chart="cluster-stack-operator",
    samples=("deploy/samples/clusterstack_sandbox.yaml",),
    prepare=_prepare_sandbox,
    journey=_journey,
    usage="""  kubectl get clusterstacks,clusterstackreleases,clusterclasses
  (a local registry holds the stack docker-sandbox-1-30-v1; the operator follows it by auto-subscribe)""",
)
