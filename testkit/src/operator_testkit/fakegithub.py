"""A small stand-in for GitHub's REST API, on loopback: the one fake the suite allows.

It serves the releases of one repository from a directory (``<root>/<tag>/<asset files>``, the
layout of :class:`clusterstack_operator.sources.local.LocalDirectory`) and answers the endpoints a
release client uses, with complete objects, as GitHub answers them:

- ``GET /repos/{owner}/{repo}/releases`` with ``per_page`` and ``page``, and a ``Link`` header to
  the next and last pages, as GitHub pages its lists;
- ``GET /repos/{owner}/{repo}/releases/tags/{tag}``;
- ``GET /repos/{owner}/{repo}/releases/assets/{id}`` with ``Accept: application/octet-stream``,
  answered as GitHub answers it: a 302 to a signed URL of its object storage (here ``/storage/...``),
  which refuses a request that also carries an ``Authorization`` header (HTTP 400, as S3 does).

With a token set, every request must carry ``Authorization: Bearer <token>`` (or ``token <token>``),
or it gets 401 as GitHub answers. :attr:`FakeGitHub.break_downloads_after` makes the next release
download fail after that many assets (the connection drops mid-body), to test half-done downloads.
A release's publish time is its directory's modification time, so publishing during a test is
creating a directory.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import mimetypes
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from aiohttp import web

from operator_testkit.controlplane import free_port

__all__ = ["FakeGitHub", "fake_github"]

_USER: dict[str, Any] = {
    "login": "release-bot",
    "id": 1,
    "node_id": "U_1",
    "avatar_url": "",
    "gravatar_id": "",
    "url": "",
    "html_url": "",
    "followers_url": "",
    "following_url": "",
    "gists_url": "",
    "starred_url": "",
    "subscriptions_url": "",
    "organizations_url": "",
    "repos_url": "",
    "events_url": "",
    "received_events_url": "",
    "type": "Bot",
    "site_admin": False,
}


_STORAGE = "/storage"
_SIGNING_KEY = secrets.token_bytes(16)


def _signature(path: str) -> str:
    return hmac.new(_SIGNING_KEY, path.encode(), "sha256").hexdigest()


def _stable_id(text: str) -> int:
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:6], "big")


def _time(path: Path) -> str:
    return datetime.fromtimestamp(path.stat().st_mtime, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class FakeGitHub:
    """One repository's releases, served from ``root``."""

    def __init__(self, root: Path, owner: str, repository: str, *, token: str | None = None) -> None:
        self.root, self.owner, self.repository, self.token = root, owner, repository, token
        self.base_url = ""
        self.requests: list[str] = []
        """Every request's path and query, in order."""
        self.break_downloads_after: int | None = None
        self._served_assets = 0

    # -- the objects GitHub would answer

    def _releases(self) -> list[Path]:
        found = [p for p in self.root.iterdir() if p.is_dir() and not p.name.startswith(".")]
        return sorted(found, key=lambda p: p.stat().st_mtime, reverse=True)  # newest first, as GitHub

    def _asset(self, release: Path, file: Path) -> dict[str, Any]:
        asset_id = _stable_id(f"{release.name}/{file.name}")
        api = f"{self.base_url}/repos/{self.owner}/{self.repository}/releases/assets/{asset_id}"
        return {
            "url": api,
            "browser_download_url": f"{self.base_url}/download/{release.name}/{file.name}",
            "id": asset_id,
            "node_id": f"RA_{asset_id}",
            "name": file.name,
            "label": None,
            "state": "uploaded",
            "content_type": mimetypes.guess_type(file.name)[0] or "application/octet-stream",
            "size": file.stat().st_size,
            "digest": "sha256:" + hashlib.sha256(file.read_bytes()).hexdigest(),
            "download_count": 0,
            "created_at": _time(file),
            "updated_at": _time(file),
            "uploader": _USER,
        }

    def _release(self, release: Path) -> dict[str, Any]:
        release_id = _stable_id(release.name)
        api = f"{self.base_url}/repos/{self.owner}/{self.repository}/releases/{release_id}"
        return {
            "url": api,
            "html_url": f"{self.base_url}/{self.owner}/{self.repository}/releases/tag/{release.name}",
            "assets_url": f"{api}/assets",
            "upload_url": f"{api}/assets{{?name,label}}",
            "tarball_url": None,
            "zipball_url": None,
            "id": release_id,
            "node_id": f"RE_{release_id}",
            "tag_name": release.name,
            "target_commitish": "main",
            "name": release.name,
            "body": None,
            "draft": False,
            "prerelease": False,
            "created_at": _time(release),
            "published_at": _time(release),
            "author": _USER,
            "assets": [self._asset(release, f) for f in sorted(release.iterdir()) if f.is_file()],
        }

    # -- the endpoints

    def _authorised(self, request: web.Request) -> bool:
        if self.token is None:
            return True
        given = request.headers.get("Authorization", "")
        return given in (f"Bearer {self.token}", f"token {self.token}")

    @web.middleware
    async def _gate(self, request: web.Request, handler: Any) -> web.StreamResponse:
        self.requests.append(request.path_qs)
        if request.path.startswith(_STORAGE):
            response: web.StreamResponse = await handler(request)
            return response
        if not self._authorised(request):
            return web.json_response({"message": "Bad credentials", "status": "401"}, status=401)
        if request.match_info.get("owner") not in (None, self.owner) or request.match_info.get(
            "repo"
        ) not in (None, self.repository):
            return web.json_response({"message": "Not Found", "status": "404"}, status=404)
        answer: web.StreamResponse = await handler(request)
        return answer

    async def _list(self, request: web.Request) -> web.Response:
        per_page = min(int(request.query.get("per_page", "30")), 100)
        page = max(int(request.query.get("page", "1")), 1)
        releases = self._releases()
        last = max((len(releases) + per_page - 1) // per_page, 1)
        chunk = releases[(page - 1) * per_page : page * per_page]
        response = web.json_response([self._release(r) for r in chunk])
        url = f"{self.base_url}/repos/{self.owner}/{self.repository}/releases?per_page={per_page}"
        links = [f'<{url}&page={page + 1}>; rel="next"'] if page < last else []
        links.append(f'<{url}&page={last}>; rel="last"')
        response.headers["Link"] = ", ".join(links)
        return response

    async def _by_tag(self, request: web.Request) -> web.Response:
        release = self.root / request.match_info["tag"]
        if not release.is_dir():
            return web.json_response({"message": "Not Found", "status": "404"}, status=404)
        return web.json_response(self._release(release))

    async def _asset_bytes(self, request: web.Request) -> web.StreamResponse:
        wanted = int(request.match_info["asset"])
        for release in self._releases():
            for file in release.iterdir():
                if file.is_file() and _stable_id(f"{release.name}/{file.name}") == wanted:
                    return await self._send(request, file)
        return web.json_response({"message": "Not Found", "status": "404"}, status=404)

    async def _send(self, request: web.Request, file: Path) -> web.StreamResponse:
        if request.headers.get("Accept") != "application/octet-stream":
            release = file.parent
            return web.json_response(self._asset(release, file))
        path = f"{_STORAGE}/{file.parent.name}/{file.name}"
        raise web.HTTPFound(f"{self.base_url}{path}?signature={_signature(path)}")

    async def _storage(self, request: web.Request) -> web.StreamResponse:
        """GitHub's object storage behind a signed URL: the signature is the only credential."""
        if "Authorization" in request.headers:
            return web.Response(status=400, text="Only one auth mechanism allowed")
        if request.query.get("signature") != _signature(request.path):
            return web.Response(status=403, text="Signature does not match")
        file = self.root / request.match_info["release"] / request.match_info["name"]
        if not file.is_file():
            return web.Response(status=404)
        content = await asyncio.to_thread(file.read_bytes)
        response = web.StreamResponse(headers={"Content-Type": "application/octet-stream"})
        response.content_length = len(content)
        await response.prepare(request)
        if self.break_downloads_after is not None and self._served_assets >= self.break_downloads_after:
            self.break_downloads_after, self._served_assets = None, 0
            await response.write(content[: len(content) // 2])
            if request.transport is not None:
                request.transport.close()  # the connection drops mid-body
            return response
        self._served_assets += 1
        await response.write(content)
        await response.write_eof()
        return response

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self._gate])
        base = "/repos/{owner}/{repo}/releases"
        app.router.add_get(base, self._list)
        app.router.add_get(base + "/tags/{tag}", self._by_tag)
        app.router.add_get(base + "/assets/{asset}", self._asset_bytes)
        app.router.add_get(_STORAGE + "/{release}/{name}", self._storage)
        return app


@asynccontextmanager
async def fake_github(
    root: Path,
    owner: str = "sovereigncloudstack",
    repository: str = "cluster-stacks",
    *,
    token: str | None = None,
) -> AsyncIterator[FakeGitHub]:
    """Serve ``root``'s releases on a free loopback port for as long as the context lasts."""
    fake = FakeGitHub(root, owner, repository, token=token)
    runner = web.AppRunner(fake.app(), access_log=None)
    await runner.setup()
    port = free_port()
    site = web.TCPSite(runner, "127.0.0.1", port)
    await site.start()
    fake.base_url = f"http://127.0.0.1:{port}"
    try:
        yield fake
    finally:
        await runner.cleanup()
