"""Slots of real nodes on this machine, taken and given back as a stop from another process does it.

No node starts here: a `sleep` in the slot's cgroup plays the daemons that hold the slot's lock.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from operator_testkit.nodes import host
from operator_testkit.nodes.cluster import RECORD, stop_recorded_cluster
from operator_testkit.nodes.plan import nodes_plan


def _record(directory: Path, slot: int) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / RECORD).write_text(json.dumps({"slot": slot, "count": 1}))


@pytest.fixture
def short_path() -> Iterator[Path]:
    """A directory short enough for the kubelet's socket paths, which a nodes plan checks."""
    path = Path(tempfile.mkdtemp(prefix="slots-", dir="/tmp")).resolve()
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def links() -> Iterator[list[str]]:
    made: list[str] = []
    yield made
    for name in made:
        subprocess.run(["ip", "link", "delete", name], check=False, capture_output=True)


def test_a_stopped_cluster_keeps_its_slot_until_its_network_is_gone(
    short_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = short_path / "cluster"
    slot = host.acquire_slot(directory)
    plan = nodes_plan(slot.index, 1, directory / "slot")
    host.make_cgroups(plan.cgroup)
    # The "daemons" inherit the lock and hold it alone once this process lets go, as a detached
    # cluster's daemons do after the process that started them has exited.
    daemon = subprocess.Popen(["sleep", "300"], pass_fds=(slot.descriptor,))
    host.join_cgroups(daemon.pid, plan.cgroup)
    slot.release()
    _record(directory, slot.index)
    held_while_taken_down: list[bool] = []
    take_down = host.take_down

    def observed_take_down(taken: object) -> None:
        held_while_taken_down.append(host._held_by_another(slot.index))
        take_down(taken)  # type: ignore[arg-type]

    monkeypatch.setattr(host, "take_down", observed_take_down)
    try:
        assert stop_recorded_cluster(directory)
        assert daemon.wait(timeout=15) is not None
        assert held_while_taken_down == [True], "a starting cluster could have taken the slot meanwhile"
        assert not host._held_by_another(slot.index)
        assert not (directory / RECORD).exists()
    finally:
        if daemon.poll() is None:
            daemon.kill()
        host.kill_cgroup_tree(plan.cgroup)


def test_a_stale_record_leaves_the_cluster_that_holds_its_slot_now_alone(
    short_path: Path, links: list[str]
) -> None:
    tmp_path = short_path
    holder = host.acquire_slot((tmp_path / "holder").resolve())
    try:
        stale = (tmp_path / "stale").resolve()
        _record(stale, holder.index)
        link = nodes_plan(holder.index, 1, stale / "slot").machine_link
        subprocess.run(["ip", "link", "add", link, "type", "veth", "peer", "name", f"{link}p"], check=True)
        links.append(link)

        assert stop_recorded_cluster(stale)

        assert Path(f"/sys/class/net/{link}").exists(), "the holder's link was deleted"
        assert host._recorded_directory(holder.index) == (tmp_path / "holder").resolve()
        assert not (stale / RECORD).exists()
    finally:
        host.give_back_slot(holder)
