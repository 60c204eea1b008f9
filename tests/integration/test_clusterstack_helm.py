"""Rendering with the real helm (built from its module): upstream's naming, and failures that say why."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from clusterstack_operator.helm import HelmError, helm_template, render_values_template
from clusterstack_operator.releases.versions import ReleaseName
from clusterstack_operator.resources import rendered_objects
from operator_testkit.clusterstack_tools import ClusterStackTools, helm_environment

CLUSTER_CLASS = """\
apiVersion: cluster.x-k8s.io/v1beta1
kind: ClusterClass
metadata:
  name: {{ .Release.Name }}-{{ .Chart.Version }}
spec:
  infrastructure:
    ref:
      apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
      kind: DockerClusterTemplate
      name: {{ .Release.Name }}-{{ .Chart.Version }}-cluster
"""


def package(
    clusterstack_tools: ClusterStackTools, tmp_path: Path, release: ReleaseName, template: str = CLUSTER_CLASS
) -> Path:
    """A cluster-class chart packaged as csctl does: named <stack>-cluster-class, versioned as the stack."""
    chart = tmp_path / "cluster-class"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text(
        yaml.safe_dump(
            {"apiVersion": "v2", "name": f"{release.stack}-cluster-class", "version": release.version.dot}
        )
    )
    (chart / "templates" / "cluster-class.yaml").write_text(template)
    subprocess.run(
        [str(clusterstack_tools.helm), "package", str(chart), "--destination", str(tmp_path)],
        env=helm_environment(tmp_path / "helm"),
        check=True,
        capture_output=True,
    )
    packaged = tmp_path / release.cluster_class_chart
    assert packaged.exists(), sorted(p.name for p in tmp_path.iterdir())
    return packaged


@pytest.mark.parametrize("tag", ["docker-scs-1-30-v1", "docker-scs-1-30-v0-sha-hdl6pjy"])
async def test_a_cluster_class_is_named_as_upstream_stacks_name_it(
    clusterstack_tools: ClusterStackTools, tmp_path: Path, tag: str
) -> None:
    release = ReleaseName.parse(tag)
    chart = package(clusterstack_tools, tmp_path, release)
    rendered = await helm_template(
        str(clusterstack_tools.helm), chart, release.stack, "cluster", home=tmp_path / "home"
    )
    (cluster_class,) = rendered_objects(rendered, "cluster")
    assert cluster_class["metadata"] == {"name": release.cluster_class, "namespace": "cluster"}


async def test_a_broken_chart_is_refused_in_helms_words(
    clusterstack_tools: ClusterStackTools, tmp_path: Path
) -> None:
    release = ReleaseName.parse("docker-scs-1-30-v1")
    chart = package(clusterstack_tools, tmp_path, release, template="kind: {{ .Values.missing.field }}\n")
    with pytest.raises(
        HelmError, match=r"helm template of docker-scs-1-30-cluster-class-v1\.tgz failed: .*nil pointer"
    ):
        await helm_template(
            str(clusterstack_tools.helm), chart, release.stack, "cluster", home=tmp_path / "home"
        )


async def test_a_missing_helm_says_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(HelmError, match="install helm 3, or point OPERATOR_SUITE_HELM at it"):
        await helm_template(str(tmp_path / "no-helm"), tmp_path, "x", "y", home=tmp_path / "home")


CLUSTER = {
    "apiVersion": "cluster.x-k8s.io/v1beta2",
    "kind": "Cluster",
    "metadata": {"name": "workload", "namespace": "cluster"},
    "spec": {"controlPlaneEndpoint": {"host": "127.0.0.1", "port": 6443}},
}


@pytest.mark.parametrize(
    "template",
    [
        # upstream's example, and the form whose values are a string under "values"
        "metrics-server:\n  host: {{ .Cluster.spec.controlPlaneEndpoint.host }}\n"
        "  port: {{ .Cluster.spec.controlPlaneEndpoint.port }}\n"
        "  cluster: {{ .Cluster.metadata.name | upper }}\n",
        "values: |\n  metrics-server:\n    host: {{ .Cluster.spec.controlPlaneEndpoint.host }}\n"
        "    port: {{ .Cluster.spec.controlPlaneEndpoint.port }}\n"
        "    cluster: {{ .Cluster.metadata.name | upper }}\n",
    ],
)
async def test_cluster_addon_values_are_a_go_template_over_the_cluster(
    clusterstack_tools: ClusterStackTools, tmp_path: Path, template: str
) -> None:
    rendered = await render_values_template(
        str(clusterstack_tools.helm), template, {"Cluster": CLUSTER}, home=tmp_path / "home"
    )
    assert yaml.safe_load(rendered) == {
        "metrics-server": {"host": "127.0.0.1", "port": 6443, "cluster": "WORKLOAD"}
    }


async def test_a_values_template_that_does_not_parse_is_refused_in_helms_words(
    clusterstack_tools: ClusterStackTools, tmp_path: Path
) -> None:
    with pytest.raises(HelmError, match=r"cluster-addon-values\.yaml failed: .*unexpected"):
        await render_values_template(
            str(clusterstack_tools.helm), "host: {{ .Cluster.spec. }}\n", {"Cluster": CLUSTER}, home=tmp_path
        )


async def test_an_addon_chart_gets_values_on_stdin_its_crds_and_the_kubernetes_version(
    clusterstack_tools: ClusterStackTools, tmp_path: Path
) -> None:
    chart = tmp_path / "metrics-server"
    (chart / "templates").mkdir(parents=True)
    (chart / "crds").mkdir()
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: metrics-server\nversion: 1.0.0\n")
    (chart / "crds" / "widgets.yaml").write_text(
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\n"
        "metadata: {name: widgets.example.com}\n"
    )
    (chart / "templates" / "cm.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: addon}\n"
        "data: {host: '{{ .Values.host }}', kube: '{{ .Capabilities.KubeVersion.Version }}'}\n"
    )
    rendered = await helm_template(
        str(clusterstack_tools.helm),
        chart,
        "cluster-addon",
        "kube-system",
        home=tmp_path / "home",
        values="host: 127.0.0.1\n",
        include_crds=True,
        kube_version="v1.30.10",
    )
    objects = {o["kind"]: o for o in yaml.safe_load_all(rendered) if o}
    assert objects["ConfigMap"]["data"] == {"host": "127.0.0.1", "kube": "v1.30.10"}
    assert objects["CustomResourceDefinition"]["metadata"]["name"] == "widgets.example.com"
