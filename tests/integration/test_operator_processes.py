"""Each operator's console script starts against a kubeconfig, reports live, stops cleanly on SIGTERM, and
refuses a bad setting before it connects."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from operator_testkit.controlplane import ControlPlane
from operator_testkit.operators import OperatorProcess


@pytest.mark.parametrize("script", ["typesense-operator", "monocle-operator", "cluster-stack-operator"])
@pytest.mark.usefixtures("installed_crds")
def test_operator_starts_reports_live_and_stops(
    control_plane: ControlPlane, script: str, tmp_path: Path
) -> None:
    process = OperatorProcess(script, control_plane.kubeconfig, tmp_path / f"{script}.log")
    process.start()
    code = process.stop()
    assert code == 0, process.log()
    assert "Traceback" not in process.log()


@pytest.mark.parametrize(
    ("variable", "value", "explained"),
    [
        ("OPERATOR_SUITE_PROBE_VIA", "api_proxy", "allowed values: pod-ip, api-proxy"),
        ("OPERATOR_SUITE_RESYNC_SECONDS", "a minute", "expected float"),
    ],
)
def test_a_bad_setting_stops_the_operator_at_once_before_it_connects(
    variable: str, value: str, explained: str, tmp_path: Path
) -> None:
    """The kubeconfig names a loopback port where nothing listens: the refusal must come first."""
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:9'}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\n"
    )
    started = time.monotonic()
    refused = subprocess.run(
        ["typesense-operator", "--kubeconfig", str(kubeconfig)],
        env={**os.environ, variable: value},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert refused.returncode == 2
    assert refused.stderr.strip().splitlines() == [
        f"typesense-operator: {variable}={value!r} is not a valid value: {explained}"
    ]
    assert time.monotonic() - started < 10
