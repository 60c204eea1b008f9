"""Releases in an OCI registry: one repository holds every stack, one tag per release (dash form).

A release's files are its artifact's layers, each named by its ``org.opencontainers.image.title``
annotation (what upstream's ``csctl`` pushes, with ``artifactType:
application/vnd.scs.cluster-stacks.v1`` and an empty config). This speaks the OCI distribution API
itself, over aiohttp, rather than through a client library: three calls (list tags, read a manifest,
read a blob), every page of tags, each blob streamed to disk and checked against its digest, and a
title that names anything but a plain file name refused.

Authentication as upstream's registry client does it: an access token is sent as a bearer token
(base64-encoded first, as upstream encodes ``OCI_ACCESS_TOKEN``); otherwise a user name and
password answer a Basic challenge, or buy a token from a Bearer challenge's realm. Without them, a
Bearer challenge is answered anonymously (a public repository on Harbor, ghcr.io, Docker Hub). A
bought token is used until a little before its ``expires_in`` (60 s where the token service says
none, as the token specification has it), then bought again; one the registry refuses before that
is bought again once. HTTPS by default, with a CA bundle trusted besides the system's; plain HTTP
only when asked for (a local registry).
"""

from __future__ import annotations

import base64
import re
import ssl
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
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
    trusting,
)
from operator_core.secrets import register_secret

__all__ = ["OciRegistry", "OciSettings"]

MANIFEST_TYPES = (
    "application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json"
)
TITLE = "org.opencontainers.image.title"
DEFAULT_TOKEN_SECONDS = 60.0
"""A token's lifetime where the token service gives no ``expires_in`` (the token specification's)."""
_CHALLENGE = re.compile(r'(\w+)="([^"]*)"')


@dataclass(frozen=True)
class OciSettings:
    """Where the releases are, and how to get in."""

    repository: str
    """``host[:port]/path``, as upstream's OCI_REPOSITORY."""
    username: str | None = None
    password: str | None = None
    access_token: str | None = None
    """Sent base64-encoded as a bearer token, as upstream does with OCI_ACCESS_TOKEN."""
    plain_http: bool = False
    ca_bundle: Path | None = None
    ca_data: str | None = None
    """PEM text of CAs to trust besides the system's (a stack's CA Secret)."""
    timeout: float = 30.0

    @property
    def host(self) -> str:
        return self.repository.split("/", 1)[0]

    @property
    def path(self) -> str:
        _, _, path = self.repository.partition("/")
        if not path:
            raise SourceError(f"OCI repository {self.repository!r} names no repository after the host")
        return path


def token_lifetime(expires_in: object) -> float:
    """How long to use a bought token: its ``expires_in`` less a margin (a fifth of it, at most 30 s),
    so that no request goes out with one about to expire."""
    seconds = (
        float(expires_in) if isinstance(expires_in, int | float) and expires_in > 0 else DEFAULT_TOKEN_SECONDS
    )
    return seconds - min(seconds / 5, 30.0)


class OciRegistry:
    """The releases tagged in one OCI repository."""

    def __init__(self, settings: OciSettings) -> None:
        self.settings = settings
        for secret in (settings.password, settings.access_token):
            if secret:
                register_secret(secret)
        scheme = "http" if settings.plain_http else "https"
        self._base = f"{scheme}://{settings.host}"
        self._ssl: Any = True
        if settings.ca_bundle or settings.ca_data:
            try:
                self._ssl = trusting(settings.ca_bundle, settings.ca_data)
            except (ssl.SSLError, OSError) as error:
                raise SourceError(f"{self.description}: its CA bundle cannot be read: {error}") from None
        self._session: aiohttp.ClientSession | None = None
        self._fixed: str | None = None
        """The access token's Authorization, when one is set: sent always, never renewed."""
        self._bought: str | None = None
        """The Authorization a challenge was answered with (Basic, or a bought Bearer token)."""
        self._bought_until = float("inf")
        """When a bought token is to be bought again (monotonic seconds)."""
        if settings.access_token:
            encoded = base64.b64encode(settings.access_token.encode()).decode()
            register_secret(encoded)
            self._fixed = f"Bearer {encoded}"

    @property
    def description(self) -> str:
        return f"OCI repository {self.settings.repository}"

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    # -- the three calls

    async def list_releases(self) -> list[SourceRelease]:
        tags: list[str] = []
        url: str | None = f"/v2/{self.settings.path}/tags/list?n=1000"
        while url is not None:
            async with self._get(url, "listing tags") as response:
                if response.status == 404:
                    return []  # no repository yet: nothing published
                self._check(response, "listing tags")
                tags.extend((await response.json(content_type=None)).get("tags") or [])
                url = next_page(response)
        return [SourceRelease(tag) for tag in tags]

    async def download(self, tag: str, into: Path) -> None:
        what = f"downloading release {tag}"
        async with self._get(
            f"/v2/{self.settings.path}/manifests/{tag}", what, headers={"Accept": MANIFEST_TYPES}
        ) as response:
            if response.status == 404:
                raise ReleaseNotFound(f"{self.description} has no release {tag}")
            self._check(response, what)
            manifest = await response.json(content_type=None)
        for layer in manifest.get("layers") or []:
            title = (layer.get("annotations") or {}).get(TITLE)
            if not title:
                continue  # not a file of the release
            if "/" in title or title in (".", "..") or title.startswith("."):
                raise SourceError(f"{self.description}: {tag} has a layer titled {title!r}, not a file name")
            await self._fetch_blob(layer, into / title, what)

    async def _fetch_blob(self, layer: Mapping[str, Any], target: Path, what: str) -> None:
        digest = str(layer.get("digest", ""))
        algorithm, _, expected = digest.partition(":")
        if algorithm != "sha256" or not expected:
            raise SourceError(f"{self.description}: {what}: {target.name} has no sha256 digest ({digest!r})")
        async with self._get(f"/v2/{self.settings.path}/blobs/{digest}", what) as response:
            self._check(response, what)
            await stream_to_file(response, target, expected, description=self.description, what=what)

    # -- HTTP and the registry's challenges

    @asynccontextmanager
    async def _get(
        self, url: str, what: str, headers: Mapping[str, str] | None = None
    ) -> AsyncIterator[aiohttp.ClientResponse]:
        """GET ``url``, meeting the registry's challenge when it asks for one (at most twice: see below)."""
        if self._session is None:
            self._session = open_session(self.settings.timeout)
        if time.monotonic() >= self._bought_until:
            self._bought, self._bought_until = None, float("inf")  # buy a fresh one on the next 401
        try:
            response = await self._send(url, headers)
            # The first answer buys what the request lacks; a second, once, replaces a token the
            # registry refused (revoked, or expired sooner than the token service said).
            for _ in range(2):
                if response.status != 401 or self._fixed is not None:
                    break
                challenge = response.headers.get("WWW-Authenticate", "")
                response.release()
                await self._answer(challenge, what)
                response = await self._send(url, headers)
        except HttpFailure as error:
            raise failed(self.description, what, error) from error
        async with released(response):
            yield response

    async def _send(self, url: str, headers: Mapping[str, str] | None) -> aiohttp.ClientResponse:
        assert self._session is not None
        wanted = dict(headers or {})
        authorization = self._fixed or self._bought
        if authorization:
            wanted["Authorization"] = authorization
        return await self._session.get(f"{self._base}{url}", headers=wanted, ssl=self._ssl)

    async def _answer(self, challenge: str, what: str) -> None:
        """Meet a 401's challenge with the credentials we have, or anonymously where the registry lets
        anyone buy a token."""
        scheme = challenge.split(" ", 1)[0].lower()
        user, password = self.settings.username, self.settings.password
        basic = None
        if user and password:
            basic = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
            register_secret(basic.split(" ", 1)[1])
        if scheme == "basic":
            if basic is None:
                raise SourceError(
                    f"{self.description}: {what}: the registry asks for a user name and password "
                    "(HTTP 401, Basic) and none are set"
                )
            self._bought = basic
            return
        parameters = dict(_CHALLENGE.findall(challenge))
        realm = parameters.pop("realm", "")
        if scheme != "bearer" or not realm:
            raise SourceError(f"{self.description}: {what}: unsupported challenge {scheme!r}")
        assert self._session is not None
        token_what = f"{what} (its token service {realm.split('?', 1)[0]})"
        async with self._session.get(
            realm, params=parameters, headers={"Authorization": basic} if basic else {}, ssl=self._ssl
        ) as response:
            if response.status in (401, 403) and basic is None:
                raise SourceError(
                    f"{self.description}: {token_what}: anonymous access is refused "
                    f"(HTTP {response.status}); set a user name and password, or an access token"
                )
            self._check(response, token_what)
            body = await response.json(content_type=None)
        token = body.get("token") or body.get("access_token")
        if not token:
            raise SourceError(f"{self.description}: {token_what}: answered no token")
        register_secret(token)
        self._bought = f"Bearer {token}"
        self._bought_until = time.monotonic() + token_lifetime(body.get("expires_in"))

    def _check(self, response: aiohttp.ClientResponse, what: str) -> None:
        code = response.status
        if code in (401, 403):
            raise SourceError(
                f"{self.description}: {what}: the registry refused the credentials (HTTP {code})"
            )
        if code >= 400:
            raise SourceError(f"{self.description}: {what}: HTTP {code}")
