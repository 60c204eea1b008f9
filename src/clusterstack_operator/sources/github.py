"""Releases of a GitHub repository, read through GitHub's REST API over aiohttp (decision 27).

Every page of releases is read (upstream reads only the first 30). A release is matched by its
name, as upstream does, and downloaded by the same string as its tag: stacks published for the Go
operator name both the same. Each asset is fetched through the API with ``Accept:
application/octet-stream``, so that a private repository's assets come with the same token. GitHub
answers that with a redirect to its object storage, whose signed URL is followed without the token
(a second credential there is refused, and the token must not leave GitHub); the asset is streamed to
disk. The token never appears in an error: it is registered with the suite's scrubber.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import aiohttp

from clusterstack_operator.sources.base import ReleaseNotFound, SourceError, SourceRelease
from clusterstack_operator.sources.http import (
    HttpFailure,
    failed,
    next_page,
    open_session,
    released,
    stream_to_file,
)
from operator_core.secrets import register_secret

__all__ = ["GITHUB_API", "GitHubReleases"]

GITHUB_API = "https://api.github.com"
PER_PAGE = 100
_HEADERS = {
    "Accept": "application/vnd.github+json",
    "X-GitHub-Api-Version": "2022-11-28",
    "User-Agent": "operator-suite-cluster-stack-operator",  # GitHub refuses requests without one
}
_REDIRECTS = (301, 302, 303, 307, 308)


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
        self._authorization = {"Authorization": f"Bearer {token}"} if token else {}
        if token:
            register_secret(token)
        self._base = (base_url or GITHUB_API).rstrip("/")
        self._timeout = timeout
        self._session: aiohttp.ClientSession | None = None

    @property
    def description(self) -> str:
        return f"GitHub repository {self.organisation}/{self.repository}"

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def list_releases(self) -> list[SourceRelease]:
        releases = []
        url: str | None = f"{self._repository}/releases?per_page={PER_PAGE}"
        while url is not None:
            async with self._get(url, "listing releases") as response:
                page = await self._json(response, "listing releases")
                url = next_page(response)
            for release in page:
                if release.get("draft"):
                    continue
                published = release.get("published_at")
                releases.append(
                    SourceRelease(
                        release.get("name") or release["tag_name"],
                        datetime.fromisoformat(published) if published else None,
                    )
                )
        return releases

    async def download(self, tag: str, into: Path) -> None:
        what = f"downloading release {tag}"
        async with self._get(f"{self._repository}/releases/tags/{tag}", what) as response:
            release = await self._json(response, what)
        for asset in release.get("assets") or []:
            name = str(asset.get("name", ""))
            if not name or "/" in name or name.startswith("."):
                raise SourceError(f"{self.description}: {what}: an asset named {name!r} is not a file name")
            algorithm, _, digest = str(asset.get("digest") or "").partition(":")
            await self._fetch_asset(
                int(asset["id"]), into / name, what, digest if algorithm == "sha256" else None
            )

    async def _fetch_asset(self, asset_id: int, target: Path, what: str, sha256: str | None) -> None:
        """One asset, checked against the digest GitHub gives for it (since 2025) where it gives one."""
        url = f"{self._repository}/releases/assets/{asset_id}"
        async with self._get(url, what, {"Accept": "application/octet-stream"}, follow=False) as response:
            location = response.headers.get("Location") if response.status in _REDIRECTS else None
            if location is None:
                await self._stream(response, target, what, sha256)
                return
        # GitHub's object storage, by a signed URL: without the token.
        async with self._get(location, what, {"Accept": "application/octet-stream"}, token=False) as response:
            await self._stream(response, target, what, sha256)

    async def _stream(
        self, response: aiohttp.ClientResponse, target: Path, what: str, sha256: str | None
    ) -> None:
        self._check(response, what)
        await stream_to_file(response, target, sha256, description=self.description, what=what)

    # -- HTTP

    @property
    def _repository(self) -> str:
        return f"{self._base}/repos/{self.organisation}/{self.repository}"

    @asynccontextmanager
    async def _get(
        self,
        url: str,
        what: str,
        headers: dict[str, str] | None = None,
        *,
        follow: bool = True,
        token: bool = True,
    ) -> AsyncIterator[aiohttp.ClientResponse]:
        if self._session is None:
            self._session = open_session(self._timeout, _HEADERS)
        wanted = {**(self._authorization if token else {}), **(headers or {})}
        try:
            response = await self._session.get(url, headers=wanted, allow_redirects=follow)
        except HttpFailure as error:
            raise failed(self.description, what, error) from error
        async with released(response):
            yield response

    async def _json(self, response: aiohttp.ClientResponse, what: str) -> Any:
        self._check(response, what)
        try:
            return await response.json(content_type=None)
        except HttpFailure as error:
            raise failed(self.description, what, error) from error
        except ValueError as error:  # not JSON
            raise failed(self.description, what, error) from error

    def _check(self, response: aiohttp.ClientResponse, what: str) -> None:
        code = response.status
        anonymous = not self._authorization
        if code == 404:
            # GitHub answers 404, not 401, to a request without a token for a private repository.
            hint = " (without a token: a private repository is not found)" if anonymous else ""
            raise ReleaseNotFound(f"{self.description}: {what}: not found{hint}")
        if code in (401, 403):
            who = "anonymous access (no token is set)" if anonymous else "the access token"
            raise SourceError(f"{self.description}: {what}: GitHub refused {who} (HTTP {code})")
        if code >= 400:
            raise SourceError(f"{self.description}: {what}: HTTP {code}")
