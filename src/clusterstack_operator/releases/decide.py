"""Which releases a ClusterStack has: what to create, what to keep, what to delete, and the latest. Pure.

A release is **wanted** when ``spec.versions`` lists it, or when auto-subscribe is on and it is
the newest release of the stack's channel on the source. A release that exists is **kept** when
it is wanted, when a Cluster's topology names its ClusterClass (in either spelling, v1beta1's
``spec.topology.class`` or v1beta2's ``spec.topology.classRef.name``), or when it is the latest
ready one: a newer release replaces it only once the newer one is ready. Everything else of the
stack is deleted. Version jumps (v1 to v3) need nothing special: only wanted, used and latest count.

Who calls it: the ClusterStack controller, with what it read from the cache and the source.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from clusterstack_operator.releases.versions import (
    Channel,
    InvalidVersion,
    ReleaseName,
    Version,
    newest,
    release_of_class,
)

__all__ = [
    "LISTED",
    "NEWEST_OF_CHANNEL",
    "WANTED",
    "ExistingRelease",
    "ReleasePlan",
    "StackIdentity",
    "class_namespace_of",
    "cluster_class_of",
    "cluster_in",
    "clusters_without_addon",
    "incomplete_release_retry_seconds",
    "is_paused",
    "plan_releases",
]

INCOMPLETE_RELEASE_RETRY = (5.0, 300.0)
"""The soonest and the latest look again at a release whose assets are incomplete or broken."""


@dataclass(frozen=True)
class StackIdentity:
    """What every release of one ClusterStack shares."""

    provider: str
    name: str
    kubernetes_version: str
    channel: Channel = Channel.STABLE

    def release(self, version: Version | str) -> ReleaseName:
        return ReleaseName.of(self.provider, self.name, self.kubernetes_version, version)

    def owns(self, release: ReleaseName) -> bool:
        """Whether ``release`` is one of this stack's (any channel)."""
        mine = self.release(release.version)
        return mine == release

    def subscribes_to(self, release: ReleaseName) -> bool:
        """Whether auto-subscribe may pick ``release``: this stack's, in its channel (never a hash)."""
        return self.owns(release) and release.version.channel is self.channel


LISTED = "listed in spec.versions"
NEWEST_OF_CHANNEL = "newest release of the channel"
WANTED = (LISTED, NEWEST_OF_CHANNEL)
"""The reasons to keep a release that say its stack wants it (not only that a Cluster uses it, or that
it is the latest ready one): a stack is ready when these are."""


@dataclass(frozen=True)
class ExistingRelease:
    """A ClusterStackRelease of the stack, as its status says."""

    name: ReleaseName
    ready: bool = False
    created: datetime | None = None
    """When its ClusterStackRelease was made: what orders hash releases that have no publish time."""


@dataclass(frozen=True)
class ReleasePlan:
    create: tuple[ReleaseName, ...] = ()
    """Wanted releases that have no ClusterStackRelease (new, or deleted by accident)."""
    keep: tuple[ReleaseName, ...] = ()
    delete: tuple[ReleaseName, ...] = ()
    latest: ReleaseName | None = None
    """The newest ready release: what ``status.latestRelease`` names."""
    why_kept: Mapping[str, str] = field(default_factory=dict)
    """For each kept release (tag), the first reason: listed, used by a Cluster, latest or subscribed."""


def cluster_class_of(cluster: Mapping[str, Any]) -> str | None:
    """The ClusterClass a Cluster's topology names: v1beta2's ``classRef.name`` or v1beta1's ``class``."""
    topology = (cluster.get("spec") or {}).get("topology") or {}
    reference = topology.get("classRef") or {}
    name = reference.get("name") or topology.get("class")
    return name if isinstance(name, str) and name else None


def class_namespace_of(cluster: Mapping[str, Any]) -> str:
    """The namespace of the ClusterClass a Cluster's topology names: v1beta2's ``classRef.namespace``,
    v1beta1's ``classNamespace``, else the Cluster's own (a tenant's Cluster may use the classes of a
    stack in a namespace of the platform's)."""
    topology = (cluster.get("spec") or {}).get("topology") or {}
    named = (topology.get("classRef") or {}).get("namespace") or topology.get("classNamespace")
    return str(named or (cluster.get("metadata") or {}).get("namespace") or "")


def cluster_in(cluster: Mapping[str, Any], namespace: str) -> str:
    """A Cluster as a stack or release of ``namespace`` names it: by name, or ``namespace/name`` when
    it is a tenant's, in another namespace."""
    metadata = cluster.get("metadata") or {}
    name, own = str(metadata.get("name", "")), metadata.get("namespace")
    return name if own in (None, namespace) else f"{own}/{name}"


PAUSED_ANNOTATION = "cluster.x-k8s.io/paused"


def is_paused(cluster: Mapping[str, Any], *others: Mapping[str, Any]) -> bool:
    """Whether Cluster API's pause holds for ``cluster`` (``spec.paused``, as ``clusterctl move`` sets
    it) or any of ``others`` (its ``cluster.x-k8s.io/paused`` annotation): then no controller writes
    anything for it."""
    if (cluster.get("spec") or {}).get("paused") is True:
        return True
    return any(
        PAUSED_ANNOTATION in ((obj.get("metadata") or {}).get("annotations") or {})
        for obj in (cluster, *others)
    )


def clusters_without_addon(
    stack: StackIdentity,
    clusters: Iterable[Mapping[str, Any]],
    addons: Iterable[tuple[str, str]],
    addon_name: Any,
) -> list[Mapping[str, Any]]:
    """The Clusters whose ClusterClass is a release of ``stack`` and that have no ClusterAddon yet
    (``addons``: the (namespace, name) of those that exist, each beside its Cluster; ``addon_name``: a
    Cluster's name to its addon's).

    A Cluster being deleted gets none: the garbage collector would take it at once. Nor does a paused
    one (:func:`is_paused`): during ``clusterctl move`` its ClusterAddon is on its way, moved as is."""
    existing = set(addons)
    wanting = []
    for cluster in clusters:
        metadata = cluster.get("metadata") or {}
        class_name = cluster_class_of(cluster)
        if class_name is None or metadata.get("deletionTimestamp") or is_paused(cluster):
            continue
        try:
            release = ReleaseName.parse(class_name)
        except InvalidVersion:
            continue
        if stack.owns(release) and (metadata.get("namespace"), addon_name(metadata["name"])) not in existing:
            wanting.append(cluster)
    return wanting


def _release_times(
    releases: Iterable[ExistingRelease], published: Mapping[ReleaseName, datetime]
) -> dict[Version, datetime]:
    """What orders hash releases (``v0-sha.*``): the source's publish times when it gave one for every
    release (auto-subscribe lists them), else when each ClusterStackRelease was made. Upstream orders
    them by the hash's text, which says nothing; a stack of listed hash versions without auto-subscribe
    (upstream's own docker example) has no publish times at all, and still has a latest release."""
    releases = list(releases)
    if all(release.name in published for release in releases):
        return {release.name.version: published[release.name] for release in releases}
    return {release.name.version: release.created for release in releases if release.created is not None}


def _parsed(versions: Iterable[str]) -> list[Version]:
    parsed = []
    for text in versions:
        try:
            parsed.append(Version.parse(text))
        except InvalidVersion:
            continue  # the CRD's pattern refuses these; an old object may still hold one
    return parsed


def plan_releases(
    stack: StackIdentity,
    *,
    listed: Iterable[str],
    auto_subscribe: bool,
    available: Iterable[ReleaseName] = (),
    published: Mapping[ReleaseName, datetime] | None = None,
    existing: Iterable[ExistingRelease] = (),
    classes_in_use: Iterable[str] = (),
) -> ReleasePlan:
    """The plan for one ClusterStack; ``available`` is what the source offers (anything: it is filtered)."""
    existing = [release for release in existing if stack.owns(release.name)]
    wanted: dict[str, str] = {stack.release(v).tag: LISTED for v in _parsed(listed)}
    if auto_subscribe:
        candidates = [r for r in available if stack.subscribes_to(r)]
        times = {r.version: t for r, t in (published or {}).items()}
        subscribed = newest((r.version for r in candidates), times)
        if subscribed is not None:
            wanted.setdefault(stack.release(subscribed).tag, NEWEST_OF_CHANNEL)
    used = {tag for tag in (release_of_class(name) for name in classes_in_use) if tag}
    ready = [release for release in existing if release.ready]
    latest_version = newest((r.name.version for r in ready), _release_times(ready, published or {}))
    latest = stack.release(latest_version) if latest_version is not None else None

    why: dict[str, str] = {}
    for release in existing:
        tag = release.name.tag
        if tag in wanted:
            why[tag] = wanted[tag]
        elif tag in used:
            why[tag] = "used by a Cluster"
        elif latest is not None and tag == latest.tag:
            why[tag] = "latest ready release"
    present = {release.name.tag for release in existing}
    return ReleasePlan(
        create=tuple(ReleaseName.parse(tag) for tag in wanted if tag not in present),
        keep=tuple(release.name for release in existing if release.name.tag in why),
        delete=tuple(release.name for release in existing if release.name.tag not in why),
        latest=latest,
        why_kept=why,
    )


def incomplete_release_retry_seconds(broken_for: float) -> float:
    """When to download again a release found incomplete or broken ``broken_for`` seconds ago.

    A release is often seen before all of its assets are there (``gh release create`` uploads them one
    by one after the release exists), so the first look again comes within seconds; one that stays
    broken is fixed by a person, so the looks space out (each as long as it has been broken), up to
    five minutes: a few downloads of a broken release, not one per reconcile.
    """
    soonest, latest = INCOMPLETE_RELEASE_RETRY
    return min(max(broken_for, soonest), latest)
