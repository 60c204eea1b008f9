"""What lets a pod of this suite's own image run in-cluster on the node agent (pure parts): the
``kubernetes`` Service's env and forwarding, the ServiceAccount token and downward-API files, the
image's own root with the pod's mounts, user and environment, and the operator's listen address bound
to the pod."""

from __future__ import annotations

from pathlib import Path

import pytest

from operator_testkit.image import ImageConfig, ImageNotStored, UnpackedImage
from operator_testkit.nodeagent.env import (
    ConfigError,
    PodFacts,
    downward_file,
    master_service_env,
    service_links,
)
from operator_testkit.nodeagent.failures import ProgramMissing
from operator_testkit.nodeagent.processes import mount_script
from operator_testkit.nodeagent.rootfs import (
    container_environment,
    container_identity,
    path_in_tree,
    root_script,
)
from operator_testkit.nodeagent.runners import (
    REGISTRY,
    ImageRootRunner,
    LaunchContext,
    bound_to_pod,
    image_words,
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


def test_a_program_of_this_machine_sees_the_pods_hosts_file_and_host_name() -> None:
    assert mount_script() == 'mount --bind "$0" /etc/hosts && exec "$@"'
    assert mount_script("op-1") == 'mount --bind "$0" /etc/hosts && hostname op-1 && exec "$@"'


def image_tree(tmp_path: Path) -> Path:
    """A small image tree: Debian's /var/run link, a venv whose python links out absolutely, a user."""
    tree = tmp_path / "tree"
    for directory in ("run", "tmp", "etc", "usr/bin", "opt/suite/bin", "proc", "dev", "sys"):
        (tree / directory).mkdir(parents=True)
    (tree / "var").mkdir()
    (tree / "var/run").symlink_to("/run")
    (tree / "usr/bin/python3").write_text("")
    (tree / "usr/bin/python3").chmod(0o755)
    (tree / "opt/suite/bin/python3").symlink_to("/usr/bin/python3")
    (tree / "opt/suite/bin/typesense-operator").write_text("#!/opt/suite/bin/python3\n")
    (tree / "opt/suite/bin/typesense-operator").chmod(0o755)
    (tree / "etc/passwd").write_text(
        "root:x:0:0:root:/root:/bin/bash\nnonroot:x:65532:65532::/home/nonroot:/x\n"
    )
    (tree / "etc/group").write_text("root:x:0:\nnonroot:x:65532:\n")
    return tree


def test_paths_resolve_inside_the_image_never_on_this_machine(tmp_path: Path) -> None:
    tree = image_tree(tmp_path)
    token = "/var/run/secrets/kubernetes.io/serviceaccount"
    assert path_in_tree(tree, token) == "/run/secrets/kubernetes.io/serviceaccount"
    assert path_in_tree(tree, "/opt/suite/bin/python3") == "/usr/bin/python3"
    assert path_in_tree(tree, "/../../etc/passwd") == "/etc/passwd", "no way out of the root"
    (tree / "etc/out").symlink_to("../../../../../../root")
    assert path_in_tree(tree, "/etc/out/.kube") == "/root/.kube"
    (tree / "loop").symlink_to("/loop")
    with pytest.raises(ConfigError, match="too many levels of symbolic links"):
        path_in_tree(tree, "/loop/x")


IMAGE_USER = "65532:65532"
PASSWD = (
    "root:x:0:0:root:/root:/bin/bash\nnonroot:x:65532:65532::/home/nonroot:/x\napp:x:1000:1001::/app:/x\n"
)
GROUP = "root:x:0:\nnonroot:x:65532:\nstaff:x:50:\n"


@pytest.mark.parametrize(
    ("pod_context", "container_context", "image_user", "expected"),
    [
        ({}, {}, IMAGE_USER, (65532, 65532, ())),
        ({}, {}, "", (0, 0, ())),
        ({}, {}, "app", (1000, 1001, ())),
        ({}, {}, "nonroot:staff", (65532, 50, ())),
        ({"runAsUser": 1000}, {}, IMAGE_USER, (1000, 1001, ())),
        ({"runAsUser": 4242}, {}, IMAGE_USER, (4242, 0, ())),
        ({"runAsUser": 1000, "runAsGroup": 7}, {"runAsUser": 65532}, IMAGE_USER, (65532, 7, ())),
        ({"fsGroup": 2000, "supplementalGroups": [3000, 2000]}, {}, IMAGE_USER, (65532, 65532, (2000, 3000))),
        ({"runAsNonRoot": True}, {}, IMAGE_USER, (65532, 65532, ())),
    ],
)
def test_a_containers_user_is_the_pods_security_context_else_the_images(
    pod_context: dict[str, object],
    container_context: dict[str, object],
    image_user: str,
    expected: tuple[int, int, tuple[int, ...]],
) -> None:
    pod = {"spec": {"securityContext": pod_context}}
    container = {"securityContext": container_context}
    assert container_identity(pod, container, image_user, PASSWD, GROUP) == expected


def test_a_container_that_would_run_as_root_is_refused_under_run_as_non_root() -> None:
    pod = {"spec": {"securityContext": {"runAsNonRoot": True}}}
    with pytest.raises(ConfigError, match="runAsNonRoot and image will run as root"):
        container_identity(pod, {}, "", PASSWD, GROUP)
    with pytest.raises(ConfigError, match="unable to find user ghost"):
        container_identity({}, {}, "ghost", PASSWD, GROUP)


def test_a_containers_environment_is_the_images_then_the_kubelets_then_its_own() -> None:
    image_env = ["PATH=/opt/suite/bin:/usr/bin", "PYTHONUNBUFFERED=1", "MODE=image"]
    kubelet = {"HOSTNAME": "op-1", "KUBERNETES_SERVICE_HOST": "127.100.0.1"}
    env = container_environment(image_env, 65532, PASSWD, kubelet, {"MODE": "pod"})
    assert env == {
        "PATH": "/opt/suite/bin:/usr/bin",
        "PYTHONUNBUFFERED": "1",
        "MODE": "pod",
        "HOME": "/home/nonroot",
        "HOSTNAME": "op-1",
        "KUBERNETES_SERVICE_HOST": "127.100.0.1",
    }
    bare = container_environment([], 4242, PASSWD, {}, {})
    assert bare == {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/"}


def test_service_links_name_every_service_of_the_pods_namespace_unless_turned_off() -> None:
    search = {
        "metadata": {"namespace": "ops", "name": "search-svc"},
        "spec": {"clusterIP": "127.100.0.7", "ports": [{"name": "http", "port": 8108}]},
    }
    headless = {"metadata": {"namespace": "ops", "name": "peers"}, "spec": {"clusterIP": "None", "ports": []}}
    elsewhere = {"metadata": {"namespace": "other", "name": "db"}, "spec": {"clusterIP": "127.100.0.8"}}
    env = service_links([search, headless, elsewhere, KUBERNETES], "ops")
    assert env["SEARCH_SVC_SERVICE_HOST"] == "127.100.0.7"
    assert env["SEARCH_SVC_SERVICE_PORT_HTTP"] == "8108"
    assert env["SEARCH_SVC_PORT_8108_TCP"] == "tcp://127.100.0.7:8108"
    assert env["KUBERNETES_SERVICE_HOST"] == "127.100.0.1"
    assert not any(key.startswith(("PEERS_", "DB_")) for key in env)
    assert service_links([search, KUBERNETES], "ops", enabled=False) == master_service_env([KUBERNETES])


def test_command_replaces_the_entrypoint_and_drops_cmd_args_replace_cmd() -> None:
    config = ImageConfig(entrypoint=("/entry",), cmd=("serve", "--x"))
    assert image_words([], [], config) == ["/entry", "serve", "--x"]
    assert image_words([], ["--y"], config) == ["/entry", "--y"]
    assert image_words(["run"], [], config) == ["run"]
    assert image_words(["run"], ["--y"], config) == ["run", "--y"]


def _context(tmp_path: Path, command: list[str], security: dict[str, object]) -> LaunchContext:
    return LaunchContext(
        container={
            "name": "operator",
            "image": "localhost/operator-suite:0.1.0",
            "securityContext": security,
        },
        pod_ip="127.50.0.9",
        command=command,
        args=["--health-address=0.0.0.0:8081"],
        env={},
        mounts=[Mount("/var/run/secrets/kubernetes.io/serviceaccount", tmp_path, read_only=True)],
        runs_to_completion=False,
        redact=lambda text: text,
        scratch=tmp_path / "scratch",
        pod={"spec": {"securityContext": {"runAsNonRoot": True}}},
        kubelet_env={"HOSTNAME": "op-1"},
        container_env={"LOG": "1"},
    )


def test_the_suites_image_runs_from_its_own_root_as_its_own_user(tmp_path: Path) -> None:
    assert isinstance(runner_for("localhost/operator-suite:0.1.0", REGISTRY), ImageRootRunner)
    assert isinstance(runner_for("127.0.0.1:5000/operator-suite:dev", REGISTRY), ImageRootRunner)
    tree = image_tree(tmp_path)
    config = ImageConfig(
        user=IMAGE_USER,
        env=("PATH=/opt/suite/bin:/usr/bin",),
        cmd=("typesense-operator",),
        working_dir="/tmp",
    )
    asked: list[str] = []

    def store(name: str) -> UnpackedImage:
        asked.append(name)
        return UnpackedImage("sha256:1", tree, config)

    runner = ImageRootRunner(store)
    security = {
        "readOnlyRootFilesystem": True,
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
    }
    launch = runner.launch(_context(tmp_path, ["typesense-operator"], security))
    assert asked == ["localhost/operator-suite:0.1.0"]
    assert launch.argv == ["typesense-operator", "--health-address=127.50.0.9:8081"]
    assert launch.env == {
        "PATH": "/opt/suite/bin:/usr/bin",
        "HOME": "/home/nonroot",
        "HOSTNAME": "op-1",
        "LOG": "1",
    }
    root = launch.root
    assert root is not None
    assert (root.uid, root.gid, root.working_dir) == (65532, 65532, "/tmp")
    assert root.read_only
    assert root.no_new_privileges
    assert root.drop_capabilities
    assert root.mount_point == tmp_path / "scratch" / "rootfs"
    assert (tmp_path / "scratch" / "hostname").read_text() == "op-1\n"
    steps = root_script(root, launch.mounts, tmp_path / "hosts")
    token_at = f"{root.mount_point}/run/secrets/kubernetes.io/serviceaccount"
    assert f"mount --bind {tmp_path} {token_at}" in steps, "mounted where /var/run leads inside the image"
    assert steps.index(f"mount -o remount,bind,ro {token_at}") < steps.index(
        f"mount -o remount,ro {root.mount_point}"
    )
    assert steps[-1] == f"mount -o remount,ro {root.mount_point}", (
        "the root goes read-only once all is mounted"
    )
    assert not any(" /run/secrets" in step or step.endswith(" /etc/hosts") for step in steps), (
        "nothing outside"
    )

    writable = runner.launch(_context(tmp_path, ["/usr/bin/python3"], {}))
    assert writable.root is not None
    assert not writable.root.read_only
    with pytest.raises(ProgramMissing, match="has no program 'monocle-operator'"):
        runner.launch(_context(tmp_path, ["monocle-operator"], {}))

    def missing(name: str) -> UnpackedImage:
        raise ImageNotStored(f"image {name!r} is not in this machine's image store")

    with pytest.raises(ProgramMissing, match="not in this machine's image store"):
        ImageRootRunner(missing).launch(_context(tmp_path, ["typesense-operator"], {}))
