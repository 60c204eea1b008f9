"""Where real nodes live (pure): every slot's ranges are its own and inside 198.18.0.0/15, and the
configuration files point every path into the node's directory."""

from __future__ import annotations

import ipaddress
import itertools
import json
import subprocess
import tempfile
import types
from pathlib import Path

import pytest

from operator_testkit.nodes.cluster import LocalCluster, _Daemon
from operator_testkit.nodes.configs import cni_conflist, containerd_config, kubelet_config
from operator_testkit.nodes.daemons import DEVICE_PLUGIN_RACE, DaemonRecord
from operator_testkit.nodes.dns import COREFILE
from operator_testkit.nodes.plan import MAX_NODES, SLOTS, nodes_plan
from operator_testkit.nodes.storage import SIZE_LIMITED_CLASS, storage_manifests

DEFAULT_ANNOTATION = "storageclass.kubernetes.io/is-default-class"

BENCHMARK_RANGE = ipaddress.ip_network("198.18.0.0/15")
ROOT = Path("/tmp/t")


def test_every_address_of_every_slot_is_in_the_benchmark_range_and_no_two_slots_share_one() -> None:
    plans = [nodes_plan(slot, MAX_NODES, ROOT / str(slot)) for slot in range(SLOTS)]
    networks = []
    for plan in plans:
        networks += [plan.pod_range, plan.service_range, plan.link]
        for node in plan.nodes:
            assert node.pod_subnet.subnet_of(plan.pod_range)
            assert node.address in plan.link
    for network in networks:
        assert network.subnet_of(BENCHMARK_RANGE), network
    for first, second in itertools.combinations(networks, 2):
        assert not first.overlaps(second), (first, second)


def test_every_kubelet_of_every_slot_runs_with_a_group_of_its_own_and_its_daemons_in_a_cgroup() -> None:
    nodes = [node for slot in range(SLOTS) for node in nodes_plan(slot, MAX_NODES, ROOT / str(slot)).nodes]
    groups = [node.kubelet_group for node in nodes]
    assert len(set(groups)) == len(groups)
    assert min(groups) > 65535  # no account's group: above what useradd and nogroup take
    assert max(groups) < 2**32 - 1
    node = nodes_plan(2, 3, ROOT).nodes[1]
    assert node.daemon_cgroup == "/operator-suite/slot2/daemons/node-b"
    assert not node.cgroup_root.startswith(node.daemon_cgroup)


def test_a_slot_names_its_nodes_and_zones_by_letter_and_its_links_fit_linux() -> None:
    plan = nodes_plan(7, 3, ROOT)
    assert [(n.name, n.zone) for n in plan.nodes] == [
        ("node-a", "zone-a"),
        ("node-b", "zone-b"),
        ("node-c", "zone-c"),
    ]
    assert plan.api_address == ipaddress.ip_address("198.19.240.1")
    assert plan.dns_service_ip == ipaddress.ip_address("198.19.112.10")
    names = [plan.machine_link, plan.namespace_link, *(n.bridge for n in plan.nodes)]
    assert all(len(name) <= 15 for name in names), names
    assert len(set(names)) == len(names)


@pytest.mark.parametrize(
    ("slot", "count", "message"),
    [
        (8, 3, "slot 8 is not one of 0-7"),
        (-1, 3, "slot -1 is not one of 0-7"),
        (0, 0, "between 1 and 26 nodes"),
        (0, 27, "between 1 and 26 nodes"),
    ],
)
def test_a_slot_or_count_out_of_range_is_refused(slot: int, count: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        nodes_plan(slot, count, ROOT)


def test_a_directory_too_long_for_the_kubelets_sockets_is_refused_before_anything_starts() -> None:
    with pytest.raises(ValueError, match="too long by 3 characters"):
        nodes_plan(0, 1, Path("/" + "d" * 69))
    nodes_plan(0, 1, Path("/" + "d" * 66))


def test_the_pod_network_is_the_nodes_own_bridge_and_subnet_without_masquerade() -> None:
    plan = nodes_plan(1, 2, ROOT)
    bridge, portmap = cni_conflist(plan.nodes[1])["plugins"]
    assert bridge["bridge"] == "osbr1b"
    assert bridge["ipMasq"] is False
    assert bridge["ipam"]["ranges"] == [[{"subnet": "198.18.33.0/24", "gateway": "198.18.33.1"}]]
    assert bridge["ipam"]["dataDir"] == "/tmp/t/node-b/cni/ipam"
    assert portmap["type"] == "portmap"


def test_containerd_and_the_kubelet_keep_to_the_nodes_own_places_with_this_machines_settings() -> None:
    plan = nodes_plan(2, 1, ROOT)
    (node,) = plan.nodes
    containerd = containerd_config(node)
    for line in (
        'root = "/tmp/t/node-a/containerd/root"',
        'address = "/run/operator-suite/s2/a/containerd.sock"',
        "restrict_oom_score_adj = true",
        "SystemdCgroup = false",
        'sandbox = "localhost/operator-suite-pause:1"',
        'conf_dir = "/tmp/t/node-a/cni/net.d"',
    ):
        assert line in containerd.splitlines(), line
    kubelet = kubelet_config(node, plan, port=10250, ca_file=ROOT / "ca.crt")
    assert kubelet["failCgroupV1"] is False
    assert kubelet["cgroupDriver"] == "cgroupfs"
    assert kubelet["cgroupRoot"] == "/operator-suite/slot2/node-a"
    assert kubelet["clusterDNS"] == ["198.19.32.10"]
    assert kubelet["containerRuntimeEndpoint"] == "unix:///run/operator-suite/s2/a/containerd.sock"


def test_cluster_dns_answers_for_the_cluster_and_forwards_nowhere() -> None:
    assert "kubernetes cluster.local" in COREFILE
    assert "forward" not in COREFILE


def test_volumes_come_from_local_path_with_the_samples_classes_and_a_size_limited_one() -> None:
    plan = nodes_plan(0, 2, ROOT)
    manifests = storage_manifests(plan)
    classes = {m["metadata"]["name"]: m for m in manifests if m["kind"] == "StorageClass"}
    assert set(classes) == {"standard", "local-path", "gp2", "csi-disk", SIZE_LIMITED_CLASS}
    defaults = [n for n, m in classes.items() if m["metadata"]["annotations"][DEFAULT_ANNOTATION] == "true"]
    assert defaults == ["standard"]
    assert {m["provisioner"] for m in classes.values()} == {"rancher.io/local-path"}
    (config,) = [m for m in manifests if m["kind"] == "ConfigMap"]
    paths = json.loads(config["data"]["config.json"])["storageClassConfigs"]
    assert paths[SIZE_LIMITED_CLASS]["nodePathMap"][1] == {
        "node": "node-b",
        "paths": [f"/tmp/t/node-b/storage/{SIZE_LIMITED_CLASS}"],
    }
    assert paths["gp2"]["nodePathMap"][0]["paths"] == ["/tmp/t/node-a/storage/plain"]
    assert f"*/{SIZE_LIMITED_CLASS}/*) mount -t tmpfs" in config["data"]["setup"]


@pytest.mark.parametrize(
    ("argv", "target"),
    [
        (["nodes", "freeze", "cluster-1-sts-0", "-n", "search"], ("pod", "cluster-1-sts-0")),
        (
            ["nodes", "kill", "cluster-1-sts-1", "-c", "typesense", "--signal", "TERM"],
            ("pod", "cluster-1-sts-1"),
        ),
        (["nodes", "partition", "cluster-1-sts-2"], ("pod", "cluster-1-sts-2")),
        (["nodes", "fill", "data-cluster-1-sts-0"], ("claim", "data-cluster-1-sts-0")),
        (["nodes", "restart-statefulset", "cluster-1-sts"], ("statefulset", "cluster-1-sts")),
        (["nodes", "power-cut", "node-b"], ("node", "node-b")),
        (["nodes", "reboot", "node-b", "--timeout", "90"], ("timeout", 90.0)),
        (["nodes", "isolate", "node-c"], ("node", "node-c")),
        (["nodes", "reconnect", "node-c"], ("node", "node-c")),
        (["nodes", "drain", "node-a", "--timeout", "5", "--force"], ("force", True)),
        (["nodes", "drain", "node-a"], ("timeout", 60.0)),
        (["nodes", "uncordon", "node-a"], ("node", "node-a")),
    ],
)
def test_fault_commands_parse_into_a_target_and_a_runner(argv: list[str], target: tuple[str, str]) -> None:
    from operator_testkit.cli import _parser

    parsed = _parser().parse_args(argv)
    assert getattr(parsed, target[0]) == target[1]
    assert callable(parsed.run)
    assert parsed.dir.name == "sandbox"


def test_a_fault_command_without_a_running_sandbox_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from operator_testkit.cli import main

    assert main(["nodes", "freeze", "cluster-1-sts-0", "--dir", str(tmp_path)]) == 1
    assert f"no sandbox runs in {tmp_path}" in capsys.readouterr().err
    assert main(["nodes", "power-cut", "node-a", "--dir", str(tmp_path)]) == 1
    assert f"no sandbox runs in {tmp_path}" in capsys.readouterr().err


@pytest.mark.parametrize("action", ["power-cut", "reboot", "isolate", "reconnect", "drain", "uncordon"])
def test_a_node_fault_on_a_node_the_sandbox_does_not_have_says_so_in_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], action: str
) -> None:
    from operator_testkit.cli import main

    built = types.SimpleNamespace(kubectl=Path("/cache/kubectl"))
    monkeypatch.setattr("operator_testkit.nodes.cluster.ensure_binaries", lambda: built)  # no build
    # A short directory, as a sandbox's is: the kubelet's socket paths must fit (nodes_plan checks).
    with tempfile.TemporaryDirectory(dir="/tmp") as directory:
        (Path(directory) / "cluster").mkdir()
        (Path(directory) / "cluster" / "cluster.json").write_text(json.dumps({"slot": 7, "count": 3}))
        assert main(["nodes", action, "node-z", "--dir", directory]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        "operator-suite-dev nodes: node-z is not a node of this cluster (node-a, node-b, node-c)\n"
    )


@pytest.mark.parametrize(
    ("name", "last_line", "starts", "again"),
    [
        pytest.param(
            "kubelet-node-c",
            f"listen unix /var/lib/kubelet/{DEVICE_PLUGIN_RACE}",
            1,
            True,
            id="lost the race",
        ),
        pytest.param(
            "kubelet-node-c",
            f"listen unix /var/lib/kubelet/{DEVICE_PLUGIN_RACE}",
            3,
            False,
            id="lost it 3 times",
        ),
        pytest.param(
            "kubelet-node-c", "failed to run Kubelet: invalid configuration", 1, False, id="another exit"
        ),
        pytest.param("containerd-node-c", DEVICE_PLUGIN_RACE, 1, False, id="not a kubelet"),
    ],
)
def test_a_kubelet_that_lost_the_device_plugin_socket_race_is_started_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, last_line: str, starts: int, again: bool
) -> None:
    """Every kubelet of the machine binds the same device-plugin socket: one of two that start at once
    exits, and is started again as systemd would; any other exit ends the start."""
    log = tmp_path / f"{name}.log"
    log.write_text(f"I1129 starting\nE1129 {last_line}\n")
    cluster = LocalCluster(tmp_path)
    record = DaemonRecord(name, ("kubelet", "--config=x"), {}, "/operator-suite/slot0/daemons/node-c", log)
    exited = _Daemon(record, subprocess.Popen(["true"]), starts=starts)
    exited.process.wait()
    cluster._daemons.append(exited)
    spawned: list[DaemonRecord] = []

    def spawn(record: DaemonRecord) -> _Daemon:
        spawned.append(record)
        daemon = _Daemon(record, exited.process)
        cluster._daemons.append(daemon)
        return daemon

    monkeypatch.setattr(cluster, "_spawn", spawn)
    assert cluster._started_again(exited) is again
    assert spawned == ([record] if again else [])  # the same argv, environment and cgroup
    assert [d.starts for d in cluster._daemons] == ([starts + 1] if again else [starts])
