"""CRDs of projects we integrate with, fetched the way :mod:`.clusterstack_tools` fetches Cluster API's.

Each is a directory of a Go module, pinned in ``hack/<name>/go.mod``, checked against its go.sum,
and copied into ``<cache_dir>/<name>-V-<hash of the pinned files>/crds/``:

- the Gateway API's ``config/crd/standard/`` (``sigs.k8s.io/gateway-api``, the version the Go
  Typesense operator 0.4.1 is built against): HTTPRoute, ReferenceGrant, Gateway;
- the Prometheus Operator's ``example/prometheus-operator-crd/``: ServiceMonitor, PodMonitor,
  PrometheusRule and the rest, against which the charts' objects are validated;
- cert-manager's ``deploy/crds/``: Certificate, Issuer and the rest, against which the Typesense
  operator's Certificate (spec.tls.issuerRef) is validated.

``operator-suite-dev binaries --clusterstack`` fetches them with the other tools, so that ``make
test`` has them before any test starts; each ``ensure_*`` fetches on first use otherwise.
"""

from __future__ import annotations

from pathlib import Path

from operator_core.settings import from_env
from operator_testkit.binaries import build_once, find_hack_dir, pin_digest, required_version, say
from operator_testkit.clusterstack_tools import copy_module_crds
from operator_testkit.settings import ControlPlaneSettings

__all__ = [
    "ensure_cert_manager_crds",
    "ensure_gateway_api_crds",
    "ensure_module_crds",
    "ensure_prometheus_operator_crds",
]


def ensure_module_crds(
    name: str, module: str, subdirectory: str, title: str, settings: ControlPlaneSettings | None = None
) -> Path:
    """The directory of ``module``'s CRD files in ``subdirectory``, at the version ``hack/<name>/`` pins."""
    settings = settings or from_env(ControlPlaneSettings)
    hack = find_hack_dir()
    version = required_version(hack / name / "go.mod", module)
    pinned = (f"{name}/go.mod", f"{name}/go.sum")
    root = settings.cache_dir / f"{name}-{version}-{pin_digest(hack, pinned, subdirectory)}"
    crds = root / "crds"

    def fetch() -> None:
        say(f"fetching the {title} {version} CRDs (log: {root / 'build.log'})")
        copy_module_crds(crds, module, subdirectory, hack / name, root / "build.log")

    build_once(root, crds.is_dir, fetch)
    return crds


def ensure_gateway_api_crds(settings: ControlPlaneSettings | None = None) -> Path:
    """The Gateway API's standard channel: HTTPRoute, ReferenceGrant, Gateway, …"""
    return ensure_module_crds(
        "gateway-api", "sigs.k8s.io/gateway-api", "config/crd/standard", "Gateway API", settings
    )


def ensure_prometheus_operator_crds(settings: ControlPlaneSettings | None = None) -> Path:
    """The Prometheus Operator's CRDs: ServiceMonitor, PodMonitor, PrometheusRule, …"""
    return ensure_module_crds(
        "prometheus-operator",
        "github.com/prometheus-operator/prometheus-operator",
        "example/prometheus-operator-crd",
        "Prometheus Operator",
        settings,
    )


def ensure_cert_manager_crds(settings: ControlPlaneSettings | None = None) -> Path:
    """cert-manager's CRDs: Certificate, CertificateRequest, Issuer, ClusterIssuer, …"""
    return ensure_module_crds(
        "cert-manager", "github.com/cert-manager/cert-manager", "deploy/crds", "cert-manager", settings
    )
