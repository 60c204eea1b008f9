"""Build, or reuse, Prometheus and promtool, which test the charts' alert rules, the way
:mod:`.clusterstack_tools` builds helm: from the Go module ``github.com/prometheus/prometheus``
(``cmd/prometheus``, ``cmd/promtool``), pinned in ``hack/prometheus/go.mod``, into::

    <cache_dir>/prometheus-V-<hash of the pinned files and the build flags>/
        bin/prometheus  bin/promtool  build.log

Each binary appears at once (built aside, then renamed), and only a missing one is built;
``<that directory>.lock`` keeps two builders apart. ``operator-suite-dev binaries --clusterstack``
builds them with the other tools, so that ``make test`` has them before any test starts.
The rules they test come from :func:`operator_testkit.charts.chart_alert_rules`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from operator_core.settings import from_env
from operator_testkit.binaries import (
    GoProgram,
    GoPrograms,
    ensure_go_programs,
    find_hack_dir,
    required_version,
)
from operator_testkit.settings import ControlPlaneSettings

__all__ = ["PrometheusTools", "ensure_prometheus_tools", "prometheus_release"]

_PROMETHEUS = "github.com/prometheus/prometheus"
_PINNED_FILES = ("prometheus/go.mod", "prometheus/go.sum")
_COMMANDS = ("prometheus", "promtool")


@dataclass(frozen=True)
class PrometheusTools:
    """Where Prometheus and promtool are, and which module version they are built from."""

    programs: GoPrograms
    version: str
    """The pinned module version (``v0.316.0`` is Prometheus 3.16.0: :func:`prometheus_release`)."""

    @property
    def directory(self) -> Path:
        return self.programs.directory

    @property
    def prometheus(self) -> Path:
        return self.programs.path("prometheus")

    @property
    def promtool(self) -> Path:
        return self.programs.path("promtool")


def prometheus_release(module_version: str) -> str:
    """The release a module version stands for: Prometheus tags its Go module v0.3YY.Z for 3.YY.Z."""
    _, minor, patch = module_version.lstrip("v").split("-")[0].split(".")
    return f"{int(minor) // 100}.{int(minor) % 100}.{patch}"


def _ldflags(version: str) -> str:
    """The version stamp of Prometheus's release build (without the git revision, which the module
    proxy lacks), so that ``--version`` and ``prometheus_build_info`` name the release."""
    return f"-s -w -X github.com/prometheus/common/version.Version={prometheus_release(version)}"


def ensure_prometheus_tools(settings: ControlPlaneSettings | None = None) -> PrometheusTools:
    """Prometheus and promtool at the pinned version, built first if the cache lacks them.

    A failed build raises :class:`ControlPlaneError` naming the ``go`` command, its directory and
    its log (whose last lines it quotes)."""
    settings = settings or from_env(ControlPlaneSettings)
    version = required_version(find_hack_dir() / "prometheus" / "go.mod", _PROMETHEUS)
    programs = tuple(
        GoProgram(command, "prometheus", f"{_PROMETHEUS}/cmd/{command}", _ldflags(version))
        for command in _COMMANDS
    )
    built = ensure_go_programs(
        f"prometheus-{version}", programs, _PINNED_FILES, [_ldflags(version)], settings
    )
    return PrometheusTools(built, version)
