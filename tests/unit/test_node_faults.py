"""NodeFaults against a pod or container that is not there (TargetGone): a thaw has nothing to do, a
freeze says so. And the decisions behind the faults of a whole node (:mod:`operator_testkit.nodes.power`):
which processes a power cut kills, which packets isolation drops, what a drain answered, when a
rebooted node is Ready.

The status-view e2e froze two pods, the operator's downgrade restarted them, and the thaw in the
test's ``finally`` met a container id the pod's status still gave but containerd no longer ran."""

from __future__ import annotations

import datetime
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from operator_testkit.nodes.daemons import RECORD, DaemonRecord, recorded_daemons
from operator_testkit.nodes.daemons import _write as write_records
from operator_testkit.nodes.faults import FaultError, NodeFaults, TargetGone
from operator_testkit.nodes.plan import NodePlan, nodes_plan
from operator_testkit.nodes.power import (
    NodePower,
    drain_answer,
    heartbeat,
    held_by_storage_helpers_only,
    isolation_rules,
    power_cut_victims,
    ready_since,
)

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


# ---------------------------------------------------------------- faults of a whole node (power.py)

PLAN = nodes_plan(0, 3, Path("/tmp/t"))
NODE_A = PLAN.nodes[0]
KUBELET_A = ("/cache/bin/kubelet", "--config=/tmp/t/node-a/kubelet.yaml", "--root-dir=/tmp/t/node-a/kubelet")
SHIM = ("/cache/bin/containerd-shim-runc-v2", "-namespace", "k8s.io", "-id", "4f2a")


@pytest.mark.parametrize(
    ("argv", "killed"),
    [
        pytest.param(KUBELET_A, True, id="its kubelet"),
        pytest.param(
            ("setpriv", "--regid=2147000000", "--clear-groups", "--", *KUBELET_A),
            True,
            id="its kubelet, setpriv not yet exec'd",
        ),
        pytest.param(
            ("/cache/bin/containerd", "--config", "/tmp/t/node-a/containerd.toml"), True, id="its containerd"
        ),
        pytest.param((*SHIM, "-address", "/run/operator-suite/s0/a/containerd.sock"), True, id="its shim"),
        pytest.param(
            ("/usr/sbin/runc", "--root", "/tmp/t/node-a/containerd/runc/k8s.io", "kill", "4f2a"),
            True,
            id="a runc of its containerd",
        ),
        pytest.param(
            (*SHIM, "-address", "/run/operator-suite/s0/b/containerd.sock"), False, id="another node's shim"
        ),
        pytest.param(
            ("/cache/bin/kubelet", "--config=/tmp/t/node-b/kubelet.yaml"), False, id="another node's kubelet"
        ),
        pytest.param(("/cache/bin/kube-proxy", "--config=/tmp/t/kube-proxy.yaml"), False, id="kube-proxy"),
        pytest.param(
            ("python", "-m", "operator_testkit.nodes.resizer", "/tmp/controlplane/kubeconfig"),
            False,
            id="the resizer",
        ),
        pytest.param(("/bin/tool", "--dir=/tmp/t/node-ab/x"), False, id="a directory that only begins alike"),
        pytest.param((), False, id="a zombie (no command line)"),
    ],
)
def test_a_power_cut_kills_the_nodes_daemons_and_shims_and_no_other(
    argv: tuple[str, ...], killed: bool
) -> None:
    assert power_cut_victims(NODE_A, {4242: argv}, in_node_cgroups=[]) == ({4242} if killed else set())


def test_a_power_cut_kills_every_process_in_the_nodes_cgroups_whatever_it_is() -> None:
    daemons = {10: ("/cache/bin/kube-proxy", "--config=/tmp/t/kube-proxy.yaml"), 11: KUBELET_A}
    assert power_cut_victims(NODE_A, daemons, in_node_cgroups=[500, 501, 11]) == {11, 500, 501}


def test_a_node_with_nothing_left_has_nothing_to_kill() -> None:
    """What tells reboot a cut node from a running one."""
    daemons = {10: ("/cache/bin/kube-proxy", "--config=/tmp/t/kube-proxy.yaml")}
    assert power_cut_victims(NODE_A, daemons, in_node_cgroups=[]) == set()


def test_isolation_drops_only_the_kubelets_traffic_with_the_api_server_both_ways() -> None:
    plan = nodes_plan(1, 3, Path("/tmp/t"))
    node = plan.nodes[1]
    output, incoming = isolation_rules(plan, node, kubelet_port=10250)
    assert output[0] == "OUTPUT"
    assert output[output.index("--gid-owner") + 1] == str(node.kubelet_group) == "2147000101"
    assert output[output.index("-d") + 1] == f"{plan.api_address}/32"
    assert incoming[0] == "INPUT"
    assert incoming[incoming.index("-s") + 1] == f"{plan.api_address}/32"
    assert incoming[incoming.index("-d") + 1] == f"{node.address}/32"
    assert incoming[incoming.index("--dport") + 1] == "10250"
    for rule in (output, incoming):
        assert rule[-2:] == ["-j", "DROP"]
        assert "operator-suite: node-b isolated" in rule


PDB_HELD = (
    'evicting pod ns/web-0\nerror when evicting pods/"web-0" -n "ns" (will retry after 5s): Cannot evict '
    "pod as it would violate the pod's disruption budget.\n"
)


@pytest.mark.parametrize(
    ("returncode", "stdout", "stderr", "drained"),
    [
        pytest.param(0, "node/node-b cordoned\nnode/node-b drained\n", "", True, id="drained"),
        pytest.param(
            1,
            "node/node-b cordoned\n",
            PDB_HELD + 'error: unable to drain node "node-b" due to '
            "error: global timeout reached: 5s, continuing command...\n",
            False,
            id="held by a disruption budget past the timeout",
        ),
        pytest.param(
            1,
            "node/node-b already cordoned\n",
            'error: unable to drain node "node-b": cannot delete '
            "Pods that declare no controller (use --force to override): ns/bare\n",
            False,
            id="a pod no controller makes",
        ),
    ],
)
def test_a_drain_that_began_is_an_answer_finished_or_not(
    returncode: int, stdout: str, stderr: str, drained: bool
) -> None:
    answer = drain_answer("node-b", returncode, stdout, stderr)
    assert answer["drained"] is drained
    assert answer["output"].startswith(stdout.strip())


HELPER = "local-path-storage/helper-pod-delete-pvc-b1042f0a-9d47-4d52-b27f-65fa415314a4"
NO_CONTROLLER = "cannot delete Pods that declare no controller (use --force to override): "


@pytest.mark.parametrize(
    ("output", "run_again"),
    [
        pytest.param(
            'node/node-c cordoned\nerror: unable to drain node "node-c" due to error: '
            f"cannot delete {NO_CONTROLLER}{HELPER}, continuing command...\n"
            "There are pending nodes to be drained:\n node-c\n"
            f"cannot delete {NO_CONTROLLER}{HELPER}",
            True,
            id="a storage helper pod (seen in a test run): run again",
        ),
        pytest.param(
            f"node/node-c cordoned\nerror: {NO_CONTROLLER}default/bare, {HELPER}, continuing command...",
            False,
            id="a bare pod of someone's beside it: an answer",
        ),
        pytest.param(PDB_HELD, False, id="a disruption budget: an answer"),
        pytest.param("node/node-c cordoned\nnode/node-c drained", False, id="drained"),
    ],
)
def test_a_drain_refused_only_for_storage_helper_pods_is_run_again(output: str, run_again: bool) -> None:
    assert held_by_storage_helpers_only(output) is run_again


@pytest.mark.parametrize(
    "stderr",
    [
        'Error from server (NotFound): nodes "node-b" not found',
        "The connection to the server 198.19.128.1:6443 was refused - did you specify the right host?",
    ],
)
def test_a_drain_that_could_not_begin_is_an_error(stderr: str) -> None:
    with pytest.raises(FaultError, match="kubectl drain node-b failed"):
        drain_answer("node-b", 1, "", stderr)


def node_object(status: str | None, beat: str = "2026-12-01T10:00:05Z") -> dict[str, Any]:
    conditions = [{"type": "MemoryPressure", "status": "False", "lastHeartbeatTime": "2026-12-01T09:00:00Z"}]
    if status is not None:
        conditions.append({"type": "Ready", "status": status, "lastHeartbeatTime": beat})
    return {"status": {"conditions": conditions}}


BEFORE = datetime.datetime(2026, 12, 1, 10, 0, 5, tzinfo=datetime.UTC)


@pytest.mark.parametrize(
    ("node", "after", "ready"),
    [
        pytest.param(node_object("True"), None, True, id="ready"),
        pytest.param(node_object("True", "2026-12-01T10:00:09Z"), BEFORE, True, id="ready since the reboot"),
        pytest.param(node_object("True"), BEFORE, False, id="ready, said by the killed kubelet"),
        pytest.param(node_object("Unknown"), None, False, id="its kubelet silent past the grace"),
        pytest.param(node_object("False", "2026-12-01T10:00:09Z"), BEFORE, False, id="runtime not ready yet"),
        pytest.param(node_object(None), None, False, id="no Ready condition yet"),
        pytest.param({"status": {}}, None, False, id="no status"),
    ],
)
def test_a_rebooted_node_is_ready_once_its_new_kubelet_says_so(
    node: dict[str, Any], after: datetime.datetime | None, ready: bool
) -> None:
    assert ready_since(node, after) is ready


def test_a_nodes_heartbeat_is_its_ready_conditions() -> None:
    assert heartbeat(node_object("Unknown")) == BEFORE
    assert heartbeat(node_object(None)) is None


def power(running: set[int]) -> NodePower:
    def start(record: DaemonRecord) -> subprocess.Popen[bytes]:
        raise AssertionError(f"nothing may start: {record.name}")

    class Power(NodePower):
        def _running(self, node: NodePlan) -> set[int]:
            return running

    return Power(PLAN, ("kubectl",), start)


def test_a_node_fault_on_a_node_the_cluster_does_not_have_names_the_ones_it_has() -> None:
    for fault in (NodePower.power_cut, NodePower.reboot, NodePower.isolate, NodePower.drain):
        with pytest.raises(
            FaultError, match=r"^node-z is not a node of this cluster \(node-a, node-b, node-c\)$"
        ):
            fault(power(set()), "node-z")


def test_a_node_that_runs_is_not_rebooted_and_one_that_does_not_is_not_cut() -> None:
    with pytest.raises(FaultError, match=r"^node-a is not cut: 2 of its processes run .*power-cut it first$"):
        power({4242, 4243}).reboot("node-a")
    with pytest.raises(FaultError, match=r"^node-a is cut already"):
        power(set()).power_cut("node-a")


def test_a_daemons_record_keeps_argv_environment_cgroup_and_log_readable_by_root_only() -> None:
    # A short directory, as a cluster's is: nodes_plan refuses one too long for the kubelet's sockets.
    with tempfile.TemporaryDirectory(dir="/tmp") as directory:
        plan = nodes_plan(0, 1, Path(directory))
        record = DaemonRecord(
            "kubelet-node-a",
            ("setpriv", "--", "kubelet"),
            {"PATH": "/bin"},
            "/x/y",
            Path(directory) / "k.log",
        )
        write_records(plan, {record.name: record})
        assert recorded_daemons(plan) == {"kubelet-node-a": record}
        assert (plan.directory / RECORD).stat().st_mode & 0o777 == 0o600
        assert recorded_daemons(nodes_plan(0, 1, Path(directory) / "none")) == {}
