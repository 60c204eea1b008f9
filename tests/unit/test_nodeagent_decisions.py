"""The node agent's pure decisions: addresses, env, paths, hosts files, Typesense argv, pod status, probes."""

from __future__ import annotations

import base64
import ipaddress
from datetime import UTC, datetime
from pathlib import Path

import pytest

from operator_testkit.nodeagent.addresses import next_address
from operator_testkit.nodeagent.env import ConfigError, PodFacts, expand, resolve_env
from operator_testkit.nodeagent.hosts import build_hosts, endpoints_from_pods
from operator_testkit.nodeagent.probes import ProbeSpec, ProbeTracker, resolve_port
from operator_testkit.nodeagent.runners import (
    NginxRunner,
    StandInRunner,
    TypesenseRunner,
    declared_ports,
    normalize_image,
    runner_for,
    typesense_argv,
)
from operator_testkit.nodeagent.status import ContainerSnapshot, pod_phase
from operator_testkit.nodeagent.storage import volume_for_claim
from operator_testkit.nodeagent.volumes import mount_table, translate, volume_files

NET = ipaddress.IPv4Network("127.50.0.0/16")
IP = ipaddress.IPv4Address


# ---------------------------------------------------------------- addresses


def test_next_address_is_round_robin_and_never_reuses_one_in_use() -> None:
    first = next_address(NET, set(), None)
    assert first == IP("127.50.0.1")
    second = next_address(NET, {first}, first)
    assert second == IP("127.50.0.2")
    # a released address is not handed out again right away: the pod after gets a new one
    assert next_address(NET, {second}, second) == IP("127.50.0.3")


def test_next_address_wraps_and_skips_dot_zero_and_dot_255() -> None:
    small = ipaddress.IPv4Network("127.60.0.248/29")
    assert next_address(small, set(), IP("127.60.0.254")) == IP("127.60.0.249")
    assert next_address(ipaddress.IPv4Network("127.61.0.0/23"), set(), IP("127.61.0.254")) == IP("127.61.1.1")


def test_next_address_refuses_non_loopback_and_full_networks() -> None:
    with pytest.raises(ValueError, match="not a loopback"):
        next_address(ipaddress.IPv4Network("10.0.0.0/24"), set(), None)
    tiny = ipaddress.IPv4Network("127.70.0.0/30")
    with pytest.raises(ValueError, match="full"):
        next_address(tiny, {IP("127.70.0.1"), IP("127.70.0.2")}, None)


# ---------------------------------------------------------------- env

POD = {
    "metadata": {"name": "web-0", "namespace": "shop", "uid": "u1", "labels": {"app": "web"}},
    "spec": {"nodeName": "agent-node-1"},
}
FACTS = PodFacts(pod_ip="127.50.0.9", host_ip="127.49.0.2", node_name="agent-node-1")
SECRET = {"data": {"key": base64.b64encode(b"s3cr3t-value").decode()}}
CONFIG = {"data": {"mode": "fast", "level": "3"}}


def test_env_literals_references_and_downward_api() -> None:
    container = {
        "envFrom": [{"configMapRef": {"name": "cfg"}, "prefix": "CFG_"}],
        "env": [
            {"name": "A", "value": "one"},
            {"name": "B", "value": "$(A)-two-$$(A)-$(MISSING)"},
            {"name": "KEY", "valueFrom": {"secretKeyRef": {"name": "sec", "key": "key"}}},
            {"name": "MODE", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "mode"}}},
            {"name": "NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "NS", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
            {"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
            {"name": "APP", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['app']"}}},
        ],
    }
    resolved = resolve_env(POD, container, FACTS, {"cfg": CONFIG}, {"sec": SECRET})
    assert resolved.values == {
        "CFG_mode": "fast",
        "CFG_level": "3",
        "A": "one",
        "B": "one-two-$(A)-$(MISSING)",
        "KEY": "s3cr3t-value",
        "MODE": "fast",
        "NAME": "web-0",
        "NS": "shop",
        "IP": "127.50.0.9",
        "NODE": "agent-node-1",
        "APP": "web",
    }
    assert resolved.secret_values == {"s3cr3t-value"}


def test_env_missing_reference_is_a_config_error_unless_optional() -> None:
    missing = {"env": [{"name": "K", "valueFrom": {"secretKeyRef": {"name": "absent", "key": "k"}}}]}
    with pytest.raises(ConfigError, match='secret "absent" not found'):
        resolve_env(POD, missing, FACTS, {}, {})
    optional = {
        "env": [
            {"name": "K", "valueFrom": {"secretKeyRef": {"name": "absent", "key": "k", "optional": True}}}
        ]
    }
    assert resolve_env(POD, optional, FACTS, {}, {}).values == {}


def test_expand_keeps_unknown_references() -> None:
    assert expand("$(X) $(Y) $$", {"X": "x"}) == "x $(Y) $"


# ---------------------------------------------------------------- volumes and paths


def test_paths_under_mounts_are_translated_most_specific_first(tmp_path: Path) -> None:
    container = {
        "volumeMounts": [
            {"name": "data", "mountPath": "/usr/share/typesense/data"},
            {"name": "nodes", "mountPath": "/usr/share/typesense/nodelist"},
            {"name": "root", "mountPath": "/usr/share"},
        ]
    }
    dirs = {"data": tmp_path / "pv", "nodes": tmp_path / "cm", "root": tmp_path / "share"}
    mounts = mount_table(container, dirs)
    assert translate("/usr/share/typesense/data", mounts) == str(tmp_path / "pv")
    assert translate("/usr/share/typesense/nodelist/nodes", mounts) == str(tmp_path / "cm" / "nodes")
    assert (
        translate("--data-dir=/usr/share/typesense/data/x", mounts) == f"--data-dir={tmp_path / 'pv' / 'x'}"
    )
    assert translate("/usr/share/other", mounts) == str(tmp_path / "share" / "other")
    assert translate("/etc/passwd", mounts) == "/etc/passwd"
    assert translate("relative/path", mounts) == "relative/path"


def test_sub_path_must_stay_inside_the_volume(tmp_path: Path) -> None:
    container = {"volumeMounts": [{"name": "v", "mountPath": "/x", "subPath": "../escape"}]}
    with pytest.raises(ConfigError):
        mount_table(container, {"v": tmp_path})


def test_config_map_and_secret_volume_files() -> None:
    files = volume_files(
        {"configMap": {"name": "cfg", "items": [{"key": "mode", "path": "m/mode"}]}}, {"cfg": CONFIG}, {}
    )
    assert files == {"m/mode": b"fast"}
    assert volume_files({"secret": {"secretName": "sec"}}, {}, {"sec": SECRET}) == {"key": b"s3cr3t-value"}
    assert volume_files({"emptyDir": {}}, {}, {}) is None


def test_volume_for_claim_is_pre_bound_with_a_directory_under_the_root(tmp_path: Path) -> None:
    claim = {
        "metadata": {"name": "data-ts-0", "namespace": "ns", "uid": "abc"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "2Gi"}}},
    }
    volume = volume_for_claim(claim, tmp_path)
    assert volume["metadata"]["name"] == "pvc-abc"
    assert volume["spec"]["claimRef"] == {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "namespace": "ns",
        "name": "data-ts-0",
        "uid": "abc",
    }
    assert volume["spec"]["storageClassName"] == ""
    assert volume["spec"]["capacity"] == {"storage": "2Gi"}
    assert volume["spec"]["hostPath"]["path"] == str(tmp_path / "pvc-abc")


# ---------------------------------------------------------------- names


def _pod(name: str, ip: str, *, ready: bool, subdomain: str | None = "ts-svc") -> dict[str, object]:
    spec: dict[str, object] = {"hostname": name}
    if subdomain:
        spec["subdomain"] = subdomain
    return {
        "metadata": {"name": name, "namespace": "ns", "labels": {"app": "ts"}},
        "spec": spec,
        "status": {
            "phase": "Running",
            "podIP": ip,
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


HEADLESS = {
    "metadata": {"name": "ts-svc", "namespace": "ns"},
    "spec": {"clusterIP": "None", "selector": {"app": "ts"}, "publishNotReadyAddresses": True},
}
CLUSTER_IP = {"metadata": {"name": "api", "namespace": "other"}, "spec": {"clusterIP": "127.100.0.7"}}


def test_hosts_file_has_pod_dns_names_and_service_names() -> None:
    pods = [_pod("ts-0", "127.50.0.1", ready=False), _pod("ts-1", "127.50.0.2", ready=True)]
    slices = endpoints_from_pods([HEADLESS, CLUSTER_IP], pods)
    text = build_hosts(
        namespace="ns",
        hostname="ts-0",
        subdomain="ts-svc",
        pod_ip="127.50.0.1",
        services=[HEADLESS, CLUSTER_IP],
        endpoint_slices=slices,
    )
    lines = text.splitlines()
    assert "127.50.0.1\tts-0.ts-svc.ns.svc.cluster.local ts-0" in lines
    assert (
        "127.50.0.2\tts-1.ts-svc.ns.svc.cluster.local ts-1.ts-svc.ns.svc ts-1.ts-svc.ns ts-1.ts-svc" in lines
    )
    assert (
        "127.50.0.1\tts-0.ts-svc.ns.svc.cluster.local ts-0.ts-svc.ns.svc ts-0.ts-svc.ns ts-0.ts-svc" in lines
    )
    # another namespace's Service: no short name (the search path would not find it either)
    assert "127.100.0.7\tapi.other.svc.cluster.local api.other.svc api.other" in lines


def test_not_ready_endpoints_are_left_out_unless_published() -> None:
    unpublished = {**HEADLESS, "spec": {**HEADLESS["spec"], "publishNotReadyAddresses": False}}
    pods = [_pod("ts-0", "127.50.0.1", ready=False), _pod("ts-1", "127.50.0.2", ready=True)]
    text = build_hosts(
        namespace="ns",
        hostname="x",
        subdomain=None,
        pod_ip="127.50.0.9",
        services=[unpublished],
        endpoint_slices=endpoints_from_pods([unpublished], pods),
    )
    assert "ts-1.ts-svc" in text
    assert "ts-0.ts-svc" not in text


def test_non_loopback_addresses_never_reach_a_hosts_file() -> None:
    private = {"metadata": {"name": "p", "namespace": "ns"}, "spec": {"clusterIP": "10.0.0.1"}}
    slices = [
        {
            "metadata": {"namespace": "ns", "labels": {"kubernetes.io/service-name": "ts-svc"}},
            "endpoints": [{"addresses": ["192.168.1.5"], "hostname": "evil", "conditions": {"ready": True}}],
        }
    ]
    text = build_hosts(
        namespace="ns",
        hostname="x",
        subdomain=None,
        pod_ip="127.50.0.9",
        services=[private],
        endpoint_slices=slices,
    )
    assert "10.0.0.1" not in text
    assert "192.168.1.5" not in text


# ---------------------------------------------------------------- runners


def test_image_normalization_and_registry() -> None:
    assert normalize_image("docker.io/library/nginx") == "nginx:latest"
    assert normalize_image("docker.io/typesense/typesense:0.24.1") == "typesense/typesense:0.24.1"
    assert normalize_image("localhost:5000/app") == "localhost:5000/app:latest"
    assert isinstance(runner_for("typesense/typesense:0.24.1"), TypesenseRunner)
    assert isinstance(runner_for("docker.io/typesense/typesense:27.1"), TypesenseRunner)
    assert isinstance(runner_for("nginx:1.27"), NginxRunner)
    assert isinstance(runner_for("redis:7"), StandInRunner)


def test_typesense_argv_binds_the_pod_address_and_keeps_other_flags() -> None:
    argv = typesense_argv(
        "/bin/ts",
        ["/opt/typesense-server", "--data-dir", "/d"],
        ["--api-address", "0.0.0.0", "--peering-address=0.0.0.0", "--enable-cors"],  # noqa: S104 - replaced
        "127.50.0.4",
    )
    assert argv == [
        "/bin/ts",
        "--data-dir",
        "/d",
        "--enable-cors",
        "--api-address",
        "127.50.0.4",
        "--peering-address",
        "127.50.0.4",
    ]


def test_stand_in_serves_declared_and_probe_ports() -> None:
    container = {
        "ports": [{"containerPort": 80}, {"containerPort": 53, "protocol": "UDP"}],
        "readinessProbe": {"httpGet": {"port": 8081}},
        "livenessProbe": {"tcpSocket": {"port": "http"}},
    }
    assert declared_ports(container) == [80, 8081]
    assert resolve_port("http", {"ports": [{"name": "http", "containerPort": 80}]}) == 80
    assert resolve_port("metrics", {}) is None


# ---------------------------------------------------------------- status and probes


def _c(state: str, exit_code: int | None = None, *, will_restart: bool = False) -> ContainerSnapshot:
    return ContainerSnapshot(name="c", image="i", state=state, exit_code=exit_code, will_restart=will_restart)


def test_pod_phase_follows_the_kubelet() -> None:
    assert pod_phase([], [_c("waiting")]) == "Pending"
    assert pod_phase([_c("running")], [_c("waiting")]) == "Pending"
    assert pod_phase([_c("terminated", 1)], [_c("waiting")]) == "Failed"
    assert pod_phase([_c("terminated", 0)], [_c("running")]) == "Running"
    assert pod_phase([], [_c("terminated", 1, will_restart=True)]) == "Running"
    assert pod_phase([], [_c("terminated", 0), _c("terminated", 0)]) == "Succeeded"
    assert pod_phase([], [_c("terminated", 0), _c("terminated", 2)]) == "Failed"


def test_probe_tracker_thresholds() -> None:
    spec = ProbeSpec.of({"failureThreshold": 2, "successThreshold": 2})
    readiness = ProbeTracker(spec, passing=False)
    assert readiness.observe(True) is False
    assert readiness.observe(True) is True
    assert readiness.observe(False) is True
    assert readiness.observe(False) is False
    assert ProbeSpec.of({}) == ProbeSpec(
        initial_delay=0, period=10, timeout=1, success_threshold=1, failure_threshold=3
    )


def test_snapshot_status_shape() -> None:
    started = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    running = ContainerSnapshot(
        name="c", image="i", state="running", started_at=started, ready=True, started=True
    )
    status = running.as_status()
    assert status["state"] == {"running": {"startedAt": "2026-01-02T03:04:05Z"}}
    assert status["ready"] is True
    assert status["restartCount"] == 0
