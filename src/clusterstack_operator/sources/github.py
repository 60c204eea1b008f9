"""Releases of a GitHub repository, read with githubkit (decision 10 in docs/decisions.md).

Every page of releases is read (upstream reads only the first 30). A release is matched by its
name, as upstream does, and downloaded by the same string as its tag: stacks published for the Go
operator name both the same. Each asset is fetched through the API with ``Accept:
application/octet-stream``, so that a private repository's assets come with the same token, and
streamed to disk. The token never appears in an error: it is registered with the suite's scrubber.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
from githubkit import GitHub
from githubkit.exception import GitHubException, RequestFailed

from clusterstack_operator.sources.base import ReleaseNotFound, SourceError, SourceRelease
from operator_core.secrets import register_secret, scrub

__all__ = ["GitHubReleases"]

PER_PAGE = 100


class GitHubReleases:
    """The releases of ``organisation/repository``; ``base_url`` points elsewhere than api.github.com."""

    def __init__(
        self,
        organisation: str,
        repository: str,
        token: str | None = None,
        *,
        base_url: str | None = None,
        timeout: float = 30.0,
    ) -> None:
        self.organisation, self.repository = organisation, repository
        if token:
            register_secret(token)
        options: dict[str, Any] = {"timeout": timeout, "auto_retry": False}
        if base_url:
            options["base_url"] = base_url.rstrip("/") + "/"
        self._github: GitHub[Any] = GitHub(token, **options) if token else GitHub(**options)

    @property
    def description(self) -> str:
        return f"GitHub releases of {self.organisation}/{self.repository}"

    def _failed(self, what: str, error: Exception) -> SourceError:
        if isinstance(error, RequestFailed):
            code = error.response.status_code
            if code == 404:
                return ReleaseNotFound(f"{self.description}: {what}: not found")
            if code in (401, 403):
                return SourceError(
                    f"{self.description}: {what}: GitHub refused the access token (HTTP {code})"
                )
            return SourceError(f"{self.description}: {what}: HTTP {code}")
        return SourceError(scrub(f"{self.description}: {what}: {type(error).__name__}: {error}"))

    async def list_releases(self) -> list[SourceRelease]:
        releases = []
        try:
            async for release in self._github.rest.paginate(
                self._github.rest.repos.async_list_releases,
                owner=self.organisation,
                repo=self.repository,
                per_page=PER_PAGE,
            ):
                if release.draft:
                    continue
                releases.append(SourceRelease(release.name or release.tag_name, release.published_at or None))
        except (GitHubException, httpx.HTTPError) as error:
            raise self._failed("listing releases", error) from error
        return releases

    async def download(self, tag: str, into: Path) -> None:
        try:
            found = await self._github.rest.repos.async_get_release_by_tag(
                self.organisation, self.repository, tag
            )
            for asset in found.parsed_data.assets:
                await self._fetch_asset(asset.id, into / asset.name)
        except (GitHubException, httpx.HTTPError) as error:
            raise self._failed(f"downloading release {tag}", error) from error

    async def _fetch_asset(self, asset_id: int, target: Path) -> None:
        response = await self._github.arequest(
            "GET",
            f"/repos/{self.organisation}/{self.repository}/releases/assets/{asset_id}",
            headers={"Accept": "application/octet-stream"},
        )
        await asyncio.to_thread(target.write_bytes, response.content)
