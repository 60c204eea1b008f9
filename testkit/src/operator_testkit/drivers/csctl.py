"""Cluster stack releases built as upstream's ``csctl create`` builds them, and published as
``csctl create --publish --remote oci`` publishes them.

``csctl`` is not served by the Go module proxy here, so tests cannot build it; this module follows its
rules instead, and tests/integration/test_csctl_builder.py holds it to what the real csctl produced for
the same stacks (its output recorded in tests/data/csctl/). docs/clusterstack-upstream.md §9 names the
csctl file and line each rule below comes from.

A stack directory holds ``csctl.yaml``, ``cluster-class/`` (a chart), ``cluster-addon/`` and either
``clusteraddon.yaml`` (staged addons: one chart folder per stage, archived as they are) or
``cluster-addon-values.yaml`` (one addon chart, packaged by helm).
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import oras.container
import yaml

from operator_testkit.clusterstack_tools import helm_environment
from operator_testkit.registry import RunningRegistry

__all__ = [
    "ARTIFACT_TYPE",
    "CsctlError",
    "Mode",
    "StackConfig",
    "create_release",
    "dirhash",
    "download_release_oci",
    "fetch_manifest",
    "latest_stable_tag",
    "layer_media_type",
    "list_tags",
    "manifest_summary",
    "publish_release_oci",
    "release_summary",
    "stack_hashes",
]

Mode = Literal["stable", "hash", "custom"]
METADATA_API_VERSION = "metadata.clusterstack.x-k8s.io/v1alpha1"
ARTIFACT_TYPE = "application/vnd.scs.cluster-stacks.v1"
EMPTY_CONFIG = {
    "mediaType": "application/vnd.oci.empty.v1+json",
    "digest": "sha256:" + hashlib.sha256(b"{}").hexdigest(),
    "size": 2,
    "data": base64.b64encode(b"{}").decode(),
}
_DEFAULT_LAYER_MEDIA_TYPE = (
    "application/vnd.oci.image.layer.v1.tar"  # oras-go's, for a type csctl leaves empty
)
_VERSION = re.compile(r"^v\d+(-\w+\.\w+)?$")  # CSO version.New, which csctl checks custom versions with
_KUBERNETES = re.compile(r"^v(\d+)\.(\d+)\.\d+$")
_PROVIDER = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


class CsctlError(Exception):
    """What csctl would refuse, in its words where they say enough."""


@dataclass(frozen=True)
class StackConfig:
    """A stack's ``csctl.yaml``: provider type, stack name and Kubernetes version (``v1.30.10``)."""

    provider: str
    name: str
    kubernetes: str

    @classmethod
    def read(cls, stack: Path) -> StackConfig:
        try:
            document = yaml.safe_load((stack / "csctl.yaml").read_text()) or {}
        except OSError as error:
            raise CsctlError(f"failed to read csctl config: {error}") from error
        config = document.get("config") or {}
        provider = str((config.get("provider") or {}).get("type") or "")
        name = str(config.get("clusterStackName") or "")
        kubernetes = str(config.get("kubernetesVersion") or "")
        if not provider or not _PROVIDER.match(provider):
            raise CsctlError(f"invalid provider type: {provider!r}")
        if not name:
            raise CsctlError("cluster stack name must not be empty")
        if not _KUBERNETES.match(kubernetes):
            raise CsctlError(f"invalid kubernetes version: {kubernetes!r}")
        return cls(provider, name, kubernetes)

    @property
    def kubernetes_minor(self) -> str:
        """``1-30``, as release names write it."""
        match = _KUBERNETES.match(self.kubernetes)
        assert match is not None  # checked when read
        return f"{match[1]}-{match[2]}"

    def release_name(self, cluster_stack_version: str) -> str:
        """The release directory and OCI tag: ``docker-scs-1-30-v0-sha-abcdefg`` (dash form)."""
        return (
            f"{self.provider}-{self.name}-{self.kubernetes_minor}-{cluster_stack_version.replace('.', '-')}"
        )


def dirhash(directory: Path) -> str:
    """golang.org/x/mod's ``dirhash.HashDir(directory, "", Hash1)``: sha256 over the sorted lines
    ``<sha256 of the file>  <path relative to directory>``, base64, prefixed ``h1:``."""
    summary = hashlib.sha256()
    for name in sorted(_files(directory), key=lambda n: n.encode()):
        digest = hashlib.sha256((directory / name).read_bytes()).hexdigest()
        summary.update(f"{digest}  {name}\n".encode())
    return "h1:" + base64.b64encode(summary.digest()).decode()


def _files(directory: Path) -> Iterator[str]:
    """Every entry under ``directory`` that is not a directory, as filepath.Walk finds them."""
    for parent, _, names in os.walk(directory):
        for name in names:
            yield (Path(parent) / name).relative_to(directory).as_posix()


def _clean(value: str) -> str:
    return value.removeprefix("h1:").replace("/", "").replace("=", "").replace("+", "").lower()


def stack_hashes(stack: Path) -> dict[str, str]:
    """What csctl writes to ``hashes.json``, in its key order: the whole stack's hash, the
    ``cluster-addon/`` folder's and ``cluster-addon-values.yaml``'s ("" where absent), and
    ``node-image/``'s only where that folder exists."""
    hashes = {"clusterStack": _clean(dirhash(stack)), "clusterAddonDir": "", "clusterAddonValues": ""}
    if (stack / "cluster-addon").is_dir():
        hashes["clusterAddonDir"] = _clean(dirhash(stack / "cluster-addon"))
    values = stack / "cluster-addon-values.yaml"
    if values.is_file():
        hashes["clusterAddonValues"] = _clean(
            base64.b64encode(hashlib.sha256(values.read_bytes()).digest()).decode()
        )
    if (stack / "node-image").is_dir():
        hashes["nodeImageDir"] = _clean(dirhash(stack / "node-image"))
    return hashes


def _metadata_yaml(stack: str, kubernetes: str, addon: str, node_image: str) -> str:
    """gopkg.in/yaml.v3's rendering of csctl's MetaData: four-space indent, nodeImage left out when
    empty."""
    lines = [
        f"apiVersion: {METADATA_API_VERSION}",
        "versions:",
        f"    clusterStack: {stack}",
        f"    kubernetes: {kubernetes}",
        "    components:",
        f"        clusterAddon: {addon}",
    ]
    if node_image:
        lines.append(f"        nodeImage: {node_image}")
    return "\n".join(lines) + "\n"


def _bump(version: str) -> str:
    """csctl's BumpVersion: every run of digits becomes the first one plus one (``v1`` → ``v2``)."""
    match = re.search(r"\d+", version)
    if match is None:
        raise CsctlError("invalid version format")
    return re.sub(r"\d+", str(int(match[0]) + 1), version)


def _versions(
    mode: Mode,
    hashes: Mapping[str, str],
    latest: Path | None,
    custom: tuple[str, str, str] | None,
) -> tuple[str, str, str, Mapping[str, str]]:
    """(clusterStack, clusterAddon, nodeImage) versions, and the latest release's hashes (empty
    when there is none)."""
    if mode == "hash":
        version = f"v0-sha.{hashes['clusterStack'][:7]}"
        return version, version, version, {}
    if mode == "custom":
        if custom is None:
            raise CsctlError("please specify a semver for custom version with --cluster-stack-version flag")
        for version in custom:
            if not _VERSION.match(version):
                raise CsctlError(f"failed to verify custom version: {version!r}")
        return custom[0], custom[1], custom[2], {}
    if latest is None:
        return "v1", "v1", "v1", {}
    previous_hashes = json.loads((latest / "hashes.json").read_text())
    versions = (yaml.safe_load((latest / "metadata.yaml").read_text()) or {}).get("versions") or {}
    components = versions.get("components") or {}
    addon, node_image = str(components.get("clusterAddon", "")), str(components.get("nodeImage", ""))
    if hashes["clusterAddonDir"] != previous_hashes.get("clusterAddonDir", "") or hashes[
        "clusterAddonValues"
    ] != previous_hashes.get("clusterAddonValues", ""):
        addon = _bump(addon)
    if hashes.get("nodeImageDir", "") != previous_hashes.get("nodeImageDir", ""):
        node_image = _bump(node_image)
    return _bump(str(versions.get("clusterStack", ""))), addon, node_image, previous_hashes


def create_release(
    stack: Path,
    output: Path,
    *,
    helm: Path,
    mode: Mode = "hash",
    latest: Path | None = None,
    custom: tuple[str, str, str] | None = None,
) -> Path:
    """``csctl create <stack> -m <mode> -o <output>``: the release directory it writes, returned.

    ``latest``, in stable mode: the files of the newest stable release already published (its
    ``hashes.json`` and ``metadata.yaml``), or None for the first (all versions ``v1``). ``custom``:
    the clusterStack, clusterAddon and nodeImage versions custom mode is given."""
    config = StackConfig.read(stack)
    staged = (stack / "clusteraddon.yaml").exists()
    hashes = stack_hashes(stack)
    cluster_stack, addon, node_image, previous = _versions(mode, hashes, latest, custom)
    if (hashes["clusterAddonDir"], hashes["clusterAddonValues"], hashes.get("nodeImageDir", "")) == (
        previous.get("clusterAddonDir", ""),
        previous.get("clusterAddonValues", ""),
        previous.get("nodeImageDir", ""),
    ):
        raise CsctlError("failed to validate with latest release hash: no change in the cluster stack")
    release = output / config.release_name(cluster_stack)
    release.mkdir(parents=True, exist_ok=True)
    # Go's json.MarshalIndent: two spaces, no newline at the end.
    (release / "hashes.json").write_text(json.dumps(hashes, indent=2))
    with tempfile.TemporaryDirectory(prefix="csctl-") as scratch:
        templated = Path(scratch) / "tmp"
        _fill_templates(
            stack,
            templated,
            {
                b".ClusterClassVersion": cluster_stack.encode(),
                b".ClusterAddonVersion": addon.encode(),
                b".NodeImageVersion": node_image.encode(),
            },
        )
        if (templated / "cluster-addon" / "Chart.yaml").is_file():
            _set_chart_version(templated / "cluster-addon" / "Chart.yaml", addon)
        _set_chart_version(templated / "cluster-class" / "Chart.yaml", cluster_stack)
        helm_home = Path(scratch) / "helm"
        _helm_package(helm, templated / "cluster-class", release, helm_home)
        if staged:
            _archive(
                templated / "cluster-addon",
                release
                / f"{config.provider}-{config.name}-{config.kubernetes_minor}-cluster-addon-{addon}.tgz",
            )
            shutil.copyfile(stack / "clusteraddon.yaml", release / "clusteraddon.yaml")
        else:
            _helm_package(helm, templated / "cluster-addon", release, helm_home)
            values = templated / "cluster-addon-values.yaml"
            if not values.is_file():
                raise CsctlError("failed to read cluster-addon-values.yaml: no such file")
            shutil.copyfile(values, release / "cluster-addon-values.yaml")
    (release / "metadata.yaml").write_text(
        _metadata_yaml(cluster_stack, config.kubernetes, addon, node_image)
    )
    return release


def _fill_templates(source: Path, target: Path, values: Mapping[bytes, bytes]) -> None:
    """Copy ``source`` to ``target``, each file through fasttemplate with the delimiters ``<< `` and
    `` >>`` (a tag it does not know becomes nothing), files 0600 and folders 0750."""
    for parent, _, names in os.walk(source):
        folder = target / Path(parent).relative_to(source)
        folder.mkdir(mode=0o750, parents=True, exist_ok=True)
        for name in names:
            text = (Path(parent) / name).read_bytes()
            filled = _fill(text, values, Path(parent) / name)
            path = folder / name
            path.write_bytes(filled)
            path.chmod(0o600)


def _fill(text: bytes, values: Mapping[bytes, bytes], path: Path) -> bytes:
    parts, rest = [], text
    while (start := rest.find(b"<< ")) >= 0:
        parts.append(rest[:start])
        rest = rest[start + 3 :]
        end = rest.find(b" >>")
        if end < 0:
            raise CsctlError(f"failed to create new template for {path}: cannot find end tag ' >>'")
        parts.append(values.get(rest[:end], b""))
        rest = rest[end + 3 :]
    parts.append(rest)
    return b"".join(parts)


def _set_chart_version(chart_yaml: Path, version: str) -> None:
    """csctl's overwriteVersionInFile: the Chart.yaml read into a map, its version set, written back
    (keys sorted, as a Go map is marshalled; helm rewrites Chart.yaml when it packages anyway)."""
    chart = yaml.safe_load(chart_yaml.read_text()) or {}
    if not isinstance(chart.get("version"), str):
        raise CsctlError(f"failed to overwrite the version in {chart_yaml}: failed to read version in yaml")
    chart["version"] = version
    chart_yaml.write_text(yaml.safe_dump(chart, sort_keys=True, indent=4))


def _helm_package(helm: Path, chart: Path, into: Path, home: Path) -> None:
    """helm's package action without a dependency update: declared dependencies must be vendored."""
    result = subprocess.run(
        [str(helm), "package", str(chart), "--destination", str(into)],
        capture_output=True,
        text=True,
        env=helm_environment(home),
    )
    if result.returncode != 0:
        raise CsctlError(f"failed to run helm package on {chart.name}: {result.stderr.strip()}")


def _archive(folder: Path, archive: Path) -> None:
    """csctl's createTarPackage: a gzipped tar of the folder's contents (no top folder; folders
    included; names relative, in the order filepath.Walk visits them)."""
    with (
        archive.open("wb") as raw,
        gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as packed,
        tarfile.open(fileobj=packed, mode="w", format=tarfile.PAX_FORMAT) as tar,
    ):
        for path in _walk(folder):
            tar.add(path, arcname=path.relative_to(folder).as_posix(), recursive=False)


def _walk(folder: Path) -> Iterator[Path]:
    """Go's filepath.Walk below ``folder`` (not itself): lexical order, each folder before its
    contents."""
    for entry in sorted(folder.iterdir(), key=lambda p: p.name.encode()):
        yield entry
        if entry.is_dir() and not entry.is_symlink():
            yield from _walk(entry)


def layer_media_type(file_name: str) -> str:
    """The media type csctl gives a release file's layer (oras-go's default where csctl gives none)."""
    named = {
        "clusteraddon.yaml": "application/vnd.scs.cluster-addon.config.layer.v1+yaml",
        "metadata.yaml": "application/vnd.scs.metadata.layer.v1+yaml",
        "node-images.yaml": "application/vnd.scs.node-image.config.layer.v1+yaml",
        "hashes.json": "application/vnd.scs.hashes.layer.v1+yaml",
    }
    if file_name in named:
        return named[file_name]
    if file_name.endswith(".tgz"):
        for part, media_type in (
            ("cluster-addon", "application/vnd.scs.cluster-addon.layer.v1.tar+gzip"),
            ("cluster-class", "application/vnd.scs.cluster-class.v1.tar+gzip"),
            ("node-image", "application/vnd.scs.node-image.layer.v1.tar+gzip"),
        ):
            if part in file_name:
                return media_type
    return _DEFAULT_LAYER_MEDIA_TYPE


def latest_stable_tag(tags: list[str], config: StackConfig) -> str | None:
    """The newest of ``tags`` that csctl's stable mode would build on: ``<provider>-<name>-<k8s>-vN``
    of this stack's provider, name and Kubernetes minor."""
    prefix = f"{config.provider}-{config.name}-{config.kubernetes_minor}-v"
    numbers = [
        int(tag[len(prefix) :]) for tag in tags if tag.startswith(prefix) and tag[len(prefix) :].isdigit()
    ]
    return f"{prefix}{max(numbers)}" if numbers else None


def publish_release_oci(registry: RunningRegistry, release: Path, repository: str) -> dict[str, Any] | None:
    """``csctl create --publish --remote oci``'s push of ``release``: one layer per regular file (in
    name order, titled by its name, typed as :func:`layer_media_type`), the OCI empty config, artifact
    type ``application/vnd.scs.cluster-stacks.v1``, annotations ``kubernetesVersion`` and ``hash``
    (besides oras' creation time), tagged with the release's name. As csctl, nothing is pushed when
    the tag exists (None is returned); otherwise the manifest pushed."""
    client = registry.oras_client()
    target = oras.container.Container(f"{registry.host}/{repository}:{release.name}")
    if release.name in list_tags(registry, repository):
        return None
    metadata = yaml.safe_load((release / "metadata.yaml").read_text())
    stack_hash = json.loads((release / "hashes.json").read_text())["clusterStack"]
    layers = []
    for path in sorted((p for p in release.iterdir() if p.is_file()), key=lambda p: p.name.encode()):
        layer = {
            "mediaType": layer_media_type(path.name),
            "digest": "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest(),
            "size": path.stat().st_size,
            "annotations": {"org.opencontainers.image.title": path.name},
        }
        _check(client.upload_blob(str(path), target, layer), f"uploading {path.name}")
        layers.append(layer)
    with tempfile.TemporaryDirectory(prefix="oci-config-") as scratch:
        config = Path(scratch) / "config.json"
        config.write_bytes(b"{}")
        _check(client.upload_blob(str(config), target, dict(EMPTY_CONFIG)), "uploading the empty config")
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "artifactType": ARTIFACT_TYPE,
        "config": EMPTY_CONFIG,
        "layers": layers,
        "annotations": {
            "hash": stack_hash[:7] if len(stack_hash) >= 7 else "",
            "kubernetesVersion": metadata["versions"]["kubernetes"],
            "org.opencontainers.image.created": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        },
    }
    _check(client.upload_manifest(manifest, target), "pushing the manifest")
    return manifest


def release_summary(release: Path) -> dict[str, Any]:
    """What a release directory holds, in a form two builds can be compared by: each file's text,
    or for an archive each entry's type, mode and sha256 (times, owners and compression differ
    between any two builds, and are not compared)."""
    files: dict[str, Any] = {}
    for path in sorted(release.iterdir()):
        if path.suffix != ".tgz":
            files[path.name] = path.read_text()
            continue
        entries: dict[str, str] = {}
        with tarfile.open(path, "r:gz") as tar:
            for member in tar.getmembers():
                if member.isdir():
                    entries[member.name] = f"dir {member.mode & 0o777:o}"
                else:
                    extracted = tar.extractfile(member)
                    assert extracted is not None, member.name
                    digest = hashlib.sha256(extracted.read()).hexdigest()
                    entries[member.name] = f"file {member.mode & 0o777:o} {digest}"
        files[path.name] = entries
    return {"release": release.name, "files": files}


def manifest_summary(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """An OCI manifest without what differs between two pushes of the same release: the creation
    time, and archive layers' digests and sizes (see :func:`release_summary`)."""
    layers = []
    for layer in manifest["layers"]:
        kept = dict(layer)
        if layer["annotations"]["org.opencontainers.image.title"].endswith(".tgz"):
            kept.pop("digest"), kept.pop("size")
        layers.append(kept)
    annotations = dict(manifest.get("annotations") or {})
    created = annotations.pop("org.opencontainers.image.created", None)
    return {
        **{k: v for k, v in manifest.items() if k not in ("layers", "annotations")},
        "layers": layers,
        "annotations": annotations,
        "created": created is not None,
    }


def list_tags(registry: RunningRegistry, repository: str) -> list[str]:
    """The tags of ``repository``: none while nothing was pushed to it (the registry answers 404)."""
    client = registry.oras_client()
    response = client.do_request(f"{client.prefix}://{registry.host}/v2/{repository}/tags/list", "GET")
    if response.status_code == 404:
        return []
    _check(response, f"listing the tags of {repository}")
    return list(response.json().get("tags") or [])


def download_release_oci(registry: RunningRegistry, repository: str, tag: str, into: Path) -> Path:
    """What csctl's stable mode downloads of the newest release before it builds the next: every
    file of ``tag``, into ``into`` (returned)."""
    into.mkdir(parents=True, exist_ok=True)
    client = registry.oras_client()
    target = f"{registry.host}/{repository}:{tag}"
    for layer in client.get_manifest(target)["layers"]:
        title = layer["annotations"]["org.opencontainers.image.title"]
        client.download_blob(oras.container.Container(target), layer["digest"], str(into / title))
    return into


def fetch_manifest(registry: RunningRegistry, repository: str, tag: str) -> dict[str, Any]:
    """The manifest tagged ``tag`` in ``repository``, as the registry serves it."""
    client = registry.oras_client()
    manifest: dict[str, Any] = client.get_manifest(f"{registry.host}/{repository}:{tag}")
    return manifest


def _check(response: Any, what: str) -> None:
    if response.status_code not in (200, 201, 202):
        raise CsctlError(f"{what}: HTTP {response.status_code} {response.text[:200]}")
