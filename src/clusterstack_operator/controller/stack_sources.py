"""Each ClusterStack's release source: the operator's own (its environment), or the stack's ``spec.source``.

A stack with its own source gets its own client, made from its spec and the Secrets the spec names,
kept while the spec stays the same. The Secrets are read when the client is made, not on every
reconcile and not through a watch of every Secret: a client whose source fails (a refused password,
a registry that does not answer) is dropped, so the next try reads the Secrets again and a corrected
password is taken up at the stack's next retry. Credentials go to the suite's scrubber as they are
read; no message here carries one.

A ClusterStackRelease is downloaded with its stack's client (its owner), and kept in the store under
its source's key (:func:`clusterstack_operator.resources.source_key`: where the releases are) and,
below it, the identity the download was made with (:func:`identity_key`: a keyed hash of everything
read from the stack's Secrets). A download is therefore served only to a stack that reads the same
repository with the same credentials: a stack naming another tenant's repository with a wrong
password, another password or none has an identity of its own, finds nothing stored under it, and
asks the registry, which refuses it. Every reader of the store (the release's download, its chart, a
ClusterAddon's addons) finds the key through the release's stack (:meth:`StackSources.of_release`),
never through what is written on the release: the stack's annotation
(:data:`~clusterstack_operator.resources.SOURCE_ANNOTATION`) says where the releases come from, for
people and for clearing a deleted release's downloads, and grants nothing.
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import hmac
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clusterstack_operator.api.v1alpha1 import CLUSTER_STACK, ReleaseSourceSpec, SecretKeyReference
from clusterstack_operator.helm import RegistryAccess
from clusterstack_operator.resources import SOURCE_ANNOTATION, source_key, source_key_of
from clusterstack_operator.sources.base import ReleaseSource, SourceError
from clusterstack_operator.sources.github import GitHubReleases
from clusterstack_operator.sources.oci import OciRegistry, OciSettings
from operator_core import errors
from operator_core.kube import Kube
from operator_core.secrets import register_secret

__all__ = ["BoundSource", "StackSources", "identity_key", "identity_salt"]

CA_KEY = "ca.crt"
TOKEN_KEY = "token"  # noqa: S105 (a key's name, not a token)


@dataclass(frozen=True)
class BoundSource:
    """The source one stack (or release) reads, and where what it downloads is kept."""

    source: ReleaseSource
    key: str
    """The store's key of its downloads: "" for the operator's own source, else
    ``<source key>/<identity key>``, so that only the same repository read with the same credentials
    shares a download."""
    owner: tuple[str, str] | None = None
    """The stack whose own source it is ((namespace, name)); None for the operator's own, whose listing
    every stack shares."""

    @functools.cached_property
    def registry_access(self) -> RegistryAccess | None:
        """How helm fetches chart dependencies from this source's OCI registry: with the source's own
        credentials and CA (a registry access token, sent as a bearer token, is no login helm can
        use: such a source's dependencies are fetched anonymously). None for a source of another kind.
        Made once per bound source (its CA file read once), not at every reconcile that asks."""
        if not isinstance(self.source, OciRegistry):
            return None
        settings = self.source.settings
        ca = settings.ca_data
        if ca is None and settings.ca_bundle is not None:
            ca = settings.ca_bundle.read_text()
        return RegistryAccess(
            settings.host, settings.username, settings.password, ca_pem=ca, plain_http=settings.plain_http
        )


class StackSources:
    """The operator's own source, and one client per stack with a ``spec.source``."""

    def __init__(self, default: ReleaseSource, salt: bytes) -> None:
        self.default = BoundSource(default, "")
        self._salt = salt
        """The key of :func:`identity_key` (:func:`identity_salt`)."""
        self._clients: dict[tuple[str, str], tuple[str, BoundSource]] = {}
        """(namespace, stack) -> (its spec.source as JSON, its client)."""

    async def of_stack(self, kube: Kube, stack: Mapping[str, Any]) -> BoundSource:
        """The stack's source; a :class:`SourceError` when its Secrets cannot make one."""
        spec = (stack.get("spec") or {}).get("source")
        if not spec:
            return self.default
        metadata = stack["metadata"]
        owner = (metadata["namespace"], metadata["name"])
        fingerprint = json.dumps(spec, sort_keys=True)
        held = self._clients.get(owner)
        if held is not None and held[0] == fingerprint:
            return held[1]
        await self.forget(owner)
        parsed = ReleaseSourceSpec.model_validate(spec)
        client, credentials = await _client(kube, owner[0], parsed)
        key = f"{source_key(parsed)}/{identity_key(self._salt, parsed, credentials)}"
        bound = BoundSource(client, key, owner)
        self._clients[owner] = (fingerprint, bound)
        return bound

    async def of_release(self, kube: Kube, release: Mapping[str, Any]) -> BoundSource:
        """The source of a ClusterStackRelease's stack (its owner, in its namespace); the operator's own
        when its stack has none of its own, or it has no stack and says it is of the operator's own
        source (one made by hand).

        A release that says it is of a stack's own source (:data:`SOURCE_ANNOTATION`) but has no stack
        to read that source with (its stack is gone, or it was written by hand) gets none: a
        :class:`SourceError`. Falling back to the operator's own source would serve whatever that
        source publishes under the same tag."""
        metadata = release.get("metadata") or {}
        for reference in metadata.get("ownerReferences") or []:
            if reference.get("kind") != CLUSTER_STACK.kind:
                continue
            stack = await kube.get(
                CLUSTER_STACK.api_version, CLUSTER_STACK.kind, reference["name"], metadata["namespace"]
            )
            if stack is not None:
                return await self.of_stack(kube, stack)
        if source_key_of(release):
            raise SourceError(
                "it names a ClusterStack's own source (annotation "
                f"{SOURCE_ANNOTATION}) but no ClusterStack of its namespace owns it: "
                "only a stack's own credentials may read that source"
            )
        return self.default

    async def failed(self, bound: BoundSource) -> None:
        """The source failed: a stack's own client is made again, its Secrets read again, next time."""
        if bound.owner is not None and (held := self._clients.get(bound.owner)) and held[1] is bound:
            await self.forget(bound.owner)

    async def forget(self, owner: tuple[str, str]) -> None:
        held = self._clients.pop(owner, None)
        if held is not None:
            await _close(held[1].source)

    async def close(self) -> None:
        for owner in list(self._clients):
            await self.forget(owner)
        await _close(self.default.source)


async def _close(source: ReleaseSource) -> None:
    close = getattr(source, "aclose", None)
    if close is not None:
        await close()


IDENTITY_SALT_FILE = ".identity-salt"


def identity_salt(directory: Path) -> bytes:
    """The key :func:`identity_key` hashes with: random, made once per store (``directory``) and kept
    in it, readable by the operator alone. A store lost with its pod takes its salt with it, and the
    new one starts empty anyway."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / IDENTITY_SALT_FILE
    try:
        return path.read_bytes()
    except FileNotFoundError:
        pass
    salt = os.urandom(32)
    partial = path.with_name(f"{IDENTITY_SALT_FILE}.{os.getpid()}")
    descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "wb") as out:
        out.write(salt)
    partial.rename(path)
    return salt


def identity_key(salt: bytes, spec: ReleaseSourceSpec, credentials: Mapping[str, str | None]) -> str:
    """Who reads a source: a keyed hash (HMAC-SHA256 under the store's own salt) of the source and of
    every value read from its Secrets (password, token, CA). Two stacks share a download only when
    they would send the registry the same thing; the key, a directory's name, gives nothing of a
    credential away."""
    text = json.dumps([spec.model_dump(mode="json", by_alias=True), dict(credentials)], sort_keys=True)
    return hmac.new(salt, text.encode(), hashlib.sha256).hexdigest()[:24]


async def _client(
    kube: Kube, namespace: str, spec: ReleaseSourceSpec
) -> tuple[ReleaseSource, dict[str, str | None]]:
    """The stack's client, and every value its Secrets gave it (its identity: :func:`identity_key`)."""
    if spec.github is not None:
        github = spec.github
        token = None
        if github.token_secret_ref is not None:
            token = await _secret_value(
                kube, namespace, github.token_secret_ref, TOKEN_KEY, "spec.source.github.tokenSecretRef"
            )
        client = GitHubReleases(github.organization, github.repository, token, base_url=github.api_url)
        return client, {"token": token}
    assert spec.oci is not None  # the CRD requires one of the two
    oci = spec.oci
    credentials: dict[str, str | None] = {}
    if oci.credentials_secret_ref is not None:
        credentials = await _oci_credentials(kube, namespace, oci.credentials_secret_ref.name)
    ca_data = None
    if oci.ca_secret_ref is not None:
        field = "spec.source.oci.caSecretRef"
        ca_data = await _secret_value(kube, namespace, oci.ca_secret_ref, CA_KEY, field)
    registry = OciRegistry(
        OciSettings(
            oci.repository,
            plain_http=oci.plain_http,
            ca_data=ca_data,
            username=credentials.get("username"),
            password=credentials.get("password"),
            access_token=credentials.get("access_token"),
        )
    )
    return registry, {**credentials, "ca": ca_data}


async def _read_secret(kube: Kube, namespace: str, name: str, field: str) -> dict[str, str]:
    """The Secret's data, decoded; a :class:`SourceError` that says what is wrong, never what it holds."""
    try:
        secret = await kube.get("v1", "Secret", name, namespace)
    except errors.Forbidden:
        raise SourceError(
            f"Secret {name} ({field}) may not be read by the operator: grant it get on Secrets in "
            f"namespace {namespace}"
        ) from None
    if secret is None:
        raise SourceError(f"Secret {name} ({field}) does not exist in namespace {namespace}")
    data: dict[str, str] = {}
    for key, encoded in (secret.get("data") or {}).items():
        try:
            value = base64.b64decode(encoded, validate=True).decode()
        except (binascii.Error, UnicodeDecodeError):
            raise SourceError(f"Secret {name} ({field}): key {key} is not base64 UTF-8 text") from None
        register_secret(value)
        data[key] = value
    return data


async def _secret_value(
    kube: Kube, namespace: str, reference: SecretKeyReference, default_key: str, field: str
) -> str:
    key = reference.key or default_key
    value = (await _read_secret(kube, namespace, reference.name, field)).get(key)
    if not value:
        raise SourceError(f"Secret {reference.name} ({field}) has no key {key}")
    return value


async def _oci_credentials(kube: Kube, namespace: str, name: str) -> dict[str, str | None]:
    field = "spec.source.oci.credentialsSecretRef"
    data = await _read_secret(kube, namespace, name, field)
    if data.get("accessToken"):
        return {"access_token": data["accessToken"]}
    if data.get("username") and data.get("password"):
        return {"username": data["username"], "password": data["password"]}
    raise SourceError(f"Secret {name} ({field}) has neither username and password nor accessToken")
