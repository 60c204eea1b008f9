"""The Gateway API's CRDs for the Typesense HTTPRoute tests, fetched the way :mod:`.clusterstack_tools`
fetches Cluster API's: ``config/crd/standard/`` of ``sigs.k8s.io/gateway-api``, pinned in
``hack/gateway-api/go.mod`` (the version the Go operator 0.4.1 is built against), checked against
its go.sum, copied into ``<cache_dir>/gateway-api-V-<hash of the pinned files>/crds/``.

``operator-suite-dev binaries --clusterstack`` fetches them with the other tools, so that ``make
test`` has them before any test starts; :func:`ensure_gateway_api_crds` fetches them on first use
otherwise.
"""

from __future__ import annotations

from pathlib import Path

from operator_core.settings import from_env
from operator_testkit.binaries import build_once, find_hack_dir, pin_digest, required_version, say
from operator_testkit.clusterstack_tools import copy_module_crds
from operator_testkit.settings import ControlPlaneSettings

__all__ = ["ensure_gateway_api_crds"]

_GATEWAY_API = "sigs.k8s.io/gateway-api"
_CRDS = "config/crd/standard"
_PINNED_FILES = ("gateway-api/go.mod", "gateway-api/go.sum")


def ensure_gateway_api_crds(settings: ControlPlaneSettings | None = None) -> Path:
    """The directory of the standard channel's CRD files (HTTPRoute, ReferenceGrant, Gateway, …)."""
    settings = settings or from_env(ControlPlaneSettings)
    hack = find_hack_dir()
    version = required_version(hack / "gateway-api" / "go.mod", _GATEWAY_API)
    root = settings.cache_dir / f"gateway-api-{version}-{pin_digest(hack, _PINNED_FILES, _CRDS)}"
    crds = root / "crds"

    def fetch() -> None:
        say(f"fetching the Gateway API {version} CRDs (log: {root / 'build.log'})")
        copy_module_crds(crds, _GATEWAY_API, _CRDS, hack / "gateway-api", root / "build.log")

    build_once(root, crds.is_dir, fetch)
    return crds
