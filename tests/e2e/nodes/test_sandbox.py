"""``operator-suite-dev sandbox up|down`` as a user runs them: real nodes, the operators installed by
helm, failing loudly, cleaning up, one per machine.

Each test runs the real command in a directory of its own, with a lock file of its own (so a sandbox
a developer runs on this machine is neither refused nor disturbed); its nodes take a free slot of the
machine, as a test run's do. Whatever happens, the fixture stops the sandbox and checks that none of
its processes is left; ``down`` itself checks that no mount, link or cgroup of its slot is.
"""

from __future__ import annotations

import asyncio
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

from operator_testkit.fixtures import wait_until
from operator_testkit.image import Image
from operator_testkit.sandbox import WITHOUT_IMAGES, sandbox_down, sandbox_processes

# A whole ``up`` may take UP_WITHIN on a machine busy with other workers' nodes, and ``down`` after it.
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(960)]
"""Two whole ``up``s (UP_WITHIN each) and their ``down``s in the longest test: a CI run, with Monocle's
engine a real OpenSearch, went over 600 s on a machine busy with other workers."""

BIN = Path(sys.executable).parent
CLI = str(BIN / "operator-suite-dev")
SAMPLE_APPLIED = "applying deploy/samples/ts_v1alpha1_typesensecluster_aws.yaml"
STUCK_REPORTED_WITHIN = 30.0
"""From the sample's apply to the report: the claims are bound and the pods scheduled (a few
seconds), the kubelet fails to find the image, and the sandbox polls every 2 s."""
REFUSED_WITHIN = 10.0
"""A second sandbox is refused before it starts anything: the time to start Python and read a lock."""
UP_WITHIN = 420.0
"""A whole ``up``: nodes Ready in about a minute (images loaded into each), three helm installs, the
sample Ready and its first backup Completed, on a machine busy with other tests."""
WARM_UP_WITHIN = 300.0
"""Up again after down, everything built: about 2 minutes alone (README); this bound leaves room for
the test run's other workers on the same two cores."""


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
                [CLI, "sandbox", "up", "--dir", str(self.directory), "--lock", str(self.lock)],
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                env={**os.environ, **(env or {})},
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
def sandbox(tmp_path_factory: pytest.TempPathFactory, suite_image: Image) -> Iterator[Sandbox]:
    """A sandbox's directory and lock; the suite's image is built first, so ``up`` only finds it.
    The directory's name is short: the nodes' sockets live under it, and a socket's path is short."""
    home = tmp_path_factory.mktemp("sb")
    box = Sandbox(home / "sandbox", home / "sandbox.lock", home / "up.log")
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


def assert_nothing_left(box: Sandbox) -> None:
    assert box.running() == [], "processes of the sandbox are still running"
    # down checks that the nodes' slot left no mount, link or cgroup, and says what it finds.
    assert "left behind" not in box.said()
    assert not (box.directory / "sandbox.json").exists()
    assert not box.lock.exists(), "the lock is still held"
    down = box.down()
    assert down.returncode == 0, down.stderr
    assert "no sandbox recorded" in down.stdout


async def test_up_gets_the_sample_ready_and_backed_up_a_second_sandbox_is_refused_and_down_stops_it(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    process = sandbox.up()
    await wait_until(lambda: process.poll() is not None, timeout=UP_WITHIN, what="sandbox up to finish")
    said = sandbox.said()
    assert process.returncode == 0, said
    assert "typesensecluster.ts.opentelekomcloud.com/cluster-1: Ready=True" in said
    assert "typesense/typesense:27.1 is typesense-server 0.24.1" in said, "what an image really is"

    # Real nodes, as `kubectl get nodes -o wide` shows them.
    nodes = sandbox.kubectl("get", "nodes")["items"]
    assert sorted(n["metadata"]["name"] for n in nodes) == ["node-a", "node-b", "node-c"]
    for node in nodes:
        info = node["status"]["nodeInfo"]
        assert info["kubeletVersion"] == "v1.35.4"
        assert info["containerRuntimeVersion"].startswith("containerd://")
    # The operators run as pods of the suite's image, installed by helm.
    for namespace, name in [
        ("typesense-system", "typesense-operator"),
        ("monocle-system", "monocle-operator"),
        ("clusterstack-system", "cluster-stack-operator"),
    ]:
        (pod,) = sandbox.kubectl("get", "pods", "-n", namespace)["items"]
        assert pod["status"]["phase"] == "Running"
        assert pod["metadata"]["labels"]["app.kubernetes.io/name"] == name
        assert pod["spec"]["containers"][0]["image"].startswith("localhost/operator-suite:src-")
    # The sample schedule's first backup is Completed, with what it holds.
    backups = sandbox.kubectl("get", "typesensebackups")["items"]
    assert [b["status"]["phase"] for b in backups] == ["Completed"]
    assert backups[0]["status"]["location"].startswith("s3://backups/typesense/default/cluster-1/")

    # Faults from a shell, on the sandbox's own nodes.
    for action in ("freeze", "thaw"):
        said = await asyncio.to_thread(
            subprocess.run, [CLI, "nodes", action, "cluster-1-sts-0", "--dir", str(sandbox.directory)],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert said.returncode == 0, said.stderr
        assert json.loads(said.stdout)["pod"] == "default/cluster-1-sts-0"

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
    assert_nothing_left(sandbox)

    # `make run` again after `make down`, in the same directory, everything built: up again, quickly.
    started = time.monotonic()
    again = sandbox.up()
    await wait_until(lambda: again.poll() is not None, timeout=UP_WITHIN, what="sandbox up again to finish")
    warm = time.monotonic() - started
    print(f"sandbox up again after down: {warm:.0f} s")
    assert again.returncode == 0, sandbox.said()
    assert warm < WARM_UP_WITHIN, f"up again took {warm:.0f} s"
    down = sandbox.down()
    assert down.returncode == 0, down.stdout + down.stderr
    assert_nothing_left(sandbox)


async def test_up_names_a_pod_whose_image_is_missing_within_seconds_and_leaves_nothing(
    sandbox: Sandbox,
) -> None:
    process = sandbox.up(env={WITHOUT_IMAGES: "typesense/typesense:27.1"})
    await sandbox.wait_for(process, SAMPLE_APPLIED, timeout=UP_WITHIN)
    applied = time.monotonic()
    # The pod's first container to start is its init container, of the same image.
    await sandbox.wait_for(
        process, "container wait-for-addresses cannot start", timeout=STUCK_REPORTED_WITHIN
    )
    reported_after = time.monotonic() - applied
    await wait_until(lambda: process.poll() is not None, timeout=120, what="sandbox up to exit")
    said = sandbox.said()
    assert process.returncode == 1, said
    (left_out,) = [line for line in said.splitlines() if "not loading" in line]
    assert "typesense/typesense:27.1" in left_out
    assert "sandbox up failed: a sample's pod cannot start" in said
    report = next(line for line in said.splitlines() if "container wait-for-addresses cannot start" in line)
    assert "pod default/cluster-1-sts-" in report
    assert "ErrImagePull" in report or "ImagePullBackOff" in report, report
    assert "127.0.0.1:9" in report, "the pull went to the nodes' absent proxy, and nowhere else"
    assert reported_after < STUCK_REPORTED_WITHIN
    assert "not Ready after" not in said
    assert_nothing_left(sandbox)


async def test_ctrl_c_while_the_samples_start_leaves_nothing_running(sandbox: Sandbox) -> None:
    process = sandbox.up()
    await sandbox.wait_for(process, SAMPLE_APPLIED, timeout=UP_WITHIN)
    process.send_signal(signal.SIGINT)
    await wait_until(lambda: process.poll() is not None, timeout=120, what="sandbox up to exit")
    assert process.returncode == 128 + signal.SIGINT, sandbox.said()
    assert "SIGINT: stopping everything this sandbox started" in sandbox.said()
    assert_nothing_left(sandbox)


async def test_down_stops_everything_after_up_was_killed_outright_while_the_nodes_start(
    sandbox: Sandbox,
) -> None:
    # SIGKILL: up cannot clean up after itself; down finds what it recorded, and what it had not yet.
    process = sandbox.up()
    await sandbox.wait_for(process, "starting 3 real nodes", timeout=UP_WITHIN)
    await wait_until(
        lambda: (sandbox.directory / "cluster" / "slot" / "logs").exists() or process.poll() is not None,
        timeout=60,
        what="the nodes' first daemons",
    )
    process.kill()
    await wait_until(lambda: process.poll() is not None, what="sandbox up to die")
    assert sandbox.running(), "nothing was left running to stop"
    down = sandbox.down()
    assert down.returncode == 0, down.stdout + down.stderr
    assert "stopped everything" in down.stdout
    assert_nothing_left(sandbox)
