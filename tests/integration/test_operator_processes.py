"""Each operator's console script starts against a kubeconfig, reports live, and stops cleanly on SIGTERM."""

from __future__ import annotations

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
