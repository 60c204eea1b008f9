"""Cluster stacks of our own content, laid out as upstream's cluster-stacks repository lays out its
real ones, for :mod:`.csctl` to build.

- :func:`docker_scs`, shaped like ``providers/docker/scs``: staged addons (``clusteraddon.yaml``,
  stages ``cni`` and ``metrics-server``) whose charts vendor their dependency (``Chart.lock`` and
  ``charts/*.tgz``), a leftover ``cluster-addon-values.yaml``, a v1beta1 ClusterClass.
- :func:`openstack_scs2`, shaped like ``providers/openstack/scs2``: four stages (``cni``,
  ``metrics-server``, ``csi``, ``ccm``) whose charts declare a dependency in a chart repository and
  vendor nothing (fetched when rendered, as upstream renders them), ``overwrite.yaml`` files rendered
  over the Cluster, and an ORC ``Image`` in the class (as the older ``openstack/scs`` renders it; scs2
  keeps it beside the class, in ``image.yaml``).
- :func:`single_chart_stack`, shaped like csctl's own test stack ``docker/ferrol``: one addon chart
  and ``cluster-addon-values.yaml`` (upstream's first convention).

The addons are ConfigMaps, not cilium or a cloud controller: what is tested is the format and the
journey, not those programs. Every file is text or built byte-for-byte the same each time (the
vendored chart archives too), so a stack's hash is the same on every run for the same arguments.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import shutil
import tarfile
from pathlib import Path
from typing import Any

import yaml

__all__ = [
    "DEPENDENCIES",
    "dependency_chart",
    "dependency_package",
    "docker_scs",
    "openstack_scs2",
    "orc_image",
    "single_chart_stack",
]

CLUSTER_CLASS_CHART = Path(__file__).parent / "clusterstack_chart"
KUBERNETES = "v1.30.10"

HELMIGNORE = """\
# Patterns helm leaves out when it packages the chart.
.DS_Store
*.swp
*.bak
"""

DEPENDENCIES = {
    "cni": ("cni-plugin", "1.16.6"),
    "metrics-server": ("metrics-agent", "3.12.2"),
    "csi": ("volume-driver", "2.34.3"),
    "ccm": ("cloud-controller", "2.34.2"),
}
"""Per stage, the chart it depends on (name, version): our stand-ins for cilium, metrics-server,
the cinder CSI driver and the OpenStack cloud controller manager."""

_DEPENDENCY_TEMPLATE = """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Chart.Name }}
  namespace: {{ .Release.Namespace }}
data:
  chart: {{ .Chart.Name }}-{{ .Chart.Version }}
  cluster: {{ .Values.clusterName | default "" | quote }}
  setting: {{ .Values.setting | default "" | quote }}
"""


def _dependency_files(name: str, version: str) -> dict[str, str]:
    """The chart ``name`` ``version``: a ConfigMap named after it, saying its version and values."""
    return {
        "Chart.yaml": f"apiVersion: v2\nname: {name}\nversion: {version}\n",
        "values.yaml": 'clusterName: ""\nsetting: ""\n',
        "templates/configmap.yaml": _DEPENDENCY_TEMPLATE,
    }


def dependency_chart(directory: Path, name: str, version: str) -> Path:
    """The chart ``name`` ``version`` of :data:`DEPENDENCIES` as a folder under ``directory``, for a
    chart repository to serve."""
    chart = directory / name
    for path, text in _dependency_files(name, version).items():
        (chart / path).parent.mkdir(parents=True, exist_ok=True)
        (chart / path).write_text(text)
    return chart


def dependency_package(name: str, version: str) -> tuple[str, bytes]:
    """The chart ``name`` ``version`` packaged, as ``<name>-<version>.tgz`` and its bytes: the same
    bytes every time (fixed times and owners), so that a stack vendoring it hashes the same on every
    run."""
    raw = io.BytesIO()
    with (
        gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as packed,
        tarfile.open(fileobj=packed, mode="w", format=tarfile.USTAR_FORMAT) as tar,
    ):
        for path, text in _dependency_files(name, version).items():
            data = text.encode()
            info = tarfile.TarInfo(f"{name}/{path}")
            info.size, info.mode, info.mtime = len(data), 0o644, 0
            tar.addfile(info, io.BytesIO(data))
    return f"{name}-{version}.tgz", raw.getvalue()


def _dependency_entry(stage: str, repository: str) -> dict[str, str]:
    name, version = DEPENDENCIES[stage]
    return {"alias": name, "name": name, "repository": repository, "version": version}


def _chart_lock(dependencies: list[dict[str, str]]) -> str:
    """The Chart.lock ``helm dependency update`` writes for ``dependencies``, with helm's digest
    (sha256 of the JSON of the requested and the locked dependencies) and a fixed time."""
    locked = [
        {"name": d["name"], "version": d["version"], "repository": d["repository"]} for d in dependencies
    ]
    requested = [
        {"name": d["name"], "version": d["version"], "repository": d["repository"], "alias": d["alias"]}
        for d in dependencies
    ]
    digest = hashlib.sha256(json.dumps([requested, locked], separators=(",", ":")).encode()).hexdigest()
    return yaml.safe_dump(
        {"dependencies": locked, "digest": f"sha256:{digest}", "generated": "2026-01-01T00:00:00Z"},
        sort_keys=False,
    )


def _stage_chart(folder: Path, stage: str, repository: str, *, vendored: bool, overwrite: bool) -> None:
    """One stage's chart folder, as upstream's: an upper-case name, version v1, one aliased
    dependency; vendored (Chart.lock and charts/) or not; an overwrite.yaml rendered over the
    Cluster or not."""
    folder.mkdir(parents=True)
    dependency = _dependency_entry(stage, repository)
    chart = {
        "apiVersion": "v2",
        "type": "application",
        "description": f"Our {stage} stage",
        "name": stage.upper(),
        "version": "v1",
        "dependencies": [dependency],
    }
    (folder / "Chart.yaml").write_text(yaml.safe_dump(chart, sort_keys=False))
    (folder / "values.yaml").write_text(
        yaml.safe_dump({dependency["alias"]: {"setting": f"{stage}-default"}})
    )
    if overwrite:
        (folder / "overwrite.yaml").write_text(
            f"values: |\n  {dependency['alias']}:\n    clusterName: {{{{ .Cluster.metadata.name }}}}\n"
        )
    if vendored:
        (folder / ".helmignore").write_text(HELMIGNORE)
        (folder / "Chart.lock").write_text(_chart_lock([dependency]))
        file_name, data = dependency_package(dependency["name"], dependency["version"])
        (folder / "charts").mkdir()
        (folder / "charts" / file_name).write_bytes(data)


def _clusteraddon_yaml(stages: list[str]) -> str:
    hooks = {
        hook: [{"name": stage, "action": "apply"} for stage in stages]
        for hook in ("AfterControlPlaneInitialized", "BeforeClusterUpgrade")
    }
    document = {
        "apiVersion": "clusteraddonconfig.x-k8s.io/v1alpha1",
        "clusterAddonVersion": "clusteraddons.clusterstack.x-k8s.io/v1alpha1",
        "addonStages": hooks,
    }
    return yaml.safe_dump(document, sort_keys=False)


def _csctl_yaml(provider: str, name: str) -> str:
    return yaml.safe_dump(
        {
            "apiVersion": "csctl.clusterstack.x-k8s.io/v1alpha1",
            "config": {
                "kubernetesVersion": KUBERNETES,
                "clusterStackName": name,
                "provider": {
                    "type": provider,
                    "apiVersion": f"{provider}.csctl.clusterstack.x-k8s.io/v1alpha1",
                },
            },
        },
        sort_keys=False,
    )


def _cluster_class(
    folder: Path, provider: str, name: str, extra_objects: list[dict[str, Any]], cluster_api: str
) -> None:
    """The cluster-class chart: the test kit's (a ClusterClass and its DockerClusterTemplate) in
    Cluster API ``cluster_api`` (upstream's stacks are v1beta1), named as CSO looks for it
    (``<provider>-<name>-1-30-cluster-class``), version v1 (csctl sets it); its values name the
    addon version through csctl's ``<< >>`` templating."""
    shutil.copytree(CLUSTER_CLASS_CHART, folder)
    chart = yaml.safe_load((folder / "Chart.yaml").read_text())
    chart |= {"name": f"{provider}-{name}-1-30-cluster-class", "version": "v1"}
    (folder / "Chart.yaml").write_text(yaml.safe_dump(chart, sort_keys=False))
    (folder / ".helmignore").write_text(HELMIGNORE)
    values = {"clusterApiVersion": cluster_api, "extraObjects": extra_objects}
    (folder / "values.yaml").write_text(
        yaml.safe_dump(values, sort_keys=False) + "# Filled in by csctl when it builds the release.\n"
        "addonVersion: << .ClusterAddonVersion >>\n"
    )


def _stack(root: Path, provider: str, name: str) -> Path:
    stack = root / "providers" / provider / name
    stack.mkdir(parents=True)
    (stack / "csctl.yaml").write_text(_csctl_yaml(provider, name))
    (stack / "README.md").write_text(
        f"# {provider}/{name}\n\nA cluster stack of the test kit's, in upstream's layout.\n"
    )
    return stack


def docker_scs(root: Path, dependency_repository: str, *, name: str = "scs") -> Path:
    """A stack shaped like upstream's ``providers/docker/scs`` under ``root`` (its path returned):
    staged addons whose charts vendor their dependency (named in ``dependency_repository``, never
    fetched: it is vendored)."""
    stack = _stack(root, "docker", name)
    stages = ["cni", "metrics-server"]
    (stack / "clusteraddon.yaml").write_text(_clusteraddon_yaml(stages))
    (stack / "cluster-addon-values.yaml").write_text(
        "# Left over from the first convention, as upstream's.\nvalues: {}\n"
    )
    (stack / "cluster-addon").mkdir()
    (stack / "cluster-addon" / ".helmignore").write_text(HELMIGNORE)
    for stage in stages:
        _stage_chart(
            stack / "cluster-addon" / stage, stage, dependency_repository, vendored=True, overwrite=False
        )
    _cluster_class(stack / "cluster-class", "docker", name, [], "v1beta1")
    return stack


def orc_image(name: str) -> dict[str, Any]:
    """An ORC ``Image`` (``openstack.k-orc.cloud/v1alpha1``) as upstream's openstack/scs class
    renders one: imported from a URL, managed by ORC, with the cloud credentials' Secret."""
    return {
        "apiVersion": "openstack.k-orc.cloud/v1alpha1",
        "kind": "Image",
        "metadata": {"name": name},
        "spec": {
            "cloudCredentialsRef": {"cloudName": "openstack", "secretName": "openstack"},
            "managementPolicy": "managed",
            "resource": {
                "name": name,
                "content": {
                    "diskFormat": "qcow2",
                    "download": {"url": f"https://images.invalid/{name}.qcow2"},
                },
            },
        },
    }


def openstack_scs2(
    root: Path, dependency_repository: str, *, name: str = "scs2", cluster_api: str = "v1beta1"
) -> Path:
    """A stack shaped like upstream's ``providers/openstack/scs2`` under ``root`` (its path
    returned): four stages whose charts name their dependency in ``dependency_repository`` with no
    ``charts/`` folder, three with an ``overwrite.yaml``; an ORC Image in the class (written in
    Cluster API ``cluster_api``: v1beta1 as upstream's, or v1beta2 for a management cluster of
    Cluster API v1.11 and later)."""
    stack = _stack(root, "openstack", name)
    stages = ["cni", "metrics-server", "csi", "ccm"]
    (stack / "clusteraddon.yaml").write_text(_clusteraddon_yaml(stages))
    for stage in stages:
        _stage_chart(
            stack / "cluster-addon" / stage,
            stage,
            dependency_repository,
            vendored=False,
            overwrite=stage != "cni",
        )
    image = orc_image(f"ubuntu-capi-image-{KUBERNETES}")
    _cluster_class(stack / "cluster-class", "openstack", name, [image], cluster_api)
    (stack / "image.yaml").write_text(yaml.safe_dump(image, sort_keys=False))
    return stack


def single_chart_stack(root: Path, *, name: str = "ferrol") -> Path:
    """A stack shaped like csctl's test stack ``docker/ferrol``: one addon chart
    (``<provider>-<name>-1-30-cluster-addon``, its dependency vendored unpacked in ``charts/``) and
    ``cluster-addon-values.yaml``, templated over the Cluster by the operator."""
    stack = _stack(root, "docker", name)
    addon = stack / "cluster-addon"
    addon.mkdir()
    (addon / "Chart.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v2",
                "name": f"docker-{name}-1-30-cluster-addon",
                "version": "v1",
                "dependencies": [
                    {
                        "name": "metrics-agent",
                        "version": "3.12.2",
                        "repository": "file://charts/metrics-agent",
                    }
                ],
            },
            sort_keys=False,
        )
    )
    (addon / "values.yaml").write_text("metrics-agent:\n  setting: single-chart\n")
    dependency_chart(addon / "charts", "metrics-agent", "3.12.2")
    (stack / "cluster-addon-values.yaml").write_text(
        "values: |\n  metrics-agent:\n    clusterName: {{ .Cluster.metadata.name }}\n"
    )
    _cluster_class(stack / "cluster-class", "docker", name, [], "v1beta1")
    return stack
