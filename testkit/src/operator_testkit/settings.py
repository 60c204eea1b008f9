"""Settings of the test kit, read from OPERATOR_SUITE_* variables as the operators' are."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["ControlPlaneSettings"]


def _cache_home() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "operator-suite"


@dataclass(frozen=True)
class ControlPlaneSettings:
    """Where the local control plane's binaries come from and live."""

    cache_dir: Path = field(default_factory=_cache_home)
    """Root of the binary cache, outside any work tree; binaries go in <cache_dir>/<versions>/bin."""
    kubernetes_version: str = "v1.35.4"
    """The k8s.io/kubernetes release pinned in hack/controlplane/go.mod."""
    etcd_version: str = "v3.6.16"
    """The etcd release pinned in hack/etcd/go.mod."""
    start_timeout: float = 120.0
    """Seconds to wait for every component to report ready."""
