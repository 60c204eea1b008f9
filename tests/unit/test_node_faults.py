"""NodeFaults against a pod or container that is not there (TargetGone): a thaw has nothing to do, a
freeze says so.

The status-view e2e froze two pods, the operator's downgrade restarted them, and the thaw in the
test's ``finally`` met a container id the pod's status still gave but containerd no longer ran."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from operator_testkit.nodes.faults import NodeFaults, TargetGone

CONTAINER_ID = "523ef78fc4f59d88f84e94d7de60ee59bab3a671f24213233ffad121bed61a07"


class OnePod:
    """Just the read NodeFaults makes: the pod with its container's id."""

    async def get(self, api_version: str, kind: str, name: str, namespace: str) -> dict[str, Any] | None:
        return {
            "spec": {"nodeName": "node-b", "containers": [{"name": "typesense"}]},
            "status": {
                "containerStatuses": [{"name": "typesense", "containerID": f"containerd://{CONTAINER_ID}"}]
            },
        }


def fake_ctr(tmp_path: Path, task_status: str | None) -> list[str]:
    """A ``ctr`` that lists the container's task in ``task_status`` (none at all for None) and records
    every other call."""
    listing = "TASK PID STATUS\n" + (f"{CONTAINER_ID} 4242 {task_status}\n" if task_status else "")
    script = tmp_path / "ctr.py"
    script.write_text(
        "import sys\n"
        f"if 'ls' in sys.argv: print({listing!r}, end='')\n"
        f"else: open({str(tmp_path / 'calls')!r}, 'a').write(' '.join(sys.argv[1:]) + '\\n')\n"
    )
    return [sys.executable, str(script)]


@pytest.mark.parametrize(
    ("task_status", "resumed"),
    [
        pytest.param("PAUSED", True, id="a frozen container is resumed"),
        pytest.param("RUNNING", False, id="a running one is left as it is"),
        pytest.param("STOPPED", False, id="one that has stopped since is nothing to thaw"),
        pytest.param(None, False, id="one containerd no longer lists is nothing to thaw"),
    ],
)
async def test_thaw_resumes_only_a_frozen_container(
    tmp_path: Path, task_status: str | None, resumed: bool
) -> None:
    command = fake_ctr(tmp_path, task_status)
    faults = NodeFaults(kube=OnePod(), ctr_of=lambda node: command)  # type: ignore[arg-type]

    answer = await faults.thaw("ns", "cluster-1-sts-1", "typesense")

    assert answer == {"pod": "ns/cluster-1-sts-1", "container": "typesense", "frozen": False}
    calls = (tmp_path / "calls").read_text() if (tmp_path / "calls").exists() else ""
    assert ("tasks resume" in calls) is resumed


class NoPod:
    """The API server's answer for a pod deleted meanwhile."""

    async def get(self, api_version: str, kind: str, name: str, namespace: str) -> dict[str, Any] | None:
        return None


async def test_thawing_a_pod_deleted_meanwhile_is_nothing_to_thaw(tmp_path: Path) -> None:
    command = fake_ctr(tmp_path, None)
    faults = NodeFaults(kube=NoPod(), ctr_of=lambda node: command)  # type: ignore[arg-type]

    answer = await faults.thaw("ns", "cluster-1-sts-1", "typesense")

    assert answer["frozen"] is False
    assert not (tmp_path / "calls").exists()


async def test_freezing_a_pod_that_is_not_there_says_so(tmp_path: Path) -> None:
    command = fake_ctr(tmp_path, None)
    faults = NodeFaults(kube=NoPod(), ctr_of=lambda node: command)  # type: ignore[arg-type]

    with pytest.raises(TargetGone, match="pod ns/cluster-1-sts-1 not found"):
        await faults.freeze("ns", "cluster-1-sts-1", "typesense")
