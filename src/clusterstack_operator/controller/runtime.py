"""What the Cluster Stack operator's reconciles share in one process: its settings, the release sources
(the operator's own and the stacks' own), the store of downloaded releases, the last listing of each
source, rendered charts, and the clients of the workload clusters.

The operator's own source is listed at most once per :attr:`ClusterStackSettings.poll_seconds` for
every ClusterStack that follows it together (one request, not one per stack); a stack with its own
source has its own listing, as often. A rendered chart is kept: a release's
chart never changes, so ``helm`` runs once per release and process, not on every reconcile. A
Cluster's cluster addons are rendered again only when the release or the Cluster (whose values
they take) changes, not on every look at the workload cluster.
"""

from __future__ import annotations

import asyncio
import shutil
import tarfile
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clusterstack_operator.controller.settings import ClusterStackSettings, release_source
from clusterstack_operator.controller.stack_sources import BoundSource, StackSources, identity_salt
from clusterstack_operator.helm import HelmError, RegistryAccess, helm_template, render_values_template
from clusterstack_operator.releases.versions import ReleaseName
from clusterstack_operator.sources.base import SourceRelease
from clusterstack_operator.sources.store import ReleaseStore
from clusterstack_operator.workload import WorkloadClients

__all__ = [
    "ADDON_NAMESPACE",
    "ADDON_RELEASE_NAME",
    "ADDON_VALUES_FILE",
    "STAGE_VALUES_FILE",
    "StackRuntime",
]

ADDON_NAMESPACE = "kube-system"
"""Where upstream renders every cluster-addon chart (and where its objects go unless they say)."""
ADDON_RELEASE_NAME = "cluster-addon"
"""The Helm release name upstream renders cluster-addon charts with."""
ADDON_VALUES_FILE = "cluster-addon-values.yaml"
STAGE_VALUES_FILE = "overwrite.yaml"
"""A stage chart's values template, rendered over the Cluster as cluster-addon-values.yaml is."""
STAGE_CHARTS_DIR = "cluster-addon-stages"
SOURCES_DIR = "sources"
"""Under the store's root: a directory per stack's own source, and in it one per identity reading it."""


@dataclass
class StackRuntime:
    """The Cluster Stack operator's runtime (:attr:`operator_core.reconciling.Context.runtime`), made by
    its start hook."""

    settings: ClusterStackSettings
    sources: StackSources
    stores: dict[str, ReleaseStore]
    """Downloaded releases by store key ("" the operator's own source, else source and identity:
    :attr:`BoundSource.key`): see :meth:`store`."""
    helm_home: Path
    workloads: WorkloadClients
    """Clients of the workload clusters, made from their kubeconfig Secrets."""
    _listings: dict[tuple[str, str] | None, tuple[list[SourceRelease], float]] = field(default_factory=dict)
    """Each source's last listing and when it was made, by the stack owning it (None: the operator's own)."""
    _listing_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    _rendered: dict[tuple[str, str, str], str] = field(default_factory=dict)
    """(release tag, namespace, source key) -> the rendered cluster-class chart."""
    _rendered_addons: dict[tuple[str, str, str], tuple[tuple[str, str, str], str]] = field(
        default_factory=dict
    )
    """(namespace, Cluster, stage or "") -> ((release tag, the Cluster's resourceVersion, source key),
    rendered)."""

    @classmethod
    def from_settings(cls, settings: ClusterStackSettings, field_manager: str) -> StackRuntime:
        salt = identity_salt(settings.release_dir / "cluster-stacks" / SOURCES_DIR)
        return cls(
            settings=settings,
            sources=StackSources(release_source(settings), salt),
            stores={},
            helm_home=settings.release_dir / "helm",
            workloads=WorkloadClients(field_manager),
        )

    def store(self, key: str = "") -> ReleaseStore:
        """The downloads made under ``key`` (:attr:`BoundSource.key`): the operator's own source's in
        ``cluster-stacks/``, a stack's own source's in ``cluster-stacks/sources/<source>/<identity>/``,
        so that two sources publishing the same tag never share a download, and neither do two
        credentials reading one source."""
        if key not in self.stores:
            root = self.settings.release_dir / "cluster-stacks"
            self.stores[key] = ReleaseStore(root / SOURCES_DIR / key if key else root)
        return self.stores[key]

    async def releases(self, bound: BoundSource) -> tuple[list[SourceRelease], float]:
        """What the source offers, and the seconds until it is listed again (raises its SourceError)."""
        async with self._listing_lock:
            listing, listed_at = self._listings.get(bound.owner, (None, 0.0))
            age = time.monotonic() - listed_at
            if listing is None or age >= self.settings.poll_seconds:
                listing = await bound.source.list_releases()
                self._listings[bound.owner] = (listing, time.monotonic())
                age = 0.0
            return listing, self.settings.poll_seconds - age

    async def rendered(self, release: ReleaseName, namespace: str, source_key: str = "") -> str:
        """The release's cluster-class chart rendered as upstream renders it (raises HelmError)."""
        key = (release.tag, namespace, source_key)
        if key not in self._rendered:
            chart = self.store(source_key).path(release) / release.cluster_class_chart
            self._rendered[key] = await helm_template(
                self.settings.helm, chart, release.stack, namespace, home=self.helm_home
            )
        return self._rendered[key]

    async def rendered_addons(
        self,
        release: ReleaseName,
        addon_version: str,
        kubernetes_version: str,
        cluster: Mapping[str, Any],
        stage: str | None = None,
        *,
        source_key: str = "",
        registry: RegistryAccess | None = None,
        template_data: Callable[[], Awaitable[Mapping[str, Any]]] | None = None,
    ) -> str:
        """The release's cluster addons rendered for ``cluster`` as upstream renders them, CRDs
        included, for the release's Kubernetes version, with the dependencies a chart declares and
        lacks fetched from their repositories first (raises HelmError):

        - the whole cluster-addon chart, with ``cluster-addon-values.yaml`` rendered over the Cluster
          as its values;
        - or, for a ``stage`` of a staged release, that stage's chart folder of the cluster-addon
          archive, with its ``overwrite.yaml`` rendered over the Cluster as its values.

        ``template_data`` gives what the values templates read (``.Cluster``, and the objects it
        references); it is called only when the addons are rendered again. ``registry``: how helm
        reaches the source's OCI registry, where a chart's dependencies may be (its stack's
        credentials and CA)."""
        metadata = cluster["metadata"]
        key = (metadata["namespace"], metadata["name"], stage or "")
        version = (release.tag, str(metadata.get("resourceVersion", "")), source_key)
        held = self._rendered_addons.get(key)
        if held is not None and held[0] == version:
            return held[1]
        directory = self.store(source_key).path(release)
        if stage is None:
            chart = directory / release.cluster_addon_chart(addon_version)
            values_file = directory / ADDON_VALUES_FILE
        else:
            chart = await self._stage_charts(release, addon_version, source_key) / stage
            values_file = chart / STAGE_VALUES_FILE
        values = None
        if values_file.exists():
            data = await template_data() if template_data is not None else {"Cluster": cluster}
            values = await render_values_template(
                self.settings.helm, values_file.read_text(), data, home=self.helm_home
            )
        rendered = await helm_template(
            self.settings.helm,
            chart,
            ADDON_RELEASE_NAME,
            ADDON_NAMESPACE,
            home=self.helm_home,
            values=values,
            include_crds=True,
            kube_version=kubernetes_version,
            # scs2's stage charts declare remote dependencies and ship no charts/ folder.
            dependency_update=True,
            registry=registry,
        )
        self._rendered_addons[key] = (version, rendered)
        return rendered

    async def stage_names(self, release: ReleaseName, addon_version: str, source_key: str = "") -> set[str]:
        """The chart folders of a staged release's cluster-addon archive."""
        charts = await self._stage_charts(release, addon_version, source_key)
        return {entry.name for entry in charts.iterdir() if entry.is_dir()}

    async def _stage_charts(self, release: ReleaseName, addon_version: str, source_key: str) -> Path:
        """Where a staged release's cluster-addon archive (a tar of one chart folder per stage) is
        unpacked, once, beside the release's assets (raises HelmError when it is no tar)."""
        directory = self.store(source_key).path(release)
        unpacked = directory / STAGE_CHARTS_DIR
        if not unpacked.is_dir():
            await asyncio.to_thread(_unpack, directory / release.cluster_addon_chart(addon_version), unpacked)
        return unpacked

    def forget(self, release: ReleaseName, source_key: str = "") -> None:
        """A release is gone from every namespace reading its source (``source_key``, the stack's
        annotation: :func:`~clusterstack_operator.resources.source_key`): its rendered charts and its
        downloaded assets go too, whichever identity downloaded them."""

        def of_it(store_key: str) -> bool:
            return store_key == source_key or (bool(source_key) and store_key.startswith(f"{source_key}/"))

        self._rendered = {
            key: text for key, text in self._rendered.items() if not (key[0] == release.tag and of_it(key[2]))
        }
        self._rendered_addons = {
            key: held
            for key, held in self._rendered_addons.items()
            if not (held[0][0] == release.tag and of_it(held[0][2]))
        }
        if not source_key:
            self.store().remove(release)
            return
        identities = self.settings.release_dir / "cluster-stacks" / SOURCES_DIR / source_key
        for identity in identities.iterdir() if identities.is_dir() else ():
            if identity.is_dir():
                self.store(f"{source_key}/{identity.name}").remove(release)


def _unpack(archive: Path, into: Path) -> None:
    """Unpack ``archive`` (tar, compressed or not) into ``into`` whole or not at all. Only folders and
    regular files are taken, each inside ``into``: a member that would land outside it, a link or a
    device file refuses the whole archive.

    By hand, not with tarfile's ``filter="data"``: the image's Python (Debian bookworm's 3.11.2) is older
    than that argument (3.11.4), and a staged release crashed every reconcile there (found by the
    in-cluster e2e test)."""
    partial = into.with_name(into.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    try:
        partial.mkdir(parents=True)
        with tarfile.open(archive, "r:*") as tar:
            for member in tar:
                _unpack_member(tar, member, partial)
    except (tarfile.TarError, OSError) as error:
        shutil.rmtree(partial, ignore_errors=True)
        raise HelmError(f"{archive.name} cannot be unpacked as a tar of stage charts: {error}") from None
    partial.rename(into)


def _unpack_member(tar: tarfile.TarFile, member: tarfile.TarInfo, root: Path) -> None:
    target = root.joinpath(member.name).resolve()
    if target != root.resolve() and not target.is_relative_to(root.resolve()):
        raise tarfile.TarError(f"member {member.name!r} would land outside the archive's folder")
    if member.isdir():
        target.mkdir(parents=True, exist_ok=True)
        return
    if not member.isfile():
        raise tarfile.TarError(f"member {member.name!r} is neither a folder nor a regular file")
    source = tar.extractfile(member)
    if source is None:
        raise tarfile.TarError(f"member {member.name!r} has no content")
    target.parent.mkdir(parents=True, exist_ok=True)
    with source, target.open("wb") as written:
        shutil.copyfileobj(source, written)
