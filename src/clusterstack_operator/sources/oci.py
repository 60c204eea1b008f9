"""Releases in an OCI registry: one repository holds every stack, one tag per release (dash form).

A release's files are its artifact's layers, each named by its ``org.opencontainers.image.title``
annotation (what upstream's ``csctl`` pushes, with ``artifactType:
application/vnd.scs.cluster-stacks.v1`` and an empty config). This speaks the OCI distribution API
itself, over httpx, rather than through a client library: three calls (list tags, read a manifest,
read a blob), every page of tags, each blob checked against its digest, and a title that names
anything but a plain file name refused.

Authentication as upstream's registry client does it: an access token is sent as a bearer token
(base64-encoded first, as upstream encodes ``OCI_ACCESS_TOKEN``); otherwise a user name and
password answer a Basic challenge, or buy a token from a Bearer challenge's realm. HTTPS by
default, with a CA bundle of the user's choice; plain HTTP only when asked for (a local registry).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import re
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from clusterstack_operator.sources.base import ReleaseNotFound, SourceError, SourceRelease
from operator_core.secrets import register_secret, scrub

__all__ = ["OciRegistry", "OciSettings", "trusting"]

MANIFEST_TYPES = (
    "application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json"
)
TITLE = "org.opencontainers.image.title"
_CHALLENGE = re.compile(r'(\w+)="([^"]*)"')
_NEXT = re.compile(r'<([^>]+)>\s*;\s*rel="next"')


def trusting(ca_bundle: Path) -> ssl.SSLContext:
    """A client context that trusts the system's CAs and, besides them, those of ``ca_bundle`` (a private
    registry's): ``create_default_context(cafile=...)`` alone would trust the bundle instead."""
    context = ssl.create_default_context()
    context.load_verify_locations(cafile=str(ca_bundle))
    return context


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


class OciRegistry:
    """The releases tagged in one OCI repository."""

    def __init__(self, settings: OciSettings) -> None:
        self.settings = settings
        for secret in (settings.password, settings.access_token):
            if secret:
                register_secret(secret)
        scheme = "http" if settings.plain_http else "https"
        verify: Any = trusting(settings.ca_bundle) if settings.ca_bundle else True
        self._client = httpx.AsyncClient(
            base_url=f"{scheme}://{settings.host}",
            verify=verify,
            timeout=settings.timeout,
            follow_redirects=True,
            trust_env=False,
        )
        self._authorization: str | None = None
        if settings.access_token:
            encoded = base64.b64encode(settings.access_token.encode()).decode()
            register_secret(encoded)
            self._authorization = f"Bearer {encoded}"

    @property
    def description(self) -> str:
        return f"OCI repository {self.settings.repository}"

    async def aclose(self) -> None:
        await self._client.aclose()

    # -- the three calls

    async def list_releases(self) -> list[SourceRelease]:
        tags: list[str] = []
        url: str | None = f"/v2/{self.settings.path}/tags/list?n=1000"
        while url is not None:
            response = await self._get(url, "listing tags")
            if response.status_code == 404:
                return []  # no repository yet: nothing published
            self._check(response, "listing tags")
            tags.extend(response.json().get("tags") or [])
            found = _NEXT.search(response.headers.get("Link", ""))
            url = found.group(1) if found else None
        return [SourceRelease(tag) for tag in tags]

    async def download(self, tag: str, into: Path) -> None:
        what = f"downloading release {tag}"
        response = await self._get(
            f"/v2/{self.settings.path}/manifests/{tag}", what, headers={"Accept": MANIFEST_TYPES}
        )
        if response.status_code == 404:
            raise ReleaseNotFound(f"{self.description} has no release {tag}")
        self._check(response, what)
        for layer in response.json().get("layers") or []:
            title = (layer.get("annotations") or {}).get(TITLE)
            if not title:
                continue  # not a file of the release
            if "/" in title or title in (".", "..") or title.startswith("."):
                raise SourceError(f"{self.description}: {tag} has a layer titled {title!r}, not a file name")
            await self._fetch_blob(layer, into / title, what)

    async def _fetch_blob(self, layer: Mapping[str, Any], target: Path, what: str) -> None:
        digest = str(layer.get("digest", ""))
        response = await self._get(f"/v2/{self.settings.path}/blobs/{digest}", what)
        self._check(response, what)
        algorithm, _, expected = digest.partition(":")
        if algorithm != "sha256" or hashlib.sha256(response.content).hexdigest() != expected:
            raise SourceError(f"{self.description}: {what}: {target.name} does not match its digest {digest}")
        await asyncio.to_thread(target.write_bytes, response.content)

    # -- HTTP and the registry's challenges

    async def _get(self, url: str, what: str, headers: Mapping[str, str] | None = None) -> httpx.Response:
        wanted = dict(headers or {})
        try:
            response = await self._client.get(url, headers=self._with_authorization(wanted))
            if response.status_code == 401 and self._authorization is None:
                await self._answer(response.headers.get("WWW-Authenticate", ""), what)
                response = await self._client.get(url, headers=self._with_authorization(wanted))
        except httpx.HTTPError as error:
            raise SourceError(
                scrub(f"{self.description}: {what}: {type(error).__name__}: {error}")
            ) from error
        return response

    def _with_authorization(self, headers: dict[str, str]) -> dict[str, str]:
        return {**headers, "Authorization": self._authorization} if self._authorization else headers

    async def _answer(self, challenge: str, what: str) -> None:
        """Meet a 401's challenge with the credentials we have."""
        scheme = challenge.split(" ", 1)[0].lower()
        user, password = self.settings.username, self.settings.password
        if not (user and password):
            raise SourceError(
                f"{self.description}: {what}: the registry asks for credentials and none are set"
            )
        basic = base64.b64encode(f"{user}:{password}".encode()).decode()
        register_secret(basic)
        if scheme == "basic":
            self._authorization = f"Basic {basic}"
            return
        parameters = dict(_CHALLENGE.findall(challenge))
        realm = parameters.pop("realm", "")
        if scheme != "bearer" or not realm:
            raise SourceError(f"{self.description}: {what}: unsupported challenge {scheme!r}")
        response = await self._client.get(
            realm, params=parameters, headers={"Authorization": f"Basic {basic}"}
        )
        self._check(response, f"{what} (token)")
        body = response.json()
        token = body.get("token") or body.get("access_token")
        if not token:
            raise SourceError(f"{self.description}: {what}: the token service answered no token")
        register_secret(token)
        self._authorization = f"Bearer {token}"

    def _check(self, response: httpx.Response, what: str) -> None:
        code = response.status_code
        if code in (401, 403):
            raise SourceError(
                f"{self.description}: {what}: the registry refused the credentials (HTTP {code})"
            )
        if code >= 400:
            raise SourceError(f"{self.description}: {what}: HTTP {code}")
