"""The Cluster Stack tests' tools: the pinned helm, a real OCI registry, and the CRDs of Cluster API and
its Docker provider on the real control plane."""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

import httpx
import pytest
import yaml

from operator_testkit.clusterstack_tools import ClusterStackTools, helm_environment
from operator_testkit.errors import ControlPlaneError
from operator_testkit.fixtures import Kubectl
from operator_testkit.registry import RunningRegistry, running_registry

_CHART = {"apiVersion": "v2", "name": "hello", "version": "0.1.0", "kubeVersion": ">=1.30.0-0"}
_TEMPLATE = """apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-hello
data:
  kubeVersion: {{ .Capabilities.KubeVersion.Version | quote }}
"""


def _helm(
    clusterstack_tools: ClusterStackTools, home: Path, *arguments: str
) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [str(clusterstack_tools.helm), *arguments],
        env=helm_environment(home),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, f"helm {' '.join(arguments)}:\n{result.stdout}{result.stderr}"
    return result


def _packaged_chart(clusterstack_tools: ClusterStackTools, tmp_path: Path) -> Path:
    chart = tmp_path / "hello"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text(yaml.safe_dump(_CHART))
    (chart / "templates" / "configmap.yaml").write_text(_TEMPLATE)
    _helm(
        clusterstack_tools,
        tmp_path / "helm",
        "package",
        str(chart),
        "--destination",
        str(tmp_path / "packaged"),
    )
    return tmp_path / "packaged" / "hello-0.1.0.tgz"


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _alive(pid: int) -> bool:
    return Path(f"/proc/{pid}").exists()


def test_helm_reports_the_pinned_version(clusterstack_tools: ClusterStackTools, tmp_path: Path) -> None:
    assert clusterstack_tools.pins.helm == "v3.20.2"
    assert (
        _helm(clusterstack_tools, tmp_path, "version", "--template", "{{ .Version }}").stdout
        == clusterstack_tools.pins.helm
    )
    assert 'GitTreeState:"clean"' in _helm(clusterstack_tools, tmp_path, "version").stdout


def test_helm_renders_for_the_kubernetes_version_of_its_client_go(
    clusterstack_tools: ClusterStackTools, tmp_path: Path
) -> None:
    # Without the build's k8sVersion stamps, helm would claim Kubernetes v1.20 and refuse the chart.
    rendered = yaml.safe_load(
        _helm(
            clusterstack_tools,
            tmp_path,
            "template",
            "demo",
            str(_packaged_chart(clusterstack_tools, tmp_path)),
        ).stdout
    )
    minor = int(clusterstack_tools.pins.helm_client_go.split(".")[1])
    assert rendered["data"]["kubeVersion"] == f"v1.{minor}.0"


def test_a_chart_pushed_to_the_registry_is_pulled_back_unchanged(
    clusterstack_tools: ClusterStackTools, oci_registry: RunningRegistry, tmp_path: Path
) -> None:
    registry = oci_registry
    packaged = _packaged_chart(clusterstack_tools, tmp_path)
    home = tmp_path / "helm"
    pushed = _helm(clusterstack_tools, home, "push", str(packaged), f"{registry.oci}/charts", "--plain-http")
    assert f"Pushed: {registry.host}/charts/hello:0.1.0" in pushed.stderr  # helm reports on stderr

    pulled = tmp_path / "pulled"
    pulled.mkdir()  # helm pull -d wants it to exist
    _helm(
        clusterstack_tools,
        home,
        "pull",
        f"{registry.oci}/charts/hello",
        "--version",
        "0.1.0",
        "--plain-http",
        "--destination",
        str(pulled),
    )
    assert _sha256(pulled / "hello-0.1.0.tgz") == _sha256(packaged)

    catalog = httpx.get(f"{registry.url}/v2/_catalog", trust_env=False).json()
    assert "charts/hello" in catalog["repositories"]
    tags = httpx.get(f"{registry.url}/v2/charts/hello/tags/list", trust_env=False).json()
    assert tags == {"name": "charts/hello", "tags": ["0.1.0"]}


def test_a_registry_over_https_with_its_own_ca(clusterstack_tools: ClusterStackTools, tmp_path: Path) -> None:
    packaged = _packaged_chart(clusterstack_tools, tmp_path)
    with running_registry(
        tmp_path / "tls-registry", binary=clusterstack_tools.registry, tls=True
    ) as registry:
        assert registry.url.startswith("https://")
        assert registry.ca_cert is not None
        _helm(
            clusterstack_tools,
            tmp_path / "helm",
            "push",
            str(packaged),
            f"{registry.oci}/charts",
            "--ca-file",
            str(registry.ca_cert),
        )
        catalog = httpx.get(
            f"{registry.url}/v2/_catalog", verify=registry.ssl_context(), trust_env=False
        ).json()
        assert catalog == {"repositories": ["charts/hello"]}


def _fail_inside_a_registry(clusterstack_tools: ClusterStackTools, seen: list[RunningRegistry]) -> None:
    with running_registry(binary=clusterstack_tools.registry) as registry:
        seen.append(registry)
        assert _alive(registry.pid)
        raise RuntimeError("the test's own failure")


def test_the_registry_stops_when_its_block_raises(clusterstack_tools: ClusterStackTools) -> None:
    seen: list[RunningRegistry] = []
    with pytest.raises(RuntimeError, match="the test's own failure"):
        _fail_inside_a_registry(clusterstack_tools, seen)
    [registry] = seen
    assert not _alive(registry.pid)
    assert not registry.directory.exists()  # its temporary directory is gone too


def test_a_registry_that_cannot_start_is_a_clear_error_with_its_log(tmp_path: Path) -> None:
    broken = tmp_path / "registry"
    broken.write_text("#!/bin/sh\necho 'configuration error: no such storage driver' >&2\nexit 3\n")
    broken.chmod(0o755)
    with pytest.raises(ControlPlaneError) as raised, running_registry(tmp_path / "run", binary=broken):
        pytest.fail("the block must not run")
    message = str(raised.value)
    assert "exited with code 3" in message
    assert "no such storage driver" in message


def _crd_names(directory: Path) -> list[str]:
    names = []
    for path in sorted(directory.glob("*.yaml")):
        names.extend(d["metadata"]["name"] for d in yaml.safe_load_all(path.read_text()) if d)
    return names


def _install(kubectl: Kubectl, directory: Path) -> list[str]:
    names = _crd_names(directory)
    assert names, f"no CRDs in {directory}"
    # Server-side: clusterclasses' CRD is too big for client-side apply's last-applied annotation.
    kubectl(
        "apply",
        "--server-side",
        "--force-conflicts",
        "--field-manager=clusterstack-tools-test",
        "-f",
        str(directory),
    )
    kubectl("wait", "--for=condition=Established", "--timeout=60s", *(f"crd/{name}" for name in names))
    return names


def test_the_cluster_api_crds_apply_to_the_control_plane(
    clusterstack_tools: ClusterStackTools, kubectl: Kubectl
) -> None:
    names = _install(kubectl, clusterstack_tools.capi_crds)
    assert "clusters.cluster.x-k8s.io" in names
    assert "clusterclasses.cluster.x-k8s.io" in names
    listed = kubectl("get", "clusters.cluster.x-k8s.io", "-A")
    assert listed.returncode == 0
    served = kubectl(
        "get", "crd", "clusters.cluster.x-k8s.io", "-o", "jsonpath={.spec.versions[?(@.storage==true)].name}"
    )
    assert served.stdout == "v1beta2"

    cluster = {
        "apiVersion": "cluster.x-k8s.io/v1beta2",
        "kind": "Cluster",
        "metadata": {"name": "tools-test", "namespace": "default"},
        "spec": {"topology": {"classRef": {"name": "some-class"}, "version": "v1.35.4"}},
    }
    kubectl(
        "apply",
        "--server-side",
        "--field-manager=clusterstack-tools-test",
        "-f",
        "-",
        input_text=yaml.safe_dump(cluster),
    )
    try:
        class_name = kubectl(
            "get",
            "clusters.v1beta2.cluster.x-k8s.io",
            "tools-test",
            "-n",
            "default",
            "-o",
            "jsonpath={.spec.topology.classRef.name}",
        )
        assert class_name.stdout == "some-class"
    finally:
        kubectl("delete", "clusters.cluster.x-k8s.io", "tools-test", "-n", "default", "--wait=false")


def test_the_docker_provider_template_crds_apply_to_the_control_plane(
    clusterstack_tools: ClusterStackTools, kubectl: Kubectl
) -> None:
    names = _install(kubectl, clusterstack_tools.capd_crds)
    for template in ("dockerclustertemplates", "dockermachinetemplates"):
        assert f"{template}.infrastructure.cluster.x-k8s.io" in names
        assert kubectl("get", f"{template}.infrastructure.cluster.x-k8s.io", "-A").returncode == 0


def test_nothing_was_built_inside_the_work_tree(clusterstack_tools: ClusterStackTools) -> None:
    checkout = Path(__file__).resolve().parents[2]
    for path in (
        clusterstack_tools.helm,
        clusterstack_tools.registry,
        clusterstack_tools.capi_crds,
        clusterstack_tools.capd_crds,
        clusterstack_tools.orc_crds,
    ):
        assert not path.resolve().is_relative_to(checkout), path
    assert os.access(clusterstack_tools.helm, os.X_OK)
    assert os.access(clusterstack_tools.registry, os.X_OK)
