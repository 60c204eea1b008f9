"""The ``node_agent`` pytest fixture: the node agent as a subprocess for the whole test session.

A pytest plugin of the test kit (a ``pytest11`` entry point, next to
:mod:`operator_testkit.fixtures`, whose ``control_plane`` it uses). Tests that
need the agent's helpers import them from :mod:`.harness`, not from here, so that
pytest can still rewrite this plugin's asserts.

At the end of the session the agent gets SIGTERM (it stops its containers), then
SIGKILL if it is slow, and the fixture checks that no process is left whose working
directory is inside the agent's state directory, killing any it finds, and that no
mount is left there.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator

import pytest

from operator_testkit.controlplane import ControlPlane
from operator_testkit.fixtures import worker_slice
from operator_testkit.nodeagent.addresses import DEFAULT_POD_CIDR
from operator_testkit.nodeagent.harness import AgentProcess, mounts_under, processes_under, start_agent

__all__ = ["node_agent"]


@pytest.fixture(scope="session")
def node_agent(
    control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[AgentProcess]:
    """One node agent (3 nodes, zones a-c) on the session's control plane."""
    agent = start_agent(
        control_plane, tmp_path_factory.mktemp("nodeagent"), "--pod-cidr", worker_slice(DEFAULT_POD_CIDR)
    )
    try:
        yield agent
    finally:
        agent.stop()
        left = processes_under(agent.state_dir)
        for pid in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        assert not left, f"the node agent left processes behind: {left}"
        assert not mounts_under(agent.state_dir), "the node agent left mounts behind"
