"""The Cluster Stack operator in the test kit: releases as upstream publishes them.

Releases are built in upstream's layout (one directory per release tag: ``metadata.yaml``,
``hashes.json`` and both charts, named as ``csctl`` names them; see docs/clusterstack.md), with a
real cluster-class chart (``clusterstack_chart/``: a Docker ClusterClass and its template) packaged
by helm, and pushed to an OCI registry by oras-py. These are releases of any tag a test wants, made
without a stack directory; :mod:`.csctl` builds releases from a stack exactly as csctl does.

Its sandbox entry and its journey build on this module: :mod:`.clusterstack_sandbox`,
:mod:`.clusterstack_journey`.
"""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from clusterstack_operator.releases.versions import ReleaseName
from operator_testkit.clusterstack_tools import helm_environment
from operator_testkit.controlplane import ControlPlane
from operator_testkit.registry import RunningRegistry

__all__ = [
    "ONE_STAGE",
    "capi_cluster",
    "dependency_chart",
    "dependency_on",
    "kubeconfig_secret",
    "package_cluster_class",
    "publish_release",
    "push_release",
]

CLUSTER_CLASS_CHART = Path(__file__).parent / "clusterstack_chart"
CLUSTER_ADDON_CHART = Path(__file__).parent / "clusterstack_addon_chart"
HOOKS_ADDON_CHART = Path(__file__).parent / "clusterstack_hooks_chart"
"""A cluster-addon chart with Helm hooks of each shape (its values: refusedPreInstall, jobCommand)."""
WEBHOOK_ADDON_CHART = Path(__file__).parent / "clusterstack_webhook_chart"
"""A cluster-addon chart shaped as ingress-nginx's admission webhook: hook Jobs make its certificate
Secret and patch the webhook configuration's caBundle (its values: jobImage, serverImage)."""
STAGED_ADDONS = Path(__file__).parent / "clusterstack_staged_addons"
"""A staged release's addons: clusteraddon.yaml, and one chart folder per stage."""
CLUSTER_ADDON_VALUES = """\
# Rendered over the Cluster by the operator, as upstream's cluster-addon-values.yaml is.
values: |
  host: {{ .Cluster.spec.controlPlaneEndpoint.host }}
  infraCluster: {{ with .InfraCluster }}{{ .kind }}/{{ .metadata.name }}{{ end }}
"""

ONE_STAGE = """\
apiVersion: clusteraddonconfig.x-k8s.io/v1alpha1
clusterAddonVersion: clusteraddons.clusterstack.x-k8s.io/v1alpha1
addonStages:
  AfterControlPlaneInitialized:
    - name: stage-one
      action: apply
"""
"""A clusteraddon.yaml of one stage (stage-one) for the first hook, without conditions."""


def dependency_chart(directory: Path) -> Path:
    """A chart (``addon-dependency`` 0.1.0) that a stage chart may name as a dependency: it renders a
    ConfigMap ``from-dependency`` in the release's namespace, saying the chart's name."""
    chart = directory / "addon-dependency"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: addon-dependency\nversion: 0.1.0\n")
    (chart / "templates" / "configmap.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: from-dependency\n"
        "  namespace: {{ .Release.Namespace }}\ndata:\n  chart: {{ .Chart.Name }}\n"
    )
    return chart


def dependency_on(chart: Path, repository: str) -> dict[str, str]:
    """A Chart.yaml ``dependencies`` entry naming ``chart`` (:func:`dependency_chart`) in ``repository``."""
    return {"name": chart.name, "version": "0.1.0", "repository": repository}


METADATA = """\
apiVersion: metadata.clusterstack.x-k8s.io/v1alpha1
versions:
  clusterStack: {version}
  kubernetes: v1.30.10
  components:
    clusterAddon: {addon}
    nodeImage: v1
"""


def publish_release(
    root: Path,
    tag: str,
    *,
    addon_version: str = "v1",
    metadata: str | None = None,
    with_addon_chart: bool = True,
    published_at: float | None = None,
    helm: Path | None = None,
    cluster_api: str = "v1beta2",
    staged: bool = False,
    stages: str | None = None,
    extra_objects: list[dict[str, Any]] | None = None,
    stage_dependencies: Mapping[str, list[dict[str, Any]]] | None = None,
    stage_values: Mapping[str, dict[str, Any]] | None = None,
    addon_chart: Path = CLUSTER_ADDON_CHART,
    addon_values: dict[str, Any] | None = None,
) -> tuple[ReleaseName, Path]:
    """Write release ``tag`` under ``root``. With ``helm``, its cluster-class chart is the real chart
    (``clusterstack_chart/``) packaged for it, rendering Cluster API ``cluster_api`` objects; otherwise
    charts of random bytes (only their presence is checked). ``staged``: its addons are those of
    ``clusterstack_staged_addons/``, as upstream publishes staged addons (``clusteraddon.yaml``, and
    a gzipped tar of one chart folder per stage); ``stages``, another clusteraddon.yaml for them;
    ``extra_objects``, objects the cluster-class chart renders besides its own (with ``helm``);
    ``stage_dependencies``, per stage, the dependencies its Chart.yaml declares, with no ``charts/``
    folder (as scs2's stages: fetched from their repository when rendered); ``stage_values``, per
    stage, values over the stage chart's own values.yaml. ``addon_chart`` (with
    ``helm``): the cluster-addon chart's source, packaged with ``addon_values`` as its values."""
    release = ReleaseName.parse(tag)
    directory = root / tag
    directory.mkdir(parents=True)
    text = (
        metadata
        if metadata is not None
        else METADATA.format(version=release.version.dot, addon=addon_version)
    )
    (directory / "metadata.yaml").write_text(text)
    (directory / "hashes.json").write_text("{}")
    if helm is not None:
        package_cluster_class(helm, release, directory, cluster_api=cluster_api, extra_objects=extra_objects)
    else:
        (directory / release.cluster_class_chart).write_bytes(os.urandom(4096))
    if staged:
        _archive_stages(
            directory / release.cluster_addon_chart(addon_version),
            addon_version,
            stage_dependencies or {},
            stage_values or {},
        )
        if stages is None:
            shutil.copy(STAGED_ADDONS / "clusteraddon.yaml", directory / "clusteraddon.yaml")
        else:
            (directory / "clusteraddon.yaml").write_text(stages)
    elif with_addon_chart and helm is not None:
        name = f"{release.stack}-cluster-addon"
        _package(helm, addon_chart, name, addon_version, addon_values or {}, directory)
        (directory / "cluster-addon-values.yaml").write_text(CLUSTER_ADDON_VALUES)
    elif with_addon_chart:
        (directory / release.cluster_addon_chart(addon_version)).write_bytes(os.urandom(4096))
    if published_at is not None:
        os.utime(directory, (published_at, published_at))
    return release, directory


def _archive_stages(
    archive: Path,
    addon_version: str,
    dependencies: Mapping[str, list[dict[str, Any]]],
    values: Mapping[str, dict[str, Any]],
) -> None:
    """A gzipped tar of the stage charts' folders, as csctl archives staged addons; each chart's
    version is the addon version (so that a chart can render what only that version has), its
    Chart.yaml declares the stage's ``dependencies``, and its values.yaml has the stage's ``values``
    over its own."""
    with tempfile.TemporaryDirectory(prefix="stages-") as scratch:
        stages = Path(scratch) / "stages"
        shutil.copytree(STAGED_ADDONS, stages)
        with tarfile.open(archive, "w:gz") as tar:
            for stage in sorted(p for p in stages.iterdir() if p.is_dir()):
                chart = yaml.safe_load((stage / "Chart.yaml").read_text())
                chart["version"] = addon_version
                if stage.name in dependencies:
                    chart["dependencies"] = dependencies[stage.name]
                (stage / "Chart.yaml").write_text(yaml.safe_dump(chart))
                if stage.name in values:
                    _values_over(stage, values[stage.name])
                tar.add(stage, arcname=stage.name)


def package_cluster_class(
    helm: Path,
    release: ReleaseName,
    into: Path,
    *,
    cluster_api: str = "v1beta2",
    extra_objects: list[dict[str, Any]] | None = None,
) -> Path:
    """``helm package`` the cluster-class chart as the release's: ``<stack>-cluster-class``,
    version the release's in dot form, as upstream's ``csctl`` packages it; its objects in Cluster API
    ``cluster_api`` (v1beta2, or v1beta1 for a management cluster older than Cluster API v1.11), and
    ``extra_objects`` as they are."""
    _package(
        helm,
        CLUSTER_CLASS_CHART,
        f"{release.stack}-cluster-class",
        release.version.dot,
        {"clusterApiVersion": cluster_api, "extraObjects": extra_objects or []},
        into,
    )
    packaged = into / release.cluster_class_chart
    assert packaged.is_file(), f"helm package wrote no {packaged.name}"
    return packaged


def _values_over(chart: Path, values: Mapping[str, Any]) -> None:
    """Write ``values`` over the chart folder's own values.yaml (made if it has none)."""
    defaults = chart / "values.yaml"
    own = (yaml.safe_load(defaults.read_text()) if defaults.exists() else None) or {}
    defaults.write_text(yaml.safe_dump({**own, **values}))


def _package(helm: Path, source: Path, name: str, version: str, values: dict[str, Any], into: Path) -> None:
    """``helm package`` a copy of the chart at ``source`` as ``name`` ``version``, with ``values`` over
    its own values.yaml."""
    with tempfile.TemporaryDirectory(prefix="chart-") as scratch:
        chart = Path(scratch) / "chart"
        shutil.copytree(source, chart)
        metadata = yaml.safe_load((chart / "Chart.yaml").read_text())
        metadata |= {"name": name, "version": version}
        (chart / "Chart.yaml").write_text(yaml.safe_dump(metadata))
        if values:
            _values_over(chart, values)
        subprocess.run(
            [str(helm), "package", str(chart), "--destination", str(into)],
            check=True,
            capture_output=True,
            env=helm_environment(Path(scratch) / "helm"),
        )


def capi_cluster(
    name: str, namespace: str, class_name: str, *, version: str = "v1beta2", endpoint_port: int | None = None
) -> dict[str, Any]:
    """A Cluster API Cluster on ClusterClass ``class_name``, written in ``version`` (v1beta2 names its
    class in ``topology.classRef.name``, v1beta1 in ``topology.class``); with ``endpoint_port``, the
    control-plane endpoint Cluster API would set (on loopback)."""
    topology: dict[str, Any] = (
        {"classRef": {"name": class_name}, "version": "v1.30.10"}
        if version == "v1beta2"
        else {"class": class_name, "version": "v1.30.10"}
    )
    spec: dict[str, Any] = {"topology": topology}
    if endpoint_port is not None:
        spec["controlPlaneEndpoint"] = {"host": "127.0.0.1", "port": endpoint_port}
    return {
        "apiVersion": f"cluster.x-k8s.io/{version}",
        "kind": "Cluster",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def kubeconfig_secret(cluster_name: str, namespace: str, plane: ControlPlane) -> dict[str, Any]:
    """The Secret Cluster API writes for a workload cluster once its control plane has certificates:
    ``<cluster>-kubeconfig``, the kubeconfig under "value", labelled with the Cluster's name (here the
    admin kubeconfig of ``plane``, the control plane that stands for the workload cluster)."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": f"{cluster_name}-kubeconfig",
            "namespace": namespace,
            "labels": {"cluster.x-k8s.io/cluster-name": cluster_name},
        },
        "type": "cluster.x-k8s.io/secret",
        "data": {"value": base64.b64encode(plane.kubeconfig.read_bytes()).decode()},
    }


def push_release(registry: RunningRegistry, directory: Path, repository: str) -> None:
    """Push a release directory as csctl publishes one: one layer per file, titled by its name, tagged
    with the release (dash form), with oras-py (another client than ours, so that both agree on the
    format, not only with themselves)."""
    client = registry.oras_client()
    here = Path.cwd()
    os.chdir(directory)  # oras-py titles each layer by the path it is given
    try:
        client.push(
            target=f"{registry.host}/{repository}:{directory.name}",
            files=sorted(p.name for p in directory.iterdir()),
            disable_path_validation=True,
        )
    finally:
        os.chdir(here)
