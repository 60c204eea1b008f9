"""The charts' alert rules, as the real promtool sees them: every chart's PrometheusRule, rendered by the
real helm with the chart's defaults, passes `promtool check rules`, and `promtool test rules` runs the
unit tests of tests/alerts/ over it; every alert of every chart has a case where it fires (its labels
and annotations checked) and one where it does not. And the pinned build itself: the release it says
it is, outside the work tree, and a failed build that says where its log is.

tests/alerts/operator.yaml tests the alerts every chart has (charts/operator-library), with ${chart}
and ${kind} filled in per chart; tests/alerts/<chart>.yaml tests a chart's own (files/alerts.yaml).
They live with the tests, not in the charts: whatever is in a chart's directory ships in its package.
"""

from __future__ import annotations

import os
import shutil
import string
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from operator_testkit.charts import chart_alert_rules
from operator_testkit.errors import ControlPlaneError
from operator_testkit.prometheus_tools import PrometheusTools, ensure_prometheus_tools
from operator_testkit.settings import ControlPlaneSettings

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
ALERT_TESTS = ROOT / "tests" / "alerts"
KINDS = {
    "typesense-operator": "TypesenseCluster",
    "monocle-operator": "Monocle",
    "cluster-stack-operator": "ClusterStack",
}


@pytest.fixture(scope="module")
def tools() -> PrometheusTools:
    return ensure_prometheus_tools()


@pytest.fixture(scope="module")
def promtool(tools: PrometheusTools) -> Path:
    return tools.promtool


@pytest.fixture(scope="module")
def rules_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Each chart's rendered rules (``<chart>.rules.yaml``) beside the unit tests that read them."""
    directory = tmp_path_factory.mktemp("alert-rules")
    helm_home = tmp_path_factory.mktemp("helm")
    for chart in KINDS:
        rules = chart_alert_rules(helm_home, chart)
        (directory / f"{chart}.rules.yaml").write_text(yaml.safe_dump(rules, sort_keys=False))
    return directory


def _test_files(chart: str) -> list[Path]:
    """The unit-test files that apply to ``chart``: the shared ones, then the chart's own, if any."""
    return [path for path in (ALERT_TESTS / "operator.yaml", ALERT_TESTS / f"{chart}.yaml") if path.exists()]


def _filled_in(path: Path, chart: str) -> str:
    return string.Template(path.read_text()).substitute(chart=chart, kind=KINDS[chart])


def _promtool(promtool: Path, *arguments: str, cwd: Path) -> str:
    done = subprocess.run(
        [str(promtool), *arguments], cwd=cwd, capture_output=True, text=True, timeout=120, check=False
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, f"promtool {' '.join(arguments)} failed:\n{output}"
    return output


def _alerts(rules: dict[str, Any]) -> set[str]:
    return {rule["alert"] for group in rules["groups"] for rule in group["rules"] if "alert" in rule}


def test_prometheus_and_promtool_are_the_pinned_release_built_outside_the_work_tree(
    tools: PrometheusTools,
) -> None:
    assert tools.version == "v0.316.0"
    for binary in (tools.prometheus, tools.promtool):
        assert not binary.resolve().is_relative_to(ROOT), binary
        assert os.access(binary, os.X_OK), binary
        done = subprocess.run(
            [str(binary), "--version"], capture_output=True, text=True, timeout=30, check=True
        )
        assert f"{binary.name}, version 3.16.0 " in done.stdout + done.stderr


def test_a_failed_build_names_the_command_and_its_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hack = tmp_path / "hack"
    (hack / "prometheus").mkdir(parents=True)
    shutil.copyfile(ROOT / "hack" / "prometheus" / "go.mod", hack / "prometheus" / "go.mod")
    (hack / "prometheus" / "go.sum").write_text("")  # go refuses a module it cannot check
    monkeypatch.setenv("OPERATOR_SUITE_HACK_DIR", str(hack))
    with pytest.raises(ControlPlaneError) as failure:
        ensure_prometheus_tools(ControlPlaneSettings(cache_dir=tmp_path / "cache"))
    message = str(failure.value)
    assert message.startswith(f"go build failed in {hack / 'prometheus'} ")
    (log,) = (tmp_path / "cache").glob("prometheus-v0.316.0-*/build.log")
    assert f"whole log: {log}" in message
    assert "missing go.sum entry" in message
    assert not list((tmp_path / "cache").glob("*/bin/prometheus"))


def test_every_alert_file_is_a_test_of_a_chart() -> None:
    charts = {path.name for path in (ROOT / "charts").iterdir() if (path / "values.yaml").exists()}
    assert set(KINDS) == charts
    assert {path.stem for path in ALERT_TESTS.glob("*.yaml")} <= {"operator", *charts}


@pytest.mark.parametrize("chart", sorted(KINDS))
def test_the_rules_pass_promtool_check_with_the_expected_alerts(
    chart: str, promtool: Path, rules_dir: Path
) -> None:
    rules_file = rules_dir / f"{chart}.rules.yaml"
    alerts = _alerts(yaml.safe_load(rules_file.read_text()))
    expected = {"OperatorDown", "OperatorNotReady", "OperatorReconcileErrors"}
    if chart == "typesense-operator":
        expected |= {
            "TypesenseQuorumLost",
            "TypesenseQuorumDegraded",
            "TypesenseRecoveryNeedsIntervention",
            "TypesenseCertificateExpiresSoon",
        }
    assert alerts == expected
    output = _promtool(
        promtool, "check", "rules", "--lint=all", "--lint-fatal", rules_file.name, cwd=rules_dir
    )
    assert f"SUCCESS: {len(alerts)} rules found" in output


@pytest.mark.parametrize("chart", sorted(KINDS))
def test_every_alert_fires_when_it_should_and_stays_quiet_otherwise(
    chart: str, promtool: Path, rules_dir: Path
) -> None:
    files = []
    firing: set[str] = set()
    quiet: set[str] = set()
    for path in _test_files(chart):
        text = _filled_in(path, chart)
        for case in yaml.safe_load(text)["tests"]:
            for check in case["alert_rule_test"]:
                (firing if check.get("exp_alerts") else quiet).add(check["alertname"])
        filled = rules_dir / f"{chart}-{path.name}"
        filled.write_text(text)
        files.append(filled.name)
    output = _promtool(promtool, "test", "rules", *files, cwd=rules_dir)
    assert "SUCCESS" in output
    # promtool passes a check of an alert the rules lack (nothing fires): every name must be real,
    # and every real alert must have both kinds of case.
    alerts = _alerts(yaml.safe_load((rules_dir / f"{chart}.rules.yaml").read_text()))
    assert firing | quiet <= alerts, (
        f"tests of alerts that {chart} does not have: {sorted((firing | quiet) - alerts)}"
    )
    assert alerts <= firing, f"alerts of {chart} never seen firing: {sorted(alerts - firing)}"
    assert alerts <= quiet, f"alerts of {chart} never seen quiet: {sorted(alerts - quiet)}"
