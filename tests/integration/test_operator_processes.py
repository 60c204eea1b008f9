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
    # The Cluster Stack operator needs a release source; a local directory is one that needs nothing else.
    environment = (
        {
            **os.environ,
            "OPERATOR_SUITE_RELEASE_SOURCE": "local",
            "OPERATOR_SUITE_LOCAL_RELEASES": str(tmp_path / "releases"),
            "OPERATOR_SUITE_RELEASE_DIR": str(tmp_path / "downloads"),
        }
        if script == "cluster-stack-operator"
        else None
    )
    process = OperatorProcess(
        script, control_plane.kubeconfig, tmp_path / f"{script}.log", environment=environment
    )
    process.start()
    code = process.stop()
    assert code == 0, process.log()
    assert "Traceback" not in process.log()


@pytest.mark.parametrize(
    ("script", "variables", "explained"),
    [
        (
            "typesense-operator",
            {"OPERATOR_SUITE_PROBE_VIA": "api_proxy"},
            "OPERATOR_SUITE_PROBE_VIA='api_proxy' is not a valid value: allowed values: pod-ip, api-proxy",
        ),
        (
            "typesense-operator",
            {"OPERATOR_SUITE_RESYNC_SECONDS": "a minute"},
            "OPERATOR_SUITE_RESYNC_SECONDS='a minute' is not a valid value: expected float",
        ),
        (
            "cluster-stack-operator",
            {"GIT_PROVIDER": "github", "GIT_REPOSITORY_NAME": "cluster-stacks"},
            "OPERATOR_SUITE_GITHUB_ORGANISATION (or GIT_ORG_NAME) is not set: "
            "the GitHub source needs the organisation of the release repository",
        ),
    ],
)
def test_a_bad_setting_stops_the_operator_at_once_before_it_connects(
    script: str, variables: dict[str, str], explained: str, tmp_path: Path
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
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "OCI_", "OPERATOR_SUITE_"))}
    refused = subprocess.run(
        [script, "--kubeconfig", str(kubeconfig)],
        env={**clean, **variables},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert refused.returncode == 2
    assert refused.stderr.strip().splitlines() == [f"{script}: {explained}"]
    assert time.monotonic() - started < 10
