"""A real Prometheus (the pinned build, on 127.0.0.1) scrapes a running Typesense operator under the job
name its chart's ServiceMonitor gives it and evaluates the chart's own alert rules, rendered by helm with
short `for` values: the target is up, the operator's metrics are queryable, OperatorDown and
OperatorNotReady stay inactive while it runs, a cluster whose pods can never run raises
TypesenseQuorumLost and TypesenseQuorumDegraded (with the number of members that do not answer), and
stopping the operator raises OperatorDown."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from operator_core.kube import Kube
from operator_testkit.charts import chart_alert_rules
from operator_testkit.controlplane import ControlPlane, free_port
from operator_testkit.fixtures import wait_until
from operator_testkit.operators import OperatorProcess, service_account_kubeconfig
from operator_testkit.prometheus_tools import ensure_prometheus_tools
from operator_testkit.servers import spawn

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "typesense-operator"
JOB = "suite-typesense-operator-metrics"  # what the chart's ServiceMonitor calls `helm install suite`'s
API = "ts.opentelekomcloud.com/v1alpha1"
SHORT_FOR = ["--set", "prometheusRule.for=5s", "--set", "prometheusRule.reconcileErrorsFor=5s",
             "--set", "quorumAlertFor=5s"]  # fmt: skip


@dataclass(frozen=True)
class RunningPrometheus:
    url: str
    log: Path


def _log_tail(log: Path) -> str:
    return "".join(log.read_text(errors="replace").splitlines(keepends=True)[-30:]) if log.exists() else ""


def _stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then SIGKILL if it has not exited within 10 s (Prometheus starts no children)."""
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@contextlib.contextmanager
def running_prometheus(directory: Path, rules: dict[str, Any], target: str) -> Iterator[RunningPrometheus]:
    """Prometheus on a free 127.0.0.1 port, scraping ``target`` every second as ``JOB`` and evaluating
    ``rules`` every second; killed, and its data directory removed, when the block ends."""
    binary = ensure_prometheus_tools().prometheus
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "rules.yaml").write_text(yaml.safe_dump(rules, sort_keys=False))
    config = {
        "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
        "rule_files": ["rules.yaml"],
        "scrape_configs": [{"job_name": JOB, "static_configs": [{"targets": [target]}]}],
    }
    (directory / "prometheus.yml").write_text(yaml.safe_dump(config, sort_keys=False))
    data, log = directory / "data", directory / "prometheus.log"
    address = f"127.0.0.1:{free_port()}"
    argv = [
        str(binary), f"--config.file={directory / 'prometheus.yml'}",
        f"--storage.tsdb.path={data}", f"--web.listen-address={address}",
    ]  # fmt: skip
    process = spawn(argv, log, bound=True, truncate=True, cwd=directory)
    try:
        prometheus = RunningPrometheus(f"http://{address}", log)
        deadline = time.monotonic() + 30
        while not _ready(prometheus):
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"Prometheus did not become ready (exit {process.poll()}):\n{_log_tail(log)}")
            time.sleep(0.1)
        yield prometheus
    finally:
        _stop(process)
        shutil.rmtree(data, ignore_errors=True)


def _ready(prometheus: RunningPrometheus) -> bool:
    try:
        return httpx.get(f"{prometheus.url}/-/ready", timeout=2, trust_env=False).status_code == 200
    except httpx.HTTPError:
        return False


class PrometheusAPI:
    """The few calls of Prometheus's HTTP API (/api/v1/...) this test makes."""

    def __init__(self, client: httpx.AsyncClient) -> None:
        self._client = client

    async def _data(self, path: str, **params: str) -> Any:
        answer = await self._client.get(f"/api/v1/{path}", params=params)
        answer.raise_for_status()
        body = answer.json()
        assert body["status"] == "success", body
        return body["data"]

    async def target_health(self) -> str | None:
        targets = (await self._data("targets", state="active"))["activeTargets"]
        healths = [t["health"] for t in targets if t["labels"]["job"] == JOB]
        return healths[0] if healths else None

    async def query(self, expression: str) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = (await self._data("query", query=expression))["result"]
        return result

    async def rule_states(self) -> dict[str, str]:
        groups = (await self._data("rules", type="alert"))["groups"]
        return {rule["name"]: rule["state"] for group in groups for rule in group["rules"]}

    async def firing(self, alertname: str) -> list[dict[str, Any]]:
        alerts = (await self._data("alerts"))["alerts"]
        return [a for a in alerts if a["labels"]["alertname"] == alertname and a["state"] == "firing"]

    async def wait_firing(self, alertname: str, timeout: float) -> dict[str, Any]:
        """The one alert ``alertname`` once it fires."""
        firing = await wait_until(
            lambda: self.firing(alertname), timeout=timeout, interval=0.5, what=alertname
        )
        assert isinstance(firing, list)
        (alert,) = firing
        assert isinstance(alert, dict)
        return alert


async def test_a_real_prometheus_scrapes_the_operator_and_its_alerts_fire(
    control_plane: ControlPlane, installed_crds: list[str], kube: Kube, namespace: str, tmp_path: Path
) -> None:
    rules = chart_alert_rules(tmp_path / "helm", CHART.name, *SHORT_FOR)
    kubeconfig = service_account_kubeconfig(
        control_plane, CHART / "files" / "rbac-rules.yaml", tmp_path / "kubeconfig"
    )
    operator = OperatorProcess(
        "typesense-operator", kubeconfig, tmp_path / "operator.log", "--namespace", namespace,
        environment=dict(os.environ),
    )  # fmt: skip
    with (
        operator,
        running_prometheus(tmp_path / "prometheus", rules, f"127.0.0.1:{operator.probes_port}") as prometheus,
    ):
        # Its pods select a node label no node has: they stay Pending, with or without nodes.
        await kube.apply(
            {
                "apiVersion": API,
                "kind": "TypesenseCluster",
                "metadata": {"name": "cluster-1", "namespace": namespace},
                "spec": {
                    "image": "typesense/typesense:27.1",
                    "storage": {"size": "100Mi"},
                    "nodeSelector": {"operator-suite.test/no-node-has-this": "true"},
                },
            }
        )
        async with httpx.AsyncClient(base_url=prometheus.url, timeout=5, trust_env=False) as client:
            api = PrometheusAPI(client)

            async def target_up() -> bool:
                return await api.target_health() == "up"

            await wait_until(target_up, timeout=30, interval=0.5, what="the operator's target up")
            for expression in ("operator_leader", "operator_watch_caches_synced"):
                (sample,) = await api.query(f'{expression}{{job="{JOB}"}}')
                assert sample["value"][1] == "1", (expression, sample)
            assert await api.query(f'operator_api_requests_total{{job="{JOB}", verb="watch", code="2xx"}}')

            # Before the first scrape, OperatorDown may have been pending: it must settle, and stay.
            async def operator_rules_inactive() -> bool:
                states = await api.rule_states()
                return states["OperatorDown"] == states["OperatorNotReady"] == "inactive"

            await wait_until(operator_rules_inactive, timeout=15, interval=0.5, what="OperatorDown inactive")

            alert = await api.wait_firing("TypesenseQuorumLost", timeout=60)
            assert alert["labels"] == {
                "alertname": "TypesenseQuorumLost", "severity": "critical",
                "job": JOB, "instance": f"127.0.0.1:{operator.probes_port}",
                "namespace": namespace, "cluster": "cluster-1",
            }  # fmt: skip
            summary = alert["annotations"]["summary"]
            assert summary.startswith(f"TypesenseCluster {namespace}/cluster-1 has had no quorum"), summary
            # Three members, none of them healthy: the summary counts the ones that do not answer.
            alert = await api.wait_firing("TypesenseQuorumDegraded", timeout=15)
            assert alert["annotations"]["summary"] == (
                f"TypesenseCluster {namespace}/cluster-1 has 3 member(s) that do not answer healthy."
            )
            states = await api.rule_states()
            assert states["OperatorDown"] == states["OperatorNotReady"] == "inactive", states

            operator.stop()
            alert = await api.wait_firing("OperatorDown", timeout=30)
            assert alert["labels"] == {
                "alertname": "OperatorDown", "severity": "critical", "operator": "typesense-operator"
            }  # fmt: skip
            assert await api.target_health() == "down"
            # Its series went stale with the target: the quorum alert went with them.
            assert not await api.firing("TypesenseQuorumLost")
            assert (await api.rule_states())["OperatorNotReady"] == "inactive"
