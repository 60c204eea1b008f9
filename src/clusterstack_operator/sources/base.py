"""The one interface every release source has: list the releases, download one release's assets."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Protocol

from operator_core.errors import OperatorError

__all__ = ["ReleaseNotFound", "ReleaseSource", "SourceError", "SourceRelease"]


class SourceError(OperatorError):
    """The source could not be read (no answer, refused credentials, a broken download): temporary."""


class ReleaseNotFound(SourceError):
    """The source has no release of that tag (yet)."""


@dataclass(frozen=True)
class SourceRelease:
    """One release on a source: its tag (dash form) and, where the source says, when it was published."""

    tag: str
    published_at: datetime | None = None


class ReleaseSource(Protocol):
    """A place releases are published to."""

    @property
    def description(self) -> str:
        """Where the releases come from, for conditions and logs (never a credential)."""
        ...

    async def list_releases(self) -> list[SourceRelease]:
        """Every release the source has (all pages)."""
        ...

    async def download(self, tag: str, into: Path) -> None:
        """Write the release's assets, flat, into the existing directory ``into``."""
        ...
