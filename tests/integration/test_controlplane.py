"""The control plane reports the real version, runs side by side with others, and stops without leftovers."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from operator_core.kube import Kube
from operator_testkit.controlplane import ControlPlane, ControlPlaneState, running_components
from operator_testkit.fixtures import Kubectl


def test_version_is_the_pinned_release(kubectl: Kubectl, control_plane: ControlPlane) -> None:
    out = kubectl("version", "-o", "yaml").stdout
    expected = control_plane.settings.kubernetes_version
    assert f"gitVersion: {expected}" in out.split("serverVersion:")[1]


def test_services_get_loopback_cluster_ips(kubectl: Kubectl) -> None:
    cluster_ip = kubectl(
        "get", "service", "kubernetes", "-n", "default", "-o", "jsonpath={.spec.clusterIP}"
    ).stdout
    assert cluster_ip.startswith("127."), cluster_ip


async def test_a_second_control_plane_runs_alongside_and_is_independent(
    control_plane: ControlPlane, start_test_control_plane: Callable[..., ControlPlane]
) -> None:
    workload = start_test_control_plane("workload", service_cidr="127.101.0.0/16")
    assert workload.api_url != control_plane.api_url
    async with Kube.connect(control_plane.kubeconfig) as first, Kube.connect(workload.kubeconfig) as second:
        await first.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "only-in-first"}})
        assert await second.get("v1", "Namespace", "only-in-first") is None
        await first.delete("v1", "Namespace", "only-in-first")


def test_cli_up_and_down_leave_no_process(tmp_path: Path, control_plane: ControlPlane) -> None:
    directory = tmp_path / "cli"
    command = [sys.executable, "-m", "operator_testkit.cli", "controlplane"]
    up = subprocess.run(
        [*command, "up", "--dir", str(directory)], capture_output=True, text=True, timeout=180
    )
    assert up.returncode == 0, up.stderr
    assert "kubectl get --raw /readyz" in up.stdout
    state = ControlPlaneState.load(directory)
    try:
        assert [c.name for c in running_components(state)] == [
            "etcd",
            "kube-apiserver",
            "kube-controller-manager",
            "kube-scheduler",
        ]
        readyz = subprocess.run(
            [
                str(control_plane.binaries.kubectl),
                f"--kubeconfig={directory / 'kubeconfig'}",
                "get",
                "--raw",
                "/readyz",
            ],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert readyz.stdout.strip() == "ok"
        again = subprocess.run(
            [*command, "up", "--dir", str(directory)], capture_output=True, text=True, timeout=60
        )
        assert again.returncode == 1
        assert "already running" in again.stdout
    finally:
        down = subprocess.run(
            [*command, "down", "--dir", str(directory)], capture_output=True, text=True, timeout=60
        )
    assert down.returncode == 0, down.stderr
    assert running_components(state) == []
    assert all(not Path(f"/proc/{c.pid}").exists() or _is_zombie(c.pid) for c in state.components)


def _is_zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[1].split()[0] == "Z"
    except OSError:
        return True


def test_components_die_with_a_killed_parent(tmp_path: Path) -> None:
    """A test run that is killed outright must not leave a control plane behind."""
    script = (
        "import sys, pathlib\n"
        "from operator_testkit.controlplane import ControlPlane\n"
        f"plane = ControlPlane(pathlib.Path({str(tmp_path / 'orphan')!r}))\n"
        "plane.start()\n"
        "print('started', flush=True)\n"
        "sys.stdin.read()\n"
    )
    with subprocess.Popen(
        [sys.executable, "-c", script],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=os.environ.copy(),
    ) as parent:
        assert parent.stdout is not None
        assert parent.stdout.readline().strip() == "started"
        state = ControlPlaneState.load(tmp_path / "orphan")
        assert len(running_components(state)) == 4
        parent.kill()
    deadline = time.monotonic() + 15
    while running_components(state) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert running_components(state) == []
    try:
        httpx.get(f"{state.api_url}/readyz", verify=False, timeout=1)  # noqa: S501
        reachable = True
    except httpx.HTTPError:
        reachable = False
    assert not reachable
