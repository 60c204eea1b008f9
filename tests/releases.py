"""Cluster stack releases for the tests, in upstream's layout: one directory per release tag holding
metadata.yaml, hashes.json and both charts (as ``csctl`` publishes them; see docs/clusterstack.md)."""

from __future__ import annotations

import os
from pathlib import Path

from clusterstack_operator.releases.versions import ReleaseName

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
) -> tuple[ReleaseName, Path]:
    """Write release ``tag`` under ``root`` (charts of random bytes: only their presence is checked)."""
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
    (directory / release.cluster_class_chart).write_bytes(os.urandom(4096))
    if with_addon_chart:
        (directory / release.cluster_addon_chart(addon_version)).write_bytes(os.urandom(4096))
    if published_at is not None:
        os.utime(directory, (published_at, published_at))
    return release, directory
