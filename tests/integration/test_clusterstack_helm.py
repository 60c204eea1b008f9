"""Rendering with the real helm (built from its module): upstream's naming, and failures that say why."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from clusterstack_operator.helm import HelmError, helm_template
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
