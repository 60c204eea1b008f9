"""Each operator's console script starts against a kubeconfig, reports live, stops cleanly on SIGTERM, and
refuses a bad setting before it connects; what it cannot start without (a kubeconfig it can read, a
token the API server takes, an API server that answers, its CRD) ends it with code 1 and one line."""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from operator_core.starting import START_SECONDS
from operator_testkit.controlplane import ControlPlane
from operator_testkit.fixtures import crd_documents, install_crds, wait_until
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


def dead_port_kubeconfig(directory: Path) -> Path:
    """A kubeconfig naming a loopback port where nothing listens."""
    kubeconfig = directory / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:9'}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\n"
    )
    return kubeconfig


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
    kubeconfig = dead_port_kubeconfig(tmp_path)
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
    # Before the API server's patience runs out: the process never waited for the dead port. Alone it
    # takes about a second (Python's start); beside three workers' real nodes, 10 s has been seen.
    assert time.monotonic() - started < START_SECONDS


def run_briefly(
    script: str, kubeconfig: Path, *arguments: str, timeout: float = 40
) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "OCI_", "OPERATOR_SUITE_"))}
    environment = {**clean, "OPERATOR_SUITE_RELEASE_SOURCE": "local"}
    return subprocess.run(
        [script, "--kubeconfig", str(kubeconfig), "--health-address=", *arguments],
        env=environment,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def kubeconfig_with(path: Path, source: Path, **user: str) -> Path:
    """The control plane's kubeconfig with another user (a token it never issued)."""
    config = yaml.safe_load(source.read_text())
    for entry in config["users"]:
        entry["user"] = user
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.mark.parametrize("script", ["typesense-operator", "monocle-operator", "cluster-stack-operator"])
def test_a_kubeconfig_that_cannot_be_read_ends_the_start_with_one_line(script: str, tmp_path: Path) -> None:
    ended = run_briefly(script, tmp_path / "absent" / "kubeconfig")
    assert ended.returncode == 1
    (line,) = ended.stderr.strip().splitlines()
    assert line.startswith(f"{script}: cannot start: no usable kubeconfig or in-cluster configuration: ")


def test_a_token_the_api_server_refuses_ends_the_start_with_one_line(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    bogus = "not-a-token-it-issued"
    refused = kubeconfig_with(tmp_path / "kubeconfig", control_plane.kubeconfig, token=bogus)
    started = time.monotonic()
    ended = run_briefly("typesense-operator", refused)
    assert ended.returncode == 1
    assert ended.stderr.strip().splitlines() == [
        f"typesense-operator: cannot start: the API server at {control_plane.api_url} refused our "
        "credentials (401 Unauthorized): the token or client certificate is not valid there"
    ]
    assert time.monotonic() - started < 10
    assert bogus not in ended.stderr + ended.stdout


def test_an_operator_whose_crd_is_not_installed_ends_the_start_naming_it(
    start_test_control_plane: Any, tmp_path: Path
) -> None:
    bare: ControlPlane = start_test_control_plane("no-crds")
    ended = run_briefly("monocle-operator", bare.kubeconfig)
    assert ended.returncode == 1
    (line,) = ended.stderr.strip().splitlines()
    assert line == (
        "monocle-operator: cannot start: Monocle (monocle.monocle.change-metrics.io/v1alpha1) is not served "
        f"at {bare.api_url}: install its CRD monocles.monocle.monocle.change-metrics.io first "
        "(its chart does, as does kubectl apply -f deploy/crds/)"
    )


@pytest.mark.parametrize("election", [[], ["--leader-elect"]], ids=["alone", "electing"])
def test_sigterm_while_the_start_waits_for_the_api_server_ends_it_at_once(
    election: list[str], tmp_path: Path
) -> None:
    """A pod deleted while its operator waits for an API server that does not answer stops at once (its
    grace is not spent on a wait that would end in an error anyway)."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "OCI_", "OPERATOR_SUITE_"))}
    command = ["typesense-operator", "--kubeconfig", str(dead_port_kubeconfig(tmp_path)), "--health-address="]
    with subprocess.Popen([*command, *election], env=clean, stderr=subprocess.PIPE, text=True) as process:
        try:
            assert process.stderr is not None
            line = process.stderr.readline()  # said once, as soon as it waits
            assert "waiting for the API server" in line, line
            sent = time.monotonic()
            process.terminate()
            code = process.wait(timeout=10)
            took = time.monotonic() - sent
        finally:
            process.kill()
    assert code == 0, "a stop asked for, not a failure"
    assert took < 3, f"{took:.1f} s"


# With --leader-elect (the charts' default) the check comes before the replica waits for its Lease.
@pytest.mark.parametrize("election", [[], ["--leader-elect"]], ids=["alone", "electing"])
def test_an_api_server_that_does_not_answer_ends_the_start_within_20_s_naming_it(
    election: list[str], tmp_path: Path
) -> None:
    kubeconfig = dead_port_kubeconfig(tmp_path)
    started = time.monotonic()
    ended = run_briefly("typesense-operator", kubeconfig, *election)
    took = time.monotonic() - started
    assert ended.returncode == 1
    assert 15 < took < 25, f"{took:.1f} s"
    lines = ended.stderr.strip().splitlines()
    assert lines[-1].startswith(
        "typesense-operator: cannot start: the API server at https://127.0.0.1:9 did not answer within 20 s: "
    )
    assert "Connect call failed" in lines[-1] or "refused" in lines[-1], lines[-1]
    waiting = [line for line in lines if "waiting for the API server" in line]
    assert len(waiting) == 1, "the outage is said once, not once a second"


def test_an_api_server_outage_after_the_start_is_waited_for_and_said_once(
    start_test_control_plane: Callable[..., ControlPlane], tmp_path: Path, pytestconfig: pytest.Config
) -> None:
    """The API server goes away for a few seconds (its own plane: the others' operators are not
    disturbed): the operator waits, says so once when it begins and once when it ends (not once per
    request or watch retried meanwhile), and its watch caches are synced again."""
    plane = start_test_control_plane("outage")
    asyncio.run(install_crds(plane, crd_documents(pytestconfig.rootpath / "deploy" / "crds")))
    process = OperatorProcess("typesense-operator", plane.kubeconfig, tmp_path / "operator.log")
    process.start()
    try:

        def caches_synced() -> bool:
            caches = process.health()["caches"]
            return bool(caches) and all(cache["synced"] for cache in caches.values())

        # After the start: an outage during it is waited for as a start's (operator_core.starting).
        asyncio.run(wait_until(caches_synced, timeout=60, what="the operator started"))
        plane.restart_apiserver(down_seconds=6)

        def caches_synced_again() -> bool:
            caches = process.health()["caches"]
            return "answers again" in process.log() and all(cache["synced"] for cache in caches.values())

        asyncio.run(
            wait_until(caches_synced_again, timeout=60, what="the operator to be back after the outage")
        )
        log = process.log()
        began = [line for line in log.splitlines() if "does not answer" in line]
        ended = [line for line in log.splitlines() if "answers again" in line]
        assert len(began) == 1, began
        assert f"the API server at {plane.api_url} does not answer" in began[0]
        assert len(ended) == 1, ended
        during = log[log.index(began[0]) : log.index(ended[0])]
        assert during.count("\n") == 1, f"nothing else is said while it waits:\n{during}"
        assert "Traceback" not in log
    finally:
        assert process.stop() == 0, process.log()
