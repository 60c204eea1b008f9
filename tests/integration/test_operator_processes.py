"""Each operator's console script starts against a kubeconfig, reports live, and stops on SIGTERM."""

from __future__ import annotations

import shutil
import signal
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from operator_core.testing.controlplane import ControlPlane, free_port


@pytest.mark.parametrize("script", ["typesense-operator", "monocle-operator", "cluster-stack-operator"])
@pytest.mark.usefixtures("installed_crds")
def test_operator_starts_reports_live_and_stops(
    control_plane: ControlPlane, script: str, tmp_path: Path
) -> None:
    executable = shutil.which(script)
    assert executable, f"console script {script} is not installed"
    port = free_port()
    log = tmp_path / f"{script}.log"
    with log.open("w") as output:
        process = subprocess.Popen(
            [
                executable,
                "--kubeconfig",
                str(control_plane.kubeconfig),
                "--liveness",
                f"http://127.0.0.1:{port}/healthz",
            ],
            stdout=output,
            stderr=subprocess.STDOUT,
        )
        try:
            deadline = time.monotonic() + 60
            live = False
            while time.monotonic() < deadline and process.poll() is None and not live:
                try:
                    live = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200
                except httpx.HTTPError:
                    time.sleep(0.3)
            assert live, f"{script} never reported live:\n{log.read_text()}"
        finally:
            process.send_signal(signal.SIGTERM)
            code = process.wait(timeout=30)
    assert code == 0, log.read_text()
    assert "Traceback" not in log.read_text()
