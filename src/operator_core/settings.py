"""Settings, one small dataclass per concern, each read from the environment.

Every field is documented where it is declared. ``from_env`` reads
``OPERATOR_SUITE_<FIELD>`` (upper case) for each field, so a deployment can
tune a setting without code, and an unset variable keeps the default.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

__all__ = ["ControlPlaneSettings", "KubeSettings", "from_env"]

T = TypeVar("T")

_PREFIX = "OPERATOR_SUITE_"


def _cache_home() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "operator-suite"


@dataclass(frozen=True)
class KubeSettings:
    """How the operators talk to the API server."""

    field_manager: str = "operator-suite"
    """The one server-side apply field manager every write uses."""
    request_timeout: float = 10.0
    """Seconds before a single API call is abandoned."""
    max_concurrent_reconciles: int = 8
    """Reconciles that may run at once in one operator process. Many objects created together
    (or an operator start with many to catch up) then come in turns: the API server sees no burst,
    and the process's memory follows the turns, not the number of objects."""


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


_PARSERS: dict[str, Callable[[str], Any]] = {
    "str": str,
    "float": float,
    "int": int,
    "Path": Path,
    "bool": lambda raw: raw.strip().lower() in ("1", "true", "yes", "on"),
}


def from_env(settings_type: type[T], environ: Mapping[str, str] | None = None) -> T:
    """An instance of ``settings_type`` with fields overridden by OPERATOR_SUITE_* variables."""
    source = os.environ if environ is None else environ
    overrides: dict[str, Any] = {}
    for item in dataclasses.fields(settings_type):  # type: ignore[arg-type]
        raw = source.get(_PREFIX + item.name.upper())
        if raw is not None:
            overrides[item.name] = _PARSERS[str(item.type)](raw)
    return settings_type(**overrides)
