"""What the Cluster Stack operator's reconciles share in one process: its settings, the release source,
the store of downloaded releases, the last listing of the source, rendered charts, and the clients of
the workload clusters.

The source is listed at most once per :attr:`ClusterStackSettings.poll_seconds` for every
ClusterStack together (one request, not one per stack), and a rendered chart is kept: a release's
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
from clusterstack_operator.helm import HelmError, helm_template, render_values_template
from clusterstack_operator.releases.versions import ReleaseName
from clusterstack_operator.sources.base import ReleaseSource, SourceRelease
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


@dataclass
class StackRuntime:
    """The Cluster Stack operator's runtime (:attr:`operator_core.reconciling.Context.runtime`), made by
    its start hook."""

    settings: ClusterStackSettings
    source: ReleaseSource
    store: ReleaseStore
    helm_home: Path
    workloads: WorkloadClients
    """Clients of the workload clusters, made from their kubeconfig Secrets."""
    _listing: list[SourceRelease] | None = None
    _listed_at: float = 0.0
    _listing_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    _rendered: dict[tuple[str, str], str] = field(default_factory=dict)
    _rendered_addons: dict[tuple[str, str, str], tuple[tuple[str, str], str]] = field(default_factory=dict)
    """(namespace, Cluster, stage or "") -> ((release tag, the Cluster's resourceVersion), rendered)."""

    @classmethod
    def from_settings(cls, settings: ClusterStackSettings, field_manager: str) -> StackRuntime:
        return cls(
            settings=settings,
            source=release_source(settings),
            store=ReleaseStore(settings.release_dir / "cluster-stacks"),
            helm_home=settings.release_dir / "helm",
            workloads=WorkloadClients(field_manager),
        )

    async def releases(self) -> tuple[list[SourceRelease], float]:
        """What the source offers, and the seconds until it is listed again (raises its SourceError)."""
        async with self._listing_lock:
            age = time.monotonic() - self._listed_at
            if self._listing is None or age >= self.settings.poll_seconds:
                self._listing = await self.source.list_releases()
                self._listed_at, age = time.monotonic(), 0.0
            return self._listing, self.settings.poll_seconds - age

    async def rendered(self, release: ReleaseName, namespace: str) -> str:
        """The release's cluster-class chart rendered as upstream renders it (raises HelmError)."""
        key = (release.tag, namespace)
        if key not in self._rendered:
            chart = self.store.path(release) / release.cluster_class_chart
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
        references); it is called only when the addons are rendered again."""
        metadata = cluster["metadata"]
        key = (metadata["namespace"], metadata["name"], stage or "")
        version = (release.tag, str(metadata.get("resourceVersion", "")))
        held = self._rendered_addons.get(key)
        if held is not None and held[0] == version:
            return held[1]
        directory = self.store.path(release)
        if stage is None:
            chart = directory / release.cluster_addon_chart(addon_version)
            values_file = directory / ADDON_VALUES_FILE
        else:
            chart = await self._stage_charts(release, addon_version) / stage
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
        )
        self._rendered_addons[key] = (version, rendered)
        return rendered

    async def stage_names(self, release: ReleaseName, addon_version: str) -> set[str]:
        """The chart folders of a staged release's cluster-addon archive."""
        charts = await self._stage_charts(release, addon_version)
        return {entry.name for entry in charts.iterdir() if entry.is_dir()}

    async def _stage_charts(self, release: ReleaseName, addon_version: str) -> Path:
        """Where a staged release's cluster-addon archive (a tar of one chart folder per stage) is
        unpacked, once, beside the release's assets (raises HelmError when it is no tar)."""
        directory = self.store.path(release)
        unpacked = directory / STAGE_CHARTS_DIR
        if not unpacked.is_dir():
            await asyncio.to_thread(_unpack, directory / release.cluster_addon_chart(addon_version), unpacked)
        return unpacked

    def forget(self, release: ReleaseName) -> None:
        """A release is gone: its rendered charts and its downloaded assets go too."""
        self._rendered = {key: text for key, text in self._rendered.items() if key[0] != release.tag}
        self._rendered_addons = {
            key: held for key, held in self._rendered_addons.items() if held[0][0] != release.tag
        }
        self.store.remove(release)


def _unpack(archive: Path, into: Path) -> None:
    """Unpack ``archive`` (tar, compressed or not) into ``into`` whole or not at all; members that would
    land outside it, links out of it and device files are refused (tarfile's data filter)."""
    partial = into.with_name(into.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    try:
        with tarfile.open(archive, "r:*") as tar:
            tar.extractall(partial, filter="data")
    except (tarfile.TarError, OSError) as error:
        shutil.rmtree(partial, ignore_errors=True)
        raise HelmError(f"{archive.name} cannot be unpacked as a tar of stage charts: {error}") from None
    partial.rename(into)
