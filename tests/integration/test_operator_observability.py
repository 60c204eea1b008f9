"""What an operator tells its watchers, from a real process against the real API server: /metrics with the
reconciles, their duration, the API requests by verb and each cluster's quorum (gone with the cluster);
JSON logs, one object per line, naming the object they are about and never a Secret's value; and a
Grafana dashboard whose every query names a metric the operator really serves."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import re
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from operator_core.kube import Kube
from operator_testkit.controlplane import ControlPlane
from operator_testkit.fixtures import wait_until
from operator_testkit.operators import OperatorProcess, service_account_kubeconfig

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "typesense-operator"
API = "ts.opentelekomcloud.com/v1alpha1"


def _served_names(page: str) -> set[str]:
    names: set[str] = set()
    for family in text_string_to_metric_families(page):
        names.add(family.name)
        names.update(sample.name for sample in family.samples)
    return names


def _dashboard_metrics() -> set[str]:
    dashboard = json.loads((CHART / "dashboards" / "typesense-operator.json").read_text())
    expressions = [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]
    assert expressions
    # A metric is a name followed by its selector: every query here selects by job.
    return {
        name for expression in expressions for name in re.findall(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\{", expression)
    }


async def test_metrics_json_logs_and_the_dashboard_of_a_running_operator(
    control_plane: ControlPlane, installed_crds: list[str], kube: Kube, namespace: str, tmp_path: Path
) -> None:
    kubeconfig = service_account_kubeconfig(
        control_plane, CHART / "files" / "rbac-rules.yaml", tmp_path / "kubeconfig"
    )
    operator = OperatorProcess(
        "typesense-operator",
        kubeconfig,
        tmp_path / "operator.log",
        "--namespace",
        namespace,
        "--log-format",
        "json",
        "--log-level",
        "debug",
        environment=dict(os.environ),
    )
    with operator:
        await kube.apply(
            {
                "apiVersion": API,
                "kind": "TypesenseCluster",
                "metadata": {"name": "cluster-1", "namespace": namespace},
                "spec": {"image": "typesense/typesense:27.1", "storage": {"size": "100Mi"}},
            }
        )

        def probed() -> bool:
            members = operator.sample("typesense_cluster_members", namespace=namespace, cluster="cluster-1")
            return members is not None and bool(
                operator.sample("operator_reconciles_total", kind="TypesenseCluster", result="success")
            )

        await wait_until(lambda: asyncio.to_thread(probed), what="the cluster's quorum metrics", timeout=60)
        page = await asyncio.to_thread(operator.metrics)
        assert operator.sample("operator_reconciles_total", kind="TypesenseCluster", result="success")
        assert operator.sample("operator_reconcile_duration_seconds_count", kind="TypesenseCluster")
        # Reads come from watches, every write is a server-side apply (a PATCH); Events (POST) may come later.
        for verb in ("list", "watch", "patch"):
            assert operator.sample("operator_api_requests_total", verb=verb, code="2xx"), verb
        # Its pods never run here: no quorum yet, and the state says which.
        states = {
            state: operator.sample(
                "typesense_cluster_quorum_state", namespace=namespace, cluster="cluster-1", state=state
            )
            for state in ("OK", "NOT_READY")
        }
        assert states == {"OK": 0, "NOT_READY": 1}
        assert (
            operator.sample("typesense_cluster_quorum_ready", namespace=namespace, cluster="cluster-1") == 0
        )
        assert operator.sample("operator_leader") == 1
        assert operator.sample("operator_watch_caches_synced") == 1

        missing = _dashboard_metrics() - _served_names(page)
        assert not missing, f"the dashboard queries metrics the operator does not serve: {sorted(missing)}"

        secret = await kube.get_live("v1", "Secret", "cluster-1-admin-key", namespace)
        assert secret is not None
        key = base64.b64decode(secret["data"]["typesense-api-key"]).decode()

        await kube.delete(API, "TypesenseCluster", "cluster-1", namespace)

        def forgotten() -> bool:
            return (
                operator.sample("typesense_cluster_members", namespace=namespace, cluster="cluster-1") is None
            )

        await wait_until(lambda: asyncio.to_thread(forgotten), what="the cluster's series to go", timeout=30)

    log = operator.log()
    assert key not in log
    entries = [json.loads(line) for line in log.splitlines() if line.strip()]
    assert entries, "no log lines"
    assert {"time", "level", "logger", "message"} <= set(entries[0])
    about = [e for e in entries if e.get("object") == "cluster-1"]
    assert about, "no line names the cluster"
    assert all(e["namespace"] == namespace and e["kind"] == "TypesenseCluster" for e in about)
    assert not [e for e in entries if "exception" in e], "a traceback in the log"
