"""The suite's Helm charts (``charts/``) driven by the real helm, for tests and benchmarks.

:func:`run_helm` runs the pinned helm (:mod:`.clusterstack_tools`) with its cache, configuration
and data under a directory of the caller's, never the user's; :func:`render_chart` is
``helm template`` parsed into documents, and :func:`chart_alert_rules` a chart's alert rules as
Prometheus and promtool read them; :func:`install_chart` and :func:`uninstall_chart` install into
and remove from a control plane, failing with helm's own words. :func:`chart_repository` serves
charts as a classic chart repository (``index.yaml`` and the packages) on loopback, for a chart whose
dependencies are fetched when it is rendered; :func:`push_chart` puts one in an OCI registry as a
chart's publisher does (``helm package``, ``helm push``).
"""

from __future__ import annotations

import subprocess
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from aiohttp import web

from operator_testkit.clusterstack_tools import ensure_clusterstack_tools, helm_environment
from operator_testkit.controlplane import free_port
from operator_testkit.registry import RunningRegistry

__all__ = [
    "CHARTS_DIR",
    "ChartRepository",
    "HelmFailed",
    "chart_alert_rules",
    "chart_repository",
    "install_chart",
    "push_chart",
    "render_chart",
    "run_helm",
    "uninstall_chart",
]

CHARTS_DIR = Path(__file__).resolve().parents[3] / "charts"
"""The charts of this checkout (the test kit is installed editable from it)."""


class HelmFailed(RuntimeError):
    """helm exited non-zero; the message holds its command and its standard error."""


def run_helm(
    home: Path, *arguments: str, kubeconfig: Path | None = None, timeout: float = 180
) -> subprocess.CompletedProcess[str]:
    """helm ``arguments`` as is (the caller checks the exit code); against ``kubeconfig`` when given."""
    env = helm_environment(home)
    if kubeconfig is not None:
        env["KUBECONFIG"] = str(kubeconfig)
    return subprocess.run(
        [str(ensure_clusterstack_tools().helm), *arguments],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env=env,
    )


def _checked(home: Path, *arguments: str, kubeconfig: Path | None = None, timeout: float = 180) -> str:
    done = run_helm(home, *arguments, kubeconfig=kubeconfig, timeout=timeout)
    if done.returncode != 0:
        raise HelmFailed(
            f"helm {' '.join(arguments[:3])} ... failed (exit {done.returncode}):\n{done.stderr}"
        )
    return done.stdout


def render_chart(
    home: Path, chart: str, *values: str, release: str = "suite", namespace: str = "operators"
) -> list[dict[str, Any]]:
    """``helm template`` of ``charts/<chart>``, as documents."""
    text = _checked(home, "template", release, str(CHARTS_DIR / chart), "-n", namespace, *values)
    return [document for document in yaml.safe_load_all(text) if document]


def chart_alert_rules(
    home: Path, chart: str, *values: str, release: str = "suite", namespace: str = "operators"
) -> dict[str, Any]:
    """The alert rules of ``charts/<chart>`` as a Prometheus rules file: the ``spec`` (``groups``) of
    the PrometheusRule it renders with ``prometheusRule.enabled=true`` and ``values``."""
    documents = render_chart(
        home, chart, "--set", "prometheusRule.enabled=true", *values, release=release, namespace=namespace
    )
    rules = [document for document in documents if document.get("kind") == "PrometheusRule"]
    if len(rules) != 1:
        raise HelmFailed(f"charts/{chart} rendered {len(rules)} PrometheusRules, not one")
    spec: dict[str, Any] = rules[0]["spec"]
    return spec


def install_chart(
    home: Path,
    kubeconfig: Path,
    release: str,
    chart: str,
    namespace: str,
    values: Sequence[str] = (),
    *,
    timeout: float = 180,
) -> str:
    """``helm install --wait``: returns once the operator's Deployment is ready, else raises with why."""
    return _checked(
        home,
        "install", release, str(CHARTS_DIR / chart), "-n", namespace, "--create-namespace",
        "--wait", f"--timeout={int(timeout)}s", *values,
        kubeconfig=kubeconfig,
        timeout=timeout + 30,
    )  # fmt: skip


def uninstall_chart(
    home: Path, kubeconfig: Path, release: str, namespace: str, *, timeout: float = 120
) -> str:
    """``helm uninstall --wait``: the release's objects are gone (its CRDs stay, as helm keeps them)."""
    return _checked(
        home,
        "uninstall", release, "-n", namespace, "--wait", f"--timeout={int(timeout)}s",
        kubeconfig=kubeconfig,
        timeout=timeout + 30,
    )  # fmt: skip


@dataclass(frozen=True)
class ChartRepository:
    url: str
    """``http://127.0.0.1:PORT``: what a dependency's ``repository`` names."""
    requests: list[str]
    """The paths asked for, in order."""


@asynccontextmanager
async def chart_repository(home: Path, charts: Sequence[Path]) -> AsyncIterator[ChartRepository]:
    """The chart folders ``charts``, packaged by helm and indexed (``helm repo index``), served over
    HTTP on a free loopback port for as long as the context lasts."""
    served = home / "repository"
    served.mkdir(parents=True)
    for chart in charts:
        _checked(home, "package", str(chart), "--destination", str(served))
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    _checked(home, "repo", "index", str(served), "--url", url)
    requests: list[str] = []

    @web.middleware
    async def record(request: web.Request, handler: Any) -> web.StreamResponse:
        requests.append(request.path)
        answer: web.StreamResponse = await handler(request)
        return answer

    app = web.Application(middlewares=[record])
    app.router.add_static("/", served)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        yield ChartRepository(url, requests)
    finally:
        await runner.cleanup()


def push_chart(
    home: Path,
    chart: Path,
    registry: RunningRegistry,
    repository: str,
    *,
    username: str | None = None,
    password: str | None = None,
) -> str:
    """The chart folder ``chart`` packaged and pushed to ``oci://<registry>/<repository>`` by helm (over
    the registry's TLS with its CA, or plain HTTP; with these credentials); its ``oci://`` URL, as a
    Chart.yaml's dependency names it."""
    packaged = home / "packaged"
    packaged.mkdir(parents=True, exist_ok=True)
    _checked(home, "package", str(chart), "--destination", str(packaged))
    (archive,) = sorted(packaged.glob(f"{chart.name}-*.tgz"))
    url = f"oci://{registry.host}/{repository}"
    access = ["--plain-http"] if registry.plain_http else []
    if registry.ca_cert is not None:
        access += ["--ca-file", str(registry.ca_cert)]
    if username is not None and password is not None:
        access += ["--username", username, "--password", password]
    _checked(home, "push", str(archive), url, *access)
    return url
