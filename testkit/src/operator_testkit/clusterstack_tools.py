"""Build, or reuse, the tools the Cluster Stack tests need, the way :mod:`.binaries` builds the
control plane: from Go modules pinned under ``hack/``, into a cache directory outside any work tree.

- ``helm`` (``helm.sh/helm/v3``, ``cmd/helm``), a tool of the control plane's module
  (``hack/controlplane/go.mod``): its Kubernetes libraries are the control plane's, so once the control
  plane is built (:func:`~operator_testkit.binaries.ensure_binaries`, waited for first) helm links
  from the shared Go build cache in seconds instead of compiling them again;
- ``registry``, the CNCF distribution registry (``github.com/distribution/distribution/v3``,
  its command with only the filesystem and in-memory storage drivers: ``hack/registry/main.go``),
  pinned in ``hack/registry/go.mod``;
- Cluster API's CRDs (``config/crd/bases/`` of ``sigs.k8s.io/cluster-api``), pinned in
  ``hack/cluster-api/go.mod``;
- the same of Cluster API v1.8, the last release that serves only v1beta1 (a management cluster of
  that age), pinned in ``hack/cluster-api-v1beta1/go.mod``;
- the Docker provider's CRDs, its templates among them (``infrastructure/docker/config/crd/bases/``
  of ``sigs.k8s.io/cluster-api/test``), pinned in ``hack/capd/go.mod``;
- ORC's CRDs (``config/crd/bases/`` of ``github.com/k-orc/openstack-resource-controller/v2``): the
  Images openstack stacks render in their classes, pinned in ``hack/orc/go.mod``.

The versions come from those go.mod files; go.sum checks every download. Everything lands in::

    <cache_dir>/clusterstack-helm-V-registry-V-capi-V-capd-V-<hash of the pinned files>/
        bin/helm  bin/registry  crds/cluster-api/*.yaml  crds/cluster-api-v1beta1/*.yaml
        crds/capd/*.yaml  crds/orc/*.yaml  build.log

Each part appears at once (built aside, then renamed), and only missing parts are built, so a
failed build keeps the parts that were done. ``<that directory>.lock`` keeps two builders apart.
``operator-suite-dev binaries --clusterstack`` is the command-line face of
:func:`ensure_clusterstack_tools`.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from operator_core.settings import from_env
from operator_testkit.binaries import (
    build_binary,
    build_once,
    ensure_binaries,
    find_hack_dir,
    pin_digest,
    required_version,
    run_go,
    say,
)
from operator_testkit.errors import ControlPlaneError
from operator_testkit.settings import ControlPlaneSettings

__all__ = [
    "ClusterStackPins",
    "ClusterStackTools",
    "clusterstack_pins",
    "copy_module_crds",
    "ensure_clusterstack_tools",
    "helm_environment",
]

_HELM = "helm.sh/helm/v3"
_REGISTRY = "github.com/distribution/distribution/v3"
_CLUSTER_API = "sigs.k8s.io/cluster-api"
_CAPD = "sigs.k8s.io/cluster-api/test"
_ORC = "github.com/k-orc/openstack-resource-controller/v2"
_CLIENT_GO = "k8s.io/client-go"
_CLUSTER_API_CRDS = "config/crd/bases"
_CAPD_CRDS = "infrastructure/docker/config/crd/bases"
_PINNED_FILES = (
    *(
        f"{module}/{name}"
        for module in ("controlplane", "registry", "cluster-api", "cluster-api-v1beta1", "capd", "orc")
        for name in ("go.mod", "go.sum")
    ),
    "registry/main.go",
)


@dataclass(frozen=True)
class ClusterStackPins:
    """The versions pinned in the ``go.mod`` files of ``hack/``: controlplane (helm's), registry,
    cluster-api, cluster-api-v1beta1, capd and orc."""

    helm: str
    registry: str
    cluster_api: str
    cluster_api_v1beta1: str
    """The Cluster API release whose CRDs serve only v1beta1."""
    capd: str
    orc: str
    helm_client_go: str
    """The k8s.io/client-go version helm is built with; it sets helm's default Kubernetes version."""


@dataclass(frozen=True)
class ClusterStackTools:
    """Where each Cluster Stack tool is, and which versions they are."""

    directory: Path
    pins: ClusterStackPins

    @property
    def helm(self) -> Path:
        return self.directory / "bin" / "helm"

    @property
    def registry(self) -> Path:
        return self.directory / "bin" / "registry"

    @property
    def capi_crds(self) -> Path:
        """Cluster API's CRD files (``config/crd/bases/*.yaml``)."""
        return self.directory / "crds" / "cluster-api"

    @property
    def capi_v1beta1_crds(self) -> Path:
        """Cluster API v1.8's CRD files: Clusters and ClusterClasses in v1beta1 only."""
        return self.directory / "crds" / "cluster-api-v1beta1"

    @property
    def capd_crds(self) -> Path:
        """The Docker provider's CRD files (``infrastructure/docker/config/crd/bases/*.yaml``)."""
        return self.directory / "crds" / "capd"

    @property
    def orc_crds(self) -> Path:
        """ORC's CRD files (``config/crd/bases/*.yaml``): Images, Flavors, Networks and the rest."""
        return self.directory / "crds" / "orc"

    def complete(self) -> bool:
        return (
            self.helm.is_file()
            and self.registry.is_file()
            and self.capi_crds.is_dir()
            and self.capi_v1beta1_crds.is_dir()
            and self.capd_crds.is_dir()
            and self.orc_crds.is_dir()
        )


def clusterstack_pins(hack: Path | None = None) -> ClusterStackPins:
    """The pinned versions, read from the go.mod files under ``hack`` (found as binaries.py finds it)."""
    hack = hack or find_hack_dir()
    return ClusterStackPins(
        helm=required_version(hack / "controlplane" / "go.mod", _HELM),
        registry=required_version(hack / "registry" / "go.mod", _REGISTRY),
        cluster_api=required_version(hack / "cluster-api" / "go.mod", _CLUSTER_API),
        cluster_api_v1beta1=required_version(hack / "cluster-api-v1beta1" / "go.mod", _CLUSTER_API),
        capd=required_version(hack / "capd" / "go.mod", _CAPD),
        orc=required_version(hack / "orc" / "go.mod", _ORC),
        helm_client_go=required_version(hack / "controlplane" / "go.mod", _CLIENT_GO),
    )


def _helm_ldflags(pins: ClusterStackPins) -> str:
    """What helm's Makefile sets for a release: its version (else ``helm version`` says v3.22 with
    no patch), and the Kubernetes version its client-go stands for (else charts see v1.20)."""
    major, minor = pins.helm_client_go.lstrip("v").split(".")[:2]
    kubernetes_major, kubernetes_minor = str(int(major) + 1), minor
    stamps = [
        f"-X {_HELM}/internal/version.version={pins.helm}",
        f"-X {_HELM}/internal/version.gitTreeState=clean",
        *(
            f"-X {_HELM}/pkg/{package}.k8sVersion{part}={value}"
            for package in ("lint/rules", "chartutil")
            for part, value in (("Major", kubernetes_major), ("Minor", kubernetes_minor))
        ),
    ]
    return " ".join(["-s", "-w", *stamps])


def _registry_ldflags(pins: ClusterStackPins) -> str:
    """What distribution's Makefile sets (without the git revision, which the module proxy lacks)."""
    return f"-s -w -X {_REGISTRY}/version.version={pins.registry} -X {_REGISTRY}/version.mainpkg={_REGISTRY}"


def _cache_directory(settings: ControlPlaneSettings, hack: Path, pins: ClusterStackPins) -> Path:
    recipe = (_helm_ldflags(pins), _registry_ldflags(pins), _CLUSTER_API_CRDS, _CAPD_CRDS)
    label = (
        f"clusterstack-helm-{pins.helm}-registry-{pins.registry}-capi-{pins.cluster_api}"
        f"-capd-{pins.capd}-{pin_digest(hack, _PINNED_FILES, *recipe)}"
    )
    return settings.cache_dir / label


def copy_module_crds(target: Path, module: str, subdirectory: str, module_dir: Path, log: Path) -> None:
    """Download ``module`` at its pinned version (checked against go.sum) and copy its CRD files."""
    output = run_go(["mod", "download", "-json", module], module_dir, log, capture_stdout=True)
    try:
        source = Path(json.loads(output)["Dir"]) / subdirectory
    except (ValueError, KeyError) as error:
        raise ControlPlaneError(
            f"'go mod download -json {module}' in {module_dir} named no directory ({error}); see {log}"
        ) from error
    files = sorted(source.glob("*.yaml"))
    if not files:
        raise ControlPlaneError(f"{module} has no CRD files in {subdirectory}/ (looked in {source})")
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".copy-{target.name}-", dir=target.parent))
    try:
        for path in files:
            shutil.copyfile(path, staging / path.name)  # not copy2: the module cache's files are read-only
        shutil.rmtree(target, ignore_errors=True)
        staging.rename(target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _build_helm(tools: ClusterStackTools, hack: Path, log: Path, settings: ControlPlaneSettings) -> None:
    """helm, after the control plane: built in the same module, it then compiles only its own packages
    (12 s instead of 92 s alone with an empty build cache, and no second compile of the Kubernetes
    libraries beside the control plane's in a cold ``make run``)."""
    ensure_binaries(settings)
    build_binary(tools.helm, f"{_HELM}/cmd/helm", _helm_ldflags(tools.pins), hack / "controlplane", log)


def _parts(
    tools: ClusterStackTools, hack: Path, log: Path, settings: ControlPlaneSettings
) -> list[tuple[str, Path, Callable[[], None]]]:
    pins = tools.pins
    return [
        (
            f"registry {pins.registry} (distribution)",
            tools.registry,
            lambda: build_binary(
                # hack/registry's own main: distribution's command with only the drivers used here.
                tools.registry,
                ".",
                _registry_ldflags(pins),
                hack / "registry",
                log,
            ),
        ),
        (
            f"Cluster API {pins.cluster_api} CRDs",
            tools.capi_crds,
            lambda: copy_module_crds(
                tools.capi_crds, _CLUSTER_API, _CLUSTER_API_CRDS, hack / "cluster-api", log
            ),
        ),
        (
            f"Cluster API {pins.cluster_api_v1beta1} CRDs (v1beta1 only)",
            tools.capi_v1beta1_crds,
            lambda: copy_module_crds(
                tools.capi_v1beta1_crds, _CLUSTER_API, _CLUSTER_API_CRDS, hack / "cluster-api-v1beta1", log
            ),
        ),
        (
            f"Docker provider (cluster-api/test {pins.capd}) CRDs",
            tools.capd_crds,
            lambda: copy_module_crds(tools.capd_crds, _CAPD, _CAPD_CRDS, hack / "capd", log),
        ),
        (
            f"ORC {pins.orc} CRDs",
            tools.orc_crds,
            lambda: copy_module_crds(tools.orc_crds, _ORC, _CLUSTER_API_CRDS, hack / "orc", log),
        ),
        # Last: it waits for the control plane's build, and the rest needs none of it.
        (f"helm {pins.helm}", tools.helm, lambda: _build_helm(tools, hack, log, settings)),
    ]


def _build(tools: ClusterStackTools, hack: Path, settings: ControlPlaneSettings) -> None:
    log = tools.directory / "build.log"
    for what, path, build in _parts(tools, hack, log, settings):
        if path.exists():
            continue
        say(f"building {what} (log: {log})")
        started = time.monotonic()
        build()
        say(f"{what}: done in {time.monotonic() - started:.0f} s")


def ensure_clusterstack_tools(settings: ControlPlaneSettings | None = None) -> ClusterStackTools:
    """helm, the registry and the Cluster API CRDs, built or fetched first if the cache lacks them."""
    settings = settings or from_env(ControlPlaneSettings)
    hack = find_hack_dir()
    pins = clusterstack_pins(hack)
    tools = ClusterStackTools(_cache_directory(settings, hack, pins), pins)
    build_once(tools.directory, tools.complete, lambda: _build(tools, hack, settings))
    return tools


def helm_environment(home: Path) -> dict[str, str]:
    """This process's environment, with helm's cache, configuration (registry logins too) and data
    under ``home``, so a test's helm never reads or writes the user's."""
    return {
        **os.environ,
        "HELM_CACHE_HOME": str(home / "cache"),
        "HELM_CONFIG_HOME": str(home / "config"),
        "HELM_DATA_HOME": str(home / "data"),
    }
