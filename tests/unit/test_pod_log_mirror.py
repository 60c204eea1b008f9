"""The soak's copy of the containers' logs: it keeps what a deleted pod wrote, and what a rotated log
wrote before its rotation."""

from __future__ import annotations

import asyncio
from pathlib import Path

from operator_testkit.nodes.log_mirror import PodLogMirror


def test_a_log_is_copied_as_it_grows_and_its_copy_outlives_the_pod(tmp_path: Path) -> None:
    pod_logs = tmp_path / "nodes" / "node-a" / "pod-logs"
    log = pod_logs / "chaos_cluster-sts-0_uid" / "typesense" / "0.log"
    log.parent.mkdir(parents=True)
    mirror = PodLogMirror(tmp_path, [pod_logs], tmp_path / "kept")
    copy = tmp_path / "kept" / log.relative_to(tmp_path)

    log.write_text("started\n")
    mirror.copy_new_bytes()
    with log.open("a") as more:
        more.write("leader elected\n")
    mirror.copy_new_bytes()
    mirror.copy_new_bytes()  # nothing new: nothing added
    assert copy.read_text() == "started\nleader elected\n"

    log.write_text("after rotation\n")  # shorter than what was copied: the kubelet started it again
    mirror.copy_new_bytes()
    log.unlink()  # the pod was deleted
    mirror.copy_new_bytes()
    assert copy.read_text() == "started\nleader elected\nafter rotation\n"


def test_only_the_pod_log_directories_are_read(tmp_path: Path) -> None:
    pod_logs = tmp_path / "node-a" / "pod-logs"
    (pod_logs / "pod").mkdir(parents=True)
    (pod_logs / "pod" / "0.log").write_text("kept\n")
    (tmp_path / "node-a" / "containerd").mkdir()
    (tmp_path / "node-a" / "containerd" / "daemon.log").write_text("not a container's\n")
    PodLogMirror(tmp_path, [pod_logs], tmp_path / "kept").copy_new_bytes()
    assert [p.name for p in (tmp_path / "kept").rglob("*.log")] == ["0.log"]


def test_running_copies_once_more_when_the_block_ends(tmp_path: Path) -> None:
    pod_logs = tmp_path / "pod-logs"
    (pod_logs / "pod").mkdir(parents=True)
    log = pod_logs / "pod" / "0.log"

    async def run() -> None:
        async with PodLogMirror(tmp_path, [pod_logs], tmp_path / "kept").running(interval=60):
            await asyncio.sleep(0.05)
            log.write_text("written just before the end\n")

    asyncio.run(run())
    assert (tmp_path / "kept" / "pod-logs" / "pod" / "0.log").read_text() == "written just before the end\n"
