"""What lets a pod of this suite's own image run in-cluster on the node agent (pure parts): the
``kubernetes`` Service's env and forwarding, the ServiceAccount token and downward-API files, the
mounts in the process's own namespace, and the operator's listen address bound to the pod."""

from __future__ import annotations

from pathlib import Path

import pytest

from operator_testkit.nodeagent.env import ConfigError, PodFacts, downward_file, master_service_env
from operator_testkit.nodeagent.failures import ProgramMissing
from operator_testkit.nodeagent.processes import mount_script
from operator_testkit.nodeagent.runners import (
    REGISTRY,
    LaunchContext,
    OperatorSuiteRunner,
    Runtime,
    bound_to_pod,
    runner_for,
)
from operator_testkit.nodeagent.serviceproxy import api_server_backend, service_backends
from operator_testkit.nodeagent.volumes import Mount, TokenRequest, token_requests, volume_files

KUBERNETES = {
    "metadata": {"namespace": "default", "name": "kubernetes"},
    "spec": {"clusterIP": "127.100.0.1", "ports": [{"name": "https", "port": 443, "protocol": "TCP"}]},
}
POD = {
    "metadata": {"name": "op-1", "namespace": "ops", "uid": "u1", "labels": {"b": "2", "a": "1"}},
    "spec": {"nodeName": "n1", "serviceAccountName": "op"},
}
FACTS = PodFacts(pod_ip="127.50.0.9", host_ip="127.0.0.1", node_name="n1")
ACCESS_VOLUME = {
    "name": "kube-api-access-x",
    "projected": {
        "sources": [
            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
            {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
            {
                "downwardAPI": {
                    "items": [{"path": "namespace", "fieldRef": {"fieldPath": "metadata.namespace"}}]
                }
            },
        ]
    },
}


def test_every_container_learns_the_api_servers_service_as_the_kubelet_tells_it() -> None:
    other = {"metadata": {"namespace": "ops", "name": "typesense"}, "spec": {"clusterIP": "127.100.0.7"}}
    env = master_service_env([other, KUBERNETES])
    assert env["KUBERNETES_SERVICE_HOST"] == "127.100.0.1"
    assert env["KUBERNETES_SERVICE_PORT"] == "443"
    assert env["KUBERNETES_SERVICE_PORT_HTTPS"] == "443"
    assert env["KUBERNETES_PORT"] == "tcp://127.100.0.1:443"
    assert env["KUBERNETES_PORT_443_TCP_ADDR"] == "127.100.0.1"
    assert not any(key.startswith("TYPESENSE") for key in env), "other Services' links are left out"
    assert master_service_env([other]) == {}


def test_the_kubernetes_service_forwards_to_the_api_server_and_only_on_loopback() -> None:
    api = api_server_backend("https://127.0.0.1:6443")
    assert api == ("127.0.0.1", 6443)
    assert service_backends([KUBERNETES], [], api) == {("127.100.0.1", 443): [("127.0.0.1", 6443)]}
    assert service_backends([KUBERNETES], []) == {}
    assert api_server_backend("https://10.0.0.1:6443") is None
    assert api_server_backend(None) is None


def test_the_projected_service_account_volume_holds_the_token_ca_and_namespace() -> None:
    (wanted,) = token_requests([ACCESS_VOLUME, {"name": "tmp", "emptyDir": {}}])
    assert wanted == TokenRequest(audience="", expiration_seconds=3607)
    config_maps = {"kube-root-ca.crt": {"data": {"ca.crt": "PEM"}}}
    files = volume_files(ACCESS_VOLUME, config_maps, {}, pod=POD, facts=FACTS, tokens={wanted: b"jwt"})
    assert files == {"token": b"jwt", "ca.crt": b"PEM", "namespace": b"ops"}
    with pytest.raises(ConfigError, match="token is not issued yet"):
        volume_files(ACCESS_VOLUME, config_maps, {}, pod=POD, facts=FACTS, tokens={})


def test_downward_api_files_write_labels_as_the_kubelet_does() -> None:
    assert downward_file("metadata.labels", POD, FACTS) == 'a="1"\nb="2"'
    assert downward_file("metadata.name", POD, FACTS) == "op-1"
    volume = {"downwardAPI": {"items": [{"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}}]}}
    assert volume_files(volume, {}, {}, pod=POD, facts=FACTS) == {"labels": b'a="1"\nb="2"'}


def test_an_address_that_listens_everywhere_is_bound_to_the_pod() -> None:
    pod_ip = "127.50.0.9"
    assert bound_to_pod(["--health-address=0.0.0.0:8081", "--leader-elect"], pod_ip) == [
        "--health-address=127.50.0.9:8081",
        "--leader-elect",
    ]
    assert bound_to_pod(["--health-address", "0.0.0.0:8081"], pod_ip) == [
        "--health-address",
        "127.50.0.9:8081",
    ]
    assert bound_to_pod(["--health-address=127.0.0.5:9"], pod_ip) == ["--health-address=127.0.0.5:9"]
    assert bound_to_pod(["--namespace=0.0.0.0:1"], pod_ip) == ["--namespace=0.0.0.0:1"]


def test_volumes_are_staged_before_any_is_mounted_so_none_hides_another(tmp_path: Path) -> None:
    tmp_volume, token_volume = tmp_path / "tmp", tmp_path / "token"
    tmp_volume.mkdir()
    token_volume.mkdir()
    script = mount_script(
        [
            Mount("/var/run/secrets/kubernetes.io/serviceaccount", token_volume, read_only=True),
            Mount("/tmp", tmp_volume),
        ]
    )
    steps = script.split(" && ")
    assert steps[0] == 'mount --bind "$0" /etc/hosts'
    assert steps[1].startswith("mount -t tmpfs")
    assert steps[1].endswith(" /run")
    staged = [i for i, step in enumerate(steps) if str(tmp_path) in step]
    first_target = min(i for i, step in enumerate(steps) if step.endswith(" /tmp"))
    assert max(staged) < first_target, "a /tmp mount would hide the volumes' host paths under /tmp"
    assert "mount -o remount,bind,ro /var/run/secrets/kubernetes.io/serviceaccount" in steps
    assert steps[-1] == 'exec "$@"'
    assert mount_script([]) == 'mount --bind "$0" /etc/hosts && exec "$@"'
    assert mount_script([], "op-1") == 'mount --bind "$0" /etc/hosts && hostname op-1 && exec "$@"'


def test_a_volume_over_the_programs_own_code_does_not_hide_it(tmp_path: Path) -> None:
    # A checkout under /tmp (CI's clean clone) holds the runtime of an editable install; the
    # chart's /tmp emptyDir would hide it.
    script = mount_script([Mount("/tmp", tmp_path)], keep=["/tmp/ci/src", "/root/.cache/venv"])
    steps = script.split(" && ")
    staged = steps.index("mount --bind /tmp/ci/src /run/.pod-volumes/keep-0")
    mounted = steps.index("mount --bind /run/.pod-volumes/0 /tmp")
    restored = steps.index("mount --bind /run/.pod-volumes/keep-0 /tmp/ci/src")
    assert staged < mounted < restored
    assert "/root/.cache/venv" not in script, "only what a mount hides is bound back"


def _context(command: list[str], mounts: list[Mount]) -> LaunchContext:
    return LaunchContext(
        container={"name": "operator", "image": "localhost/operator-suite:0.1.0"},
        pod_ip="127.50.0.9",
        command=command,
        args=["--health-address=0.0.0.0:8081"],
        env={"PATH": "/usr/bin", "HOME": "/root"},
        mounts=mounts,
        runs_to_completion=False,
        redact=lambda text: text,
    )


def test_the_suites_image_runs_its_command_from_the_runtime_with_its_volumes_mounted(tmp_path: Path) -> None:
    assert isinstance(runner_for("localhost/operator-suite:0.1.0", REGISTRY), OperatorSuiteRunner)
    assert isinstance(runner_for("127.0.0.1:5000/operator-suite:dev", REGISTRY), OperatorSuiteRunner)
    runtime = Runtime({"typesense-operator": "/venv/bin/typesense-operator"}, ("/tmp/checkout/src",))
    runner = OperatorSuiteRunner(lambda: runtime)
    mounts = [Mount("/var/run/secrets/kubernetes.io/serviceaccount", tmp_path)]
    launch = runner.launch(_context([], mounts))
    assert launch.argv == ["/venv/bin/typesense-operator", "--health-address=127.50.0.9:8081"]
    assert launch.mounts == tuple(mounts)
    assert launch.keep == ("/tmp/checkout/src",)
    assert launch.env["HOME"] == "/", "no fallback to this machine's ~/.kube/config"
    assert launch.env["PATH"].startswith("/venv/bin:")
    with pytest.raises(ProgramMissing, match="no command 'monocle-operator'"):
        runner.launch(_context(["monocle-operator"], mounts))
    with pytest.raises(ConfigError, match="cannot mount a volume at /no/such/dir"):
        runner.launch(_context([], [Mount("/no/such/dir", tmp_path)]))
