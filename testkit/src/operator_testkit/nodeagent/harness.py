"""Start and stop a node agent as a subprocess, and find the processes it left (for fixtures and tools).

The agent runs as ``python -m operator_testkit.nodeagent`` in its own process
group, bound to its parent with ``PR_SET_PDEATHSIG``; its container processes are
bound to the agent the same way, so even a killed parent leaves nothing running.
:func:`processes_under` finds processes by working directory: every container
process of an agent runs inside the agent's state directory.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from operator_testkit.controlplane import ControlPlane
from operator_testkit.nodeagent.processes import die_with_parent

__all__ = ["AgentProcess", "mounts_under", "processes_under", "start_agent"]

_START_TIMEOUT = 60.0
_STOP_TIMEOUT = 30.0


@dataclass
class AgentProcess:
    """A running agent: its process, state directory and node names."""

    process: subprocess.Popen[bytes]
    state_dir: Path
    nodes: list[str]

    @property
    def log(self) -> Path:
        return self.state_dir / "agent.log"

    def stop(self) -> None:
        """SIGTERM (the agent stops its containers), then SIGKILL the group if it takes too long."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=_STOP_TIMEOUT)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()


def processes_under(directory: Path) -> list[int]:
    """Pids of processes whose working directory lies inside ``directory`` (every container's does)."""
    root = directory.resolve()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            if Path(os.readlink(entry / "cwd")).is_relative_to(root):
                found.append(int(entry.name))
    return found


def mounts_under(directory: Path) -> list[Path]:
    """Mount points inside ``directory`` as this process sees them (the agent's own vanish with it)."""
    root = directory.resolve()
    found = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        # Field 5 is the mount point, with spaces and other odd bytes as octal escapes.
        point = Path(line.split()[4].encode().decode("unicode_escape"))
        if point.is_relative_to(root):
            found.append(point)
    return found


def start_agent(
    control_plane: ControlPlane,
    state_dir: Path,
    *extra: str,
    detached: bool = False,
    env: Mapping[str, str] | None = None,
) -> AgentProcess:
    """Start an agent against ``control_plane`` and wait until its nodes are registered.

    ``detached`` lets it outlive this process (the sandbox); otherwise it dies with it. ``env``
    replaces this process's environment for it.
    """
    state_dir.mkdir(parents=True, exist_ok=True)
    marker = state_dir / "agent.json"
    marker.unlink(missing_ok=True)
    log = (state_dir / "agent.log").open("ab")
    command = [sys.executable, "-m", "operator_testkit.nodeagent"]
    process = subprocess.Popen(
        [*command, "--kubeconfig", str(control_plane.kubeconfig), "--dir", str(state_dir), *extra],
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        env=None if env is None else dict(env),
        start_new_session=True,
        preexec_fn=None if detached else die_with_parent,
    )
    log.close()
    agent = AgentProcess(process, state_dir, [])
    deadline = time.monotonic() + _START_TIMEOUT
    while not marker.exists():
        if process.poll() is not None or time.monotonic() > deadline:
            agent.stop()
            tail = agent.log.read_text(errors="replace")[-3000:]
            raise RuntimeError(f"the node agent did not start; its log ends:\n{tail}")
        time.sleep(0.2)
    agent.nodes = list(json.loads(marker.read_text())["nodes"])
    return agent
