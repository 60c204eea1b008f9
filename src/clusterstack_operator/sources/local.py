"""Releases in a local directory, one sub-directory per tag: for providers testing their own stacks
(the seed's user story 6). Nothing is downloaded; the assets are copied into the store."""

from __future__ import annotations

import asyncio
import shutil
from datetime import UTC, datetime
from pathlib import Path

from clusterstack_operator.sources.base import ReleaseNotFound, SourceError, SourceRelease

__all__ = ["LocalDirectory"]


class LocalDirectory:
    """``<root>/<tag>/`` holds the assets of release ``<tag>``; its modification time is its publish time."""

    def __init__(self, root: Path) -> None:
        self.root = root

    @property
    def description(self) -> str:
        return f"local directory {self.root}"

    async def list_releases(self) -> list[SourceRelease]:
        if not self.root.is_dir():
            raise SourceError(f"the release directory {self.root} does not exist")
        return [
            SourceRelease(entry.name, datetime.fromtimestamp(entry.stat().st_mtime, UTC))
            for entry in sorted(self.root.iterdir())
            if entry.is_dir() and not entry.name.startswith(".")
        ]

    async def download(self, tag: str, into: Path) -> None:
        release = self.root / tag
        if not release.is_dir():
            raise ReleaseNotFound(f"{self.description} has no release {tag}")
        await asyncio.to_thread(shutil.copytree, release, into, dirs_exist_ok=True)
