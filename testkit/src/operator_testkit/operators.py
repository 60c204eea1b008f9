"""Run an operator's console script as a real process, as a ServiceAccount bound to its chart's RBAC.

Tests see the operator exactly as a cluster would run it: its own process, its
own identity, and only the permissions its Helm chart grants: the chart's RBAC objects, rendered by
the real helm (:func:`operator_rbac`), not a copy of them. A missing
RBAC rule therefore fails a test instead of surfacing in production.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Self

import httpx
import yaml
from prometheus_client.parser import text_string_to_metric_families

from operator_testkit.charts import render_chart
from operator_testkit.controlplane import ControlPlane, free_port
from operator_testkit.errors import ControlPlaneError
from operator_testkit.servers import spawn

__all__ = [
    "OperatorProcess",
    "OperatorRegistry",
    "account_kubeconfig",
    "chart_account",
    "operator_rbac",
    "service_account_kubeconfig",
]


_RBAC_KINDS = frozenset({"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"})


def chart_account(chart: str) -> tuple[str, str]:
    """(namespace, Lease name) of an operator installed from ``charts/<chart>`` as :func:`operator_rbac`
    installs it: release ``<chart>`` in ``<operator>-system``."""
    return chart.removesuffix("-operator") + "-system", f"{chart}-leader"


def operator_rbac(rules_file: Path) -> list[dict[str, Any]]:
    """What the chart that ``rules_file`` (its ``files/rbac-rules.yaml``) belongs to grants, rendered by
    the real helm: release ``<chart>`` in ``<operator>-system``, every namespace watched, leader election
    on. Its ServiceAccount, ClusterRole and binding, the Role and binding of its Lease, and that
    Namespace."""
    chart = rules_file.resolve().parent.parent.name
    namespace, _ = chart_account(chart)
    with tempfile.TemporaryDirectory(prefix="helm-") as home:
        documents = render_chart(
            Path(home), chart, "--set", "leaderElection.enabled=true", release=chart, namespace=namespace
        )
    granted = [document for document in documents if document.get("kind") in _RBAC_KINDS]
    return [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}, *granted]


def service_account_kubeconfig(control_plane: ControlPlane, rules_file: Path, out: Path) -> Path:
    """Grant the chart's rules (:func:`operator_rbac`, as admin), then write a kubeconfig with a token of
    its ServiceAccount."""
    return account_kubeconfig(control_plane, operator_rbac(rules_file), out)


def account_kubeconfig(control_plane: ControlPlane, documents: list[dict[str, Any]], out: Path) -> Path:
    """Apply ``documents`` (as admin: one ServiceAccount, and what grants it what it may do), then write
    a kubeconfig with a token of that ServiceAccount: for another operator (a benchmark's Go peer) as
    much as for ours."""
    kubectl = [str(control_plane.binaries.kubectl), f"--kubeconfig={control_plane.kubeconfig}"]
    subprocess.run(
        [*kubectl, "apply", "--server-side", "-f", "-"],
        input=yaml.safe_dump_all(documents).encode(),
        check=True,
        capture_output=True,
    )
    (account,) = [document["metadata"] for document in documents if document["kind"] == "ServiceAccount"]
    token = subprocess.run(
        [*kubectl, "create", "token", account["name"], "-n", account["namespace"], "--duration=24h"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    out.write_text(control_plane.kubeconfig_for_token(token))
    out.chmod(0o600)
    return out


class OperatorProcess:
    """One operator process, started from its console script and stopped with SIGTERM.

    :meth:`of_command` runs any other operator the same way (the Go peer of a benchmark): anything
    that serves a health endpoint at ``/healthz`` on a loopback port it is told.
    """

    def __init__(
        self,
        script: str,
        kubeconfig: Path,
        log_path: Path,
        *arguments: str,
        environment: Mapping[str, str] | None = None,
    ) -> None:
        # Beside this Python first: the venv's scripts, even when its bin/ is not on PATH.
        executable = shutil.which(
            script, path=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
        )
        if executable is None:
            raise ControlPlaneError(f"console script {script} is not installed")
        port = free_port()
        probes = ["--health-address", f"127.0.0.1:{port}"]
        self._prepare(
            script,
            [executable, "--kubeconfig", str(kubeconfig), *probes, *arguments],
            port,
            log_path,
            environment,
        )
        self.probes_port: int | None = port
        """Where the suite's own /healthz, /readyz and /metrics answer (None for another operator)."""

    @classmethod
    def of_command(
        cls,
        name: str,
        argv_for_port: Callable[[int], list[str]],
        log_path: Path,
        *,
        environment: Mapping[str, str] | None = None,
    ) -> Self:
        """Another operator's command line, given the loopback port its ``/healthz`` must answer on.

        It dies with this process, whatever ends it: a benchmark killed mid-run leaves no peer behind.
        """
        process = cls.__new__(cls)
        port = free_port()
        process._prepare(name, argv_for_port(port), port, log_path, environment)
        process._bind_to_parent = True
        process.probes_port = None
        return process

    def _prepare(
        self,
        name: str,
        argv: list[str],
        port: int,
        log_path: Path,
        environment: Mapping[str, str] | None = None,
    ) -> None:
        self.script = name
        self.log_path = log_path
        self.port = port
        self._argv = argv
        self._environment = dict(environment) if environment is not None else None
        self._started_with = self._environment
        self._bind_to_parent = False
        self._process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def pid(self) -> int:
        if self._process is None:
            raise ControlPlaneError(f"{self.script} is not running")
        return self._process.pid

    def health(self) -> dict[str, Any]:
        """What the operator's ``/healthz`` says: its reconciles counted, its caches' state."""
        answer = httpx.get(f"http://127.0.0.1:{self.port}/healthz", timeout=5)
        answer.raise_for_status()
        return dict(answer.json())

    def sample(self, name: str, **labels: str) -> float | None:
        """One sample of the operator's ``/metrics`` (None when it has no such series)."""
        for family in text_string_to_metric_families(self.metrics()):
            for found in family.samples:
                if found.name == name and all(found.labels.get(k) == v for k, v in labels.items()):
                    return float(found.value)
        return None

    def metrics(self) -> str:
        """The operator's ``/metrics`` page, in Prometheus' text format."""
        if self.probes_port is None:
            raise ControlPlaneError(f"{self.script} serves no /metrics of the suite's")
        answer = httpx.get(f"http://127.0.0.1:{self.probes_port}/metrics", timeout=5)
        answer.raise_for_status()
        return answer.text

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def start(self, timeout: float = 60.0) -> None:
        # Bound to this process from a thread that lasts: the soak starts it again from passing threads.
        self._process = spawn(self._argv, self.log_path, bound=self._bind_to_parent, env=self._environment)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise ControlPlaneError(
                    f"{self.script} exited with {self._process.returncode}:\n{self.log()}"
                )
            try:
                if httpx.get(f"http://127.0.0.1:{self.port}/healthz", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        self.stop()
        raise ControlPlaneError(f"{self.script} never reported live:\n{self.log()}")

    def restart(self, settings: Mapping[str, str] | None = None) -> None:
        """Stop it and start it again with these settings besides the environment it was first given,
        for a test that needs other settings for a while; None: as it was first started (a test's
        settings must not outlive it: the next test gets the operator its fixture promises)."""
        self.stop()
        base = self._started_with if self._started_with is not None else dict(os.environ)
        self._environment = {**base, **settings} if settings is not None else self._started_with
        self.start()

    def kill(self) -> None:
        """SIGKILL, as a crash or an OOM kill would end it; ``start`` brings it back."""
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
            self._process.wait()
        self._process = None

    def stop(self) -> int | None:
        """SIGTERM, wait, then SIGKILL; returns the exit code."""
        code = None
        if self._process is not None:
            if self._process.poll() is None:
                self._process.send_signal(signal.SIGTERM)
                try:
                    self._process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    self._process.kill()
                    self._process.wait()
            code = self._process.returncode
            self._process = None
        return code


class OperatorRegistry:
    """At most one process per (operator, control plane), started on first use, all stopped at the end.

    Lets a session-wide operator serve tests of several control planes (a directory may
    override ``control_plane``) without starting it per test.
    """

    def __init__(self, directory: Path) -> None:
        self._directory = directory
        self._running: dict[tuple[str, str], OperatorProcess] = {}

    def get(
        self,
        script: str,
        control_plane: ControlPlane,
        rbac_file: Path,
        *arguments: str,
        environment: dict[str, str] | None = None,
    ) -> OperatorProcess:
        """The process of ``script`` for ``control_plane``, started on first use (with ``environment``
        besides this process's own)."""
        key = (script, control_plane.api_url)
        if key not in self._running:
            home = self._directory / f"{script}-{len(self._running)}"
            home.mkdir(parents=True)
            kubeconfig = service_account_kubeconfig(control_plane, rbac_file, home / "kubeconfig")
            process = OperatorProcess(
                script,
                kubeconfig,
                home / "operator.log",
                *arguments,
                environment={**os.environ, **environment} if environment else None,
            )
            process.start()
            self._running[key] = process
        return self._running[key]

    def stop_all(self) -> None:
        for process in self._running.values():
            process.stop()
        self._running.clear()
