"""Cluster stack versions and release names: parsing, both spellings, and their order. Pure.

A version has two spellings, as upstream writes them: a **dash form** in release tags and
object names (``v1``, ``v1-alpha-5``, ``v0-sha-hdl6pjy``) and a **dot form** in chart
versions, asset names, ``usableVersions`` and ClusterClass names (``v1``, ``v1-alpha.5``,
``v0-sha.hdl6pjy``). Either spelling parses to the same :class:`Version`.

Channels:

- **stable**: ``vN``; ordered by N, as a number (as upstream).
- **custom**: ``vN-<word>.<number>`` (the seed's ``v1-alpha.5``); ordered by N, then the
  word, then the number, as a number: ``v1-alpha.9`` < ``v1-alpha.10`` < ``v2-alpha.4`` (upstream
  compares the number as text, so its ``v1-alpha.10`` sorts before ``v1-alpha.9``).
- **hash**: ``vN-sha.<hash>`` (what upstream's ``csctl`` publishes in hash mode). A hash has no
  order, so these versions have none by name: they are used only when ``spec.versions`` names
  them, never auto-subscribed (the ``channel`` field does not even allow them), and among
  themselves only a time orders them (:func:`newest`): the source's publish time, or when their
  ClusterStackRelease was made (:func:`clusterstack_operator.releases.decide.plan_releases`).

A release is named ``<provider>-<name>-<k8s major>-<k8s minor>-<version, dash form>``
(:class:`ReleaseName`); its Helm release name is the first four parts, and the ClusterClass
that upstream stacks render is ``<helm release name>-<chart version, dot form>``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

__all__ = [
    "Channel",
    "InvalidVersion",
    "ReleaseName",
    "Version",
    "newest",
    "release_of_class",
]

HASH_WORD = "sha"
_VERSION = re.compile(r"^v(?P<major>0|[1-9][0-9]*)(?:-(?P<word>[a-z]+)[.-](?P<patch>[0-9a-z]+))?$")
_PART = r"[a-z0-9]+"
_RELEASE = re.compile(
    rf"^(?P<provider>{_PART})-(?P<name>{_PART})-(?P<major>[0-9]+)-(?P<minor>[0-9]+)-(?P<version>v.+)$"
)
_KUBERNETES = re.compile(r"^v?(?P<major>[0-9]+)\.(?P<minor>[0-9]+)(?:\.[0-9]+)?$")


class InvalidVersion(ValueError):
    """A version or release name that does not follow the grammar above."""


class Channel(StrEnum):
    STABLE = "stable"
    CUSTOM = "custom"
    HASH = "hash"


@dataclass(frozen=True)
class Version:
    """One cluster stack version, whichever way it was spelled."""

    major: int
    word: str = ""
    """The pre-release word of a custom version (``alpha``), or ``sha`` for a hash version."""
    patch: str = ""

    @classmethod
    def parse(cls, text: str) -> Version:
        found = _VERSION.match(text)
        if found is None:
            raise InvalidVersion(
                f"{text!r} is not a cluster stack version: expected vN, vN-<word>.<number> "
                "(such as v1-alpha.5) or vN-sha.<hash>"
            )
        word, patch = found["word"] or "", found["patch"] or ""
        if word and word != HASH_WORD and not patch.isdigit():
            raise InvalidVersion(f"{text!r}: the patch of a {word} version must be a number")
        return cls(int(found["major"]), word, patch)

    @property
    def channel(self) -> Channel:
        if not self.word:
            return Channel.STABLE
        return Channel.HASH if self.word == HASH_WORD else Channel.CUSTOM

    @property
    def dash(self) -> str:
        """Tags and object names: ``v1-alpha-5``."""
        return f"v{self.major}-{self.word}-{self.patch}" if self.word else f"v{self.major}"

    @property
    def dot(self) -> str:
        """Chart versions, asset names, ClusterClass names: ``v1-alpha.5``."""
        return f"v{self.major}-{self.word}.{self.patch}" if self.word else f"v{self.major}"

    @property
    def ordered(self) -> bool:
        """Whether the name alone says how this version compares to others of its channel."""
        return self.channel is not Channel.HASH

    def sort_key(self) -> tuple[int, str, int]:
        """Numbers as numbers; a hash version has none (see :func:`newest`)."""
        if not self.ordered:
            raise InvalidVersion(f"{self.dot} is a hash version: it has no order by name")
        return self.major, self.word, int(self.patch or 0)

    def __str__(self) -> str:
        return self.dot


def newest(
    versions: Iterable[Version], published: Mapping[Version, datetime] | None = None
) -> Version | None:
    """The newest of ``versions`` (one channel). Versions ordered by name compare by name; hash
    versions only by ``published`` (the source's publish time), and those without one are skipped."""
    candidates = list(versions)
    ordered = [v for v in candidates if v.ordered]
    if ordered:
        return max(ordered, key=Version.sort_key)
    timed = [v for v in candidates if published and v in published]
    return max(timed, key=lambda v: published[v]) if published and timed else None


@dataclass(frozen=True)
class ReleaseName:
    """``<provider>-<name>-<k8s major>-<k8s minor>-<version>``: a release, its tag and its objects."""

    provider: str
    name: str
    kubernetes_major: int
    kubernetes_minor: int
    version: Version

    @classmethod
    def of(cls, provider: str, name: str, kubernetes_version: str, version: Version | str) -> ReleaseName:
        """From a ClusterStack's fields (``kubernetesVersion`` ``1.30``, with or without a patch)."""
        kubernetes = _KUBERNETES.match(kubernetes_version)
        if kubernetes is None:
            raise InvalidVersion(f"{kubernetes_version!r} is not a Kubernetes version such as 1.30")
        parsed = version if isinstance(version, Version) else Version.parse(version)
        return cls(provider, name, int(kubernetes["major"]), int(kubernetes["minor"]), parsed)

    @classmethod
    def parse(cls, text: str) -> ReleaseName:
        """A release tag, object name or ClusterClass name, in either spelling."""
        found = _RELEASE.match(text)
        if found is None:
            raise InvalidVersion(
                f"{text!r} is not a release name: "
                "expected <provider>-<name>-<k8s major>-<k8s minor>-<version>"
            )
        return cls(
            found["provider"],
            found["name"],
            int(found["major"]),
            int(found["minor"]),
            Version.parse(found["version"]),
        )

    @property
    def stack(self) -> str:
        """The first four parts: the Helm release name, and the prefix of every asset."""
        return f"{self.provider}-{self.name}-{self.kubernetes_major}-{self.kubernetes_minor}"

    @property
    def tag(self) -> str:
        """The release tag, and the name of its ClusterStackRelease: dash form."""
        return f"{self.stack}-{self.version.dash}"

    @property
    def cluster_class(self) -> str:
        """The ClusterClass upstream stacks render: ``{{ .Release.Name }}-{{ .Chart.Version }}``."""
        return f"{self.stack}-{self.version.dot}"

    @property
    def cluster_class_chart(self) -> str:
        return f"{self.stack}-cluster-class-{self.version.dot}.tgz"

    def cluster_addon_chart(self, addon_version: Version | str) -> str:
        addon = addon_version if isinstance(addon_version, Version) else Version.parse(addon_version)
        return f"{self.stack}-cluster-addon-{addon.dot}.tgz"

    def __str__(self) -> str:
        return self.tag


def release_of_class(class_name: str) -> str | None:
    """The release (dash form) whose ClusterClass is ``class_name``, in either spelling; None when the
    name is not a release's."""
    try:
        return ReleaseName.parse(class_name).tag
    except InvalidVersion:
        return None
