"""cert-manager's real controllers, for the tests of ``spec.tls.issuerRef``.

Upstream's ``cmd/controller`` is a module of its own that the Go proxy here does not serve, so
``hack/cert-manager-controller`` is a small launcher of ours over cert-manager's ``pkg/controller`` (the
module pinned in its go.mod): the issuers, the CA and SelfSigned signers, the approver and the
certificates controllers, without leader election or a metrics server. :func:`ensure_cert_manager_controller`
builds it once (about three minutes cold) into::

    <cache_dir>/cert-manager-controller-V-<hash of go.mod, go.sum and main.go>/bin/cert-manager-controller

:func:`running_cert_manager` runs it against a control plane that serves cert-manager's CRDs
(:func:`operator_testkit.module_crds.ensure_cert_manager_crds`) and stops it when the block ends; it
dies with the test process too (:mod:`.servers`).
"""

from __future__ import annotations

import contextlib
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from operator_core.settings import from_env
from operator_testkit.binaries import GoProgram, ensure_go_programs, find_hack_dir, required_version
from operator_testkit.errors import ControlPlaneError
from operator_testkit.servers import log_tail, spawn, stop_group
from operator_testkit.settings import ControlPlaneSettings

__all__ = ["RunningCertManager", "ensure_cert_manager_controller", "running_cert_manager"]

_MODULE = "cert-manager-controller"
_PINNED_FILES = tuple(f"{_MODULE}/{name}" for name in ("go.mod", "go.sum", "main.go"))
_LDFLAGS = "-s -w"


def ensure_cert_manager_controller(settings: ControlPlaneSettings | None = None) -> Path:
    """The launcher of cert-manager's controllers, built first if the cache lacks it.

    A failed build raises :class:`ControlPlaneError` naming the ``go`` command and its log."""
    settings = settings or from_env(ControlPlaneSettings)
    version = required_version(find_hack_dir() / _MODULE / "go.mod", "github.com/cert-manager/cert-manager")
    program = GoProgram(_MODULE, _MODULE, ".", _LDFLAGS)
    built = ensure_go_programs(f"{_MODULE}-{version}", (program,), _PINNED_FILES, [_LDFLAGS], settings)
    return built.path(_MODULE)


@dataclass(frozen=True)
class RunningCertManager:
    """One running launcher: where it logs, and the namespace its ClusterIssuers read Secrets from."""

    log: Path
    cluster_resource_namespace: str
    process: subprocess.Popen[bytes]

    def alive(self) -> bool:
        return self.process.poll() is None


@contextlib.contextmanager
def running_cert_manager(
    kubeconfig: Path,
    directory: Path,
    *,
    cluster_resource_namespace: str = "cert-manager",
    binary: Path | None = None,
) -> Iterator[RunningCertManager]:
    """cert-manager's controllers against the API server of ``kubeconfig``, logging into
    ``directory/cert-manager.log``, stopped when the block ends.

    A CA ClusterIssuer's Secret is read from ``cluster_resource_namespace``, as cert-manager's
    ``--cluster-resource-namespace`` has it. Raises :class:`ControlPlaneError` with its log when it
    exits in its first seconds (a bad flag, an API server it cannot reach)."""
    binary = binary or ensure_cert_manager_controller()
    directory.mkdir(parents=True, exist_ok=True)
    log = directory / "cert-manager.log"
    argv = [
        str(binary),
        f"--kubeconfig={kubeconfig}",
        f"--cluster-resource-namespace={cluster_resource_namespace}",
        "-v=2",
    ]
    process = spawn(argv, log, bound=True, truncate=True, cwd=directory)
    try:
        # It has no health endpoint: it is taken as started when it has not exited in two seconds
        # (a bad flag or an unreachable API server ends it at once); issuing is what tests wait for.
        time.sleep(2)
        if process.poll() is not None:
            raise ControlPlaneError(
                f"cert-manager's controllers exited at once (code {process.returncode}); "
                f"its log ({log}):\n{log_tail(log)}"
            )
        yield RunningCertManager(log, cluster_resource_namespace, process)
    finally:
        stop_group(process)
