"""What a downloaded release holds, and whether it is whole. Pure: reads only the bytes it is given.

A release's assets, as upstream publishes them (``docs/clusterstack.md`` has the layout):

- ``metadata.yaml`` (:class:`ReleaseMetadata`): the versions of the stack, of Kubernetes (with
  its patch), of the cluster addon and of the node images, in dot form;
- the cluster-class chart, ``<stack>-cluster-class-<version>.tgz``;
- the cluster-addon chart, ``<stack>-cluster-addon-<addon version>.tgz``;
- ``hashes.json``, and either ``clusteraddon.yaml`` or ``cluster-addon-values.yaml`` (read by the
  ClusterAddon controller, not checked here).

:func:`check_release` says what is missing or wrong, in words a user can act on.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from clusterstack_operator.releases.versions import InvalidVersion, ReleaseName, Version

__all__ = [
    "METADATA_FILE",
    "InvalidRelease",
    "ReleaseMetadata",
    "check_api_version",
    "check_release",
    "validation_problems",
    "yaml_mapping",
]

METADATA_FILE = "metadata.yaml"
METADATA_API_VERSION = "metadata.clusterstack.x-k8s.io/v1alpha1"


class InvalidRelease(ValueError):
    """The release's assets are missing, or do not say what they must."""


class _Components(BaseModel):
    model_config = ConfigDict(populate_by_name=True, extra="allow")
    cluster_addon: str = Field(alias="clusterAddon")
    node_image: str | None = Field(default=None, alias="nodeImage")


class _Versions(BaseModel):
    model_config = ConfigDict(populate_by_name=True, extra="allow")
    cluster_stack: str = Field(alias="clusterStack")
    kubernetes: str
    components: _Components


class ReleaseMetadata(BaseModel):
    """``metadata.yaml``: which versions a release is made of."""

    model_config = ConfigDict(populate_by_name=True, extra="allow")
    api_version: str = Field(alias="apiVersion")
    versions: _Versions

    @property
    def kubernetes_version(self) -> str:
        """With its patch and a leading v, as status.kubernetesVersion shows it: v1.30.10."""
        version = self.versions.kubernetes
        return version if version.startswith("v") else f"v{version}"

    @property
    def cluster_addon_version(self) -> Version:
        return Version.parse(self.versions.components.cluster_addon)


def yaml_mapping(text: str | bytes, file: str, invalid: type[ValueError]) -> Mapping[str, Any]:
    """A release file's YAML mapping, or ``invalid`` saying that ``file`` is not YAML or not a mapping."""
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise invalid(f"{file} is not YAML: {error}") from None
    if not isinstance(document, Mapping):
        raise invalid(f"{file} is not a YAML mapping")
    return document


def validation_problems(error: ValidationError) -> str:
    """pydantic's complaints about a release file, one "field.path: message" each."""
    return "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in error.errors())


def check_api_version(found: str, wanted: str, file: str, invalid: type[ValueError]) -> None:
    if found != wanted:
        raise invalid(f"{file} has apiVersion {found}, not {wanted}")


def _metadata(text: bytes) -> ReleaseMetadata:
    document = yaml_mapping(text, METADATA_FILE, InvalidRelease)
    try:
        metadata = ReleaseMetadata.model_validate(document)
    except ValidationError as error:
        raise InvalidRelease(
            f"{METADATA_FILE} lacks what a release must say ({validation_problems(error)})"
        ) from None
    check_api_version(metadata.api_version, METADATA_API_VERSION, METADATA_FILE, InvalidRelease)
    return metadata


def check_release(release: ReleaseName, files: Mapping[str, bytes]) -> ReleaseMetadata:
    """The release's metadata when ``files`` (name → content of the metadata; presence of the rest) hold
    a whole release of ``release``; otherwise :class:`InvalidRelease` saying what is wrong."""
    if METADATA_FILE not in files:
        raise InvalidRelease(f"the release has no {METADATA_FILE}")
    metadata = _metadata(files[METADATA_FILE])
    try:
        stack_version = Version.parse(metadata.versions.cluster_stack)
        addon = metadata.cluster_addon_version
    except InvalidVersion as error:
        raise InvalidRelease(f"{METADATA_FILE}: {error}") from error
    if stack_version != release.version:
        raise InvalidRelease(
            f"{METADATA_FILE} says version {stack_version.dot}, but the release is {release.version.dot}"
        )
    wanted = (release.cluster_class_chart, release.cluster_addon_chart(addon))
    missing = [name for name in wanted if name not in files]
    if missing:
        raise InvalidRelease(f"the release lacks {', '.join(missing)} (it has {', '.join(sorted(files))})")
    return metadata
