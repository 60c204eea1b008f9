"""Each ClusterStack's release source: the operator's own (its environment), or the stack's ``spec.source``.

A stack with its own source gets its own client, made from its spec and the Secrets the spec names,
kept while the spec stays the same. The Secrets are read when the client is made, not on every
reconcile and not through a watch of every Secret: a client whose source fails (a refused password,
a registry that does not answer) is dropped, so the next try reads the Secrets again and a corrected
password is taken up at the stack's next retry. Credentials go to the suite's scrubber as they are
read; no message here carries one.

A ClusterStackRelease is downloaded with its stack's client (its owner), and kept in the store under
its source's key (:func:`clusterstack_operator.resources.source_key`), which the stack writes on it
(:data:`~clusterstack_operator.resources.SOURCE_ANNOTATION`) so that its ClusterAddons find the
assets without reading the stack.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from clusterstack_operator.api.v1alpha1 import CLUSTER_STACK, ReleaseSourceSpec, SecretKeyReference
from clusterstack_operator.resources import source_key
from clusterstack_operator.sources.base import ReleaseSource, SourceError
from clusterstack_operator.sources.github import GitHubReleases
from clusterstack_operator.sources.oci import OciRegistry, OciSettings
from operator_core import errors
from operator_core.kube import Kube
from operator_core.secrets import register_secret

__all__ = ["BoundSource", "StackSources"]

CA_KEY = "ca.crt"
TOKEN_KEY = "token"  # noqa: S105 (a key's name, not a token)


@dataclass(frozen=True)
class BoundSource:
    """The source one stack (or release) reads, and where what it downloads is kept."""

    source: ReleaseSource
    key: str
    """The store's key of its downloads ("" for the operator's own source)."""
    owner: tuple[str, str] | None = None
    """The stack whose own source it is ((namespace, name)); None for the operator's own, whose listing
    every stack shares."""


class StackSources:
    """The operator's own source, and one client per stack with a ``spec.source``."""

    def __init__(self, default: ReleaseSource) -> None:
        self.default = BoundSource(default, "")
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
        bound = BoundSource(await _client(kube, owner[0], parsed), source_key(parsed), owner)
        self._clients[owner] = (fingerprint, bound)
        return bound

    async def of_release(self, kube: Kube, release: Mapping[str, Any]) -> BoundSource:
        """The source of a ClusterStackRelease's stack (its owner); the operator's own when it has no
        stack (one made by hand, or whose stack is gone) or its stack has none of its own."""
        metadata = release.get("metadata") or {}
        for reference in metadata.get("ownerReferences") or []:
            if reference.get("kind") != CLUSTER_STACK.kind:
                continue
            stack = await kube.get(
                CLUSTER_STACK.api_version, CLUSTER_STACK.kind, reference["name"], metadata["namespace"]
            )
            if stack is not None:
                return await self.of_stack(kube, stack)
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


async def _client(kube: Kube, namespace: str, spec: ReleaseSourceSpec) -> ReleaseSource:
    if spec.github is not None:
        github = spec.github
        token = None
        if github.token_secret_ref is not None:
            token = await _secret_value(
                kube, namespace, github.token_secret_ref, TOKEN_KEY, "spec.source.github.tokenSecretRef"
            )
        return GitHubReleases(github.organization, github.repository, token, base_url=github.api_url)
    assert spec.oci is not None  # the CRD requires one of the two
    oci = spec.oci
    credentials: dict[str, str | None] = {}
    if oci.credentials_secret_ref is not None:
        credentials = await _oci_credentials(kube, namespace, oci.credentials_secret_ref.name)
    ca_data = None
    if oci.ca_secret_ref is not None:
        field = "spec.source.oci.caSecretRef"
        ca_data = await _secret_value(kube, namespace, oci.ca_secret_ref, CA_KEY, field)
    return OciRegistry(
        OciSettings(
            oci.repository,
            plain_http=oci.plain_http,
            ca_data=ca_data,
            username=credentials.get("username"),
            password=credentials.get("password"),
            access_token=credentials.get("access_token"),
        )
    )


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
