"""``operator-suite-dev sandbox journey`` as a user runs it: the Cluster Stack operator's whole journey,
installed by helm on a management cluster of a real node, with a workload cluster beside it, told
step by step, and nothing left running when it ends or is interrupted."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

STEPS = (
    "1. a ClusterStack lists v1, v2 and v3",
    "2. a Cluster on docker-journey-1-30-v1",
    "3. deleting ClusterStackRelease docker-journey-1-30-v1 while the Cluster uses it",
    "refused: ",
    "4. ConfigMap kube-system/addon-info deleted in the workload cluster by hand",
    "5. the Cluster moves to docker-journey-1-30-v2",
    "addon-info untouched in the workload cluster",
    "6. the Cluster moves to docker-journey-1-30-v3",
    "only-in-v1 removed",
    "7. the Cluster is deleted",
    "How long each step took:",
)


def journey(directory: Path) -> subprocess.Popen[str]:
    command = Path(sys.executable).parent / "operator-suite-dev"
    return subprocess.Popen(
        [str(command), "sandbox", "journey", "--dir", str(directory)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "OCI_"))},
    )


def processes_naming(directory: Path) -> list[str]:
    """Command lines of the processes that name ``directory`` (control planes, the operator)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                line = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if str(directory) in line and "pytest" not in line:
                found.append(line)
    return found


@pytest.fixture
def short_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The journey's directory: short, since its node's sockets live under it."""
    return tmp_path_factory.mktemp("j")


def test_the_journey_tells_every_step_and_leaves_nothing_running(short_path: Path) -> None:
    tmp_path = short_path
    process = journey(tmp_path)
    output, _ = process.communicate(timeout=900)
    assert process.returncode == 0, output
    positions = [output.find(step) for step in STEPS]
    assert all(p >= 0 for p in positions), [s for s, p in zip(STEPS, positions, strict=True) if p < 0]
    assert positions == sorted(positions), output
    assert "WRITTEN AGAIN" not in output
    assert "STILL THERE" not in output
    assert processes_naming(tmp_path) == []


def test_ctrl_c_in_the_middle_stops_everything_it_started(short_path: Path) -> None:
    tmp_path = short_path
    process = journey(tmp_path)
    assert process.stdout is not None
    lines = []
    for line in process.stdout:
        lines.append(line)
        if "1. a ClusterStack" in line:
            break
    else:
        raise AssertionError("".join(lines))
    process.send_signal(signal.SIGINT)
    rest, _ = process.communicate(timeout=60)
    assert process.returncode == 130, "".join(lines) + rest
    assert "everything the journey started is stopped" in rest
    deadline = time.monotonic() + 10
    while processes_naming(tmp_path) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert processes_naming(tmp_path) == []
