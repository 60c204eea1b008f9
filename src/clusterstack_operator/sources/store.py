"""Downloaded releases on disk: each whole or not there at all.

A release is downloaded into a hidden working directory beside its final place, checked
(:func:`~clusterstack_operator.releases.assets.check_release`), and only then renamed to
``<root>/<tag>``: a rename is atomic, so a directory under its tag's name is always a whole,
checked release, and is never downloaded again. A download that fails, or a release whose
assets are wrong, leaves nothing behind: the working directory is removed, and the next
reconcile starts clean. A working directory left by a process that died mid-download is
removed when the store opens.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from pathlib import Path

from clusterstack_operator.releases.assets import METADATA_FILE, ReleaseMetadata, check_release
from clusterstack_operator.releases.versions import ReleaseName
from clusterstack_operator.sources.base import ReleaseSource

__all__ = ["ReleaseStore"]

_WORKING_PREFIX = ".downloading-"


class ReleaseStore:
    """``<root>/<tag>/``: one whole release per directory."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        for leftover in root.glob(f"{_WORKING_PREFIX}*"):
            shutil.rmtree(leftover, ignore_errors=True)
        self._locks: dict[str, asyncio.Lock] = {}

    def path(self, release: ReleaseName) -> Path:
        return self.root / release.tag

    def has(self, release: ReleaseName) -> bool:
        return self.path(release).is_dir()

    def metadata(self, release: ReleaseName) -> ReleaseMetadata:
        """The metadata of a release the store has (checked when it was stored)."""
        return check_release(release, _files(self.path(release)))

    async def fetch(self, release: ReleaseName, source: ReleaseSource) -> ReleaseMetadata:
        """The release's metadata, downloading it first unless the store has it whole.

        Raises the source's error, or :class:`~clusterstack_operator.releases.assets.InvalidRelease`,
        and then leaves nothing of the attempt behind.
        """
        async with self._locks.setdefault(release.tag, asyncio.Lock()):
            if self.has(release):
                return self.metadata(release)
            working = Path(tempfile.mkdtemp(prefix=f"{_WORKING_PREFIX}{release.tag}-", dir=self.root))
            try:
                await source.download(release.tag, working)
                metadata = await asyncio.to_thread(self._keep, release, working)
            except BaseException:
                shutil.rmtree(working, ignore_errors=True)
                raise
            return metadata

    def _keep(self, release: ReleaseName, working: Path) -> ReleaseMetadata:
        """Check what was downloaded, then give it its tag's name in one atomic rename."""
        metadata = check_release(release, _files(working))
        working.rename(self.path(release))
        return metadata

    def remove(self, release: ReleaseName) -> None:
        shutil.rmtree(self.path(release), ignore_errors=True)


def _files(directory: Path) -> dict[str, bytes]:
    """Every file's name; the metadata's content (the charts are read by Helm, not here)."""
    return {
        entry.name: entry.read_bytes() if entry.name == METADATA_FILE else b""
        for entry in directory.iterdir()
        if entry.is_file()
    }
