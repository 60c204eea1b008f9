"""The only module that talks to the Kubernetes API.

:class:`Kube` wraps lightkube's async client and works on plain manifest
dicts of any kind, built-in or custom (custom kinds are found through their
CRDs). Writes go through server-side apply with one field manager.

Quiet writes: :meth:`Kube.apply` skips the call when the pure
:func:`operator_core.manifests.needs_apply` says the live object already holds
the desired manifest. A reconcile where nothing changed therefore makes zero write calls;
``Kube.write_calls`` counts them so tests can prove it.

Client errors are wrapped once, into :mod:`operator_core.errors`, with server
text scrubbed of registered secret values.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import httpx2
from lightkube import ApiError, AsyncClient, KubeConfig
from lightkube.codecs import resource_registry
from lightkube.config import client_adapter
from lightkube.config.kubeconfig import SingleConfig
from lightkube.core.exceptions import LoadResourceError
from lightkube.generic_resource import create_resources_from_crd
from lightkube.resources.apiextensions_v1 import CustomResourceDefinition
from lightkube.types import CascadeType, PatchType

from operator_core import errors
from operator_core.manifests import APPLIED_HASH_ANNOTATION, Manifest, needs_apply, with_applied_hash
from operator_core.secrets import scrub

__all__ = ["APPLIED_HASH_ANNOTATION", "ApplyResult", "Kube"]

DEFAULT_FIELD_MANAGER = "operator-suite"
# How stale the list of custom kinds may be when a kind is not found.
CRD_REFRESH_SECONDS = 10.0


@dataclass(frozen=True)
class ApplyResult:
    """What :meth:`Kube.apply` did: the object as it is now, whether it wrote, and whether it created."""

    object: Manifest
    written: bool
    created: bool = False


# ---------------------------------------------------------------- the adapter


_ERRORS_BY_CODE: dict[int, type[errors.KubeError]] = {
    400: errors.Invalid,
    403: errors.Forbidden,
    404: errors.NotFound,
    409: errors.Conflict,
    422: errors.Invalid,
    429: errors.Unavailable,
}


def _error_for(code: int) -> type[errors.KubeError]:
    if code >= 500:
        return errors.Unavailable
    return _ERRORS_BY_CODE.get(code, errors.KubeError)


@contextlib.contextmanager
def _api_call(what: str) -> Iterator[None]:
    """Translate whatever lightkube raises for a failed call into the suite's error tree, once.

    lightkube raises ApiError when the server answered with a Status object, the plain
    HTTP error otherwise (a 404 page for an API group that is not served, say), and the
    transport's error when no answer came at all.
    """
    try:
        yield
    except ApiError as error:
        status = error.status
        code = int(status.code or 0)
        reason = status.reason or ""
        message = scrub(f"{what}: {status.message or reason or 'API error'}")
        raise _error_for(code)(message, status=code, reason=reason) from error
    except httpx2.HTTPStatusError as error:
        code = error.response.status_code
        raise _error_for(code)(f"{what}: HTTP {code}", status=code) from error
    except httpx2.TransportError as error:
        reason = type(error).__name__
        raise errors.Unavailable(
            scrub(f"{what}: no answer from the API server ({reason}: {error})"), reason=reason
        ) from error


def _describe(manifest: Mapping[str, Any]) -> str:
    metadata = manifest.get("metadata", {})
    where = f"{metadata.get('namespace')}/" if metadata.get("namespace") else ""
    return f"{manifest.get('kind')} {where}{metadata.get('name')}"


class Kube:
    """Async access to one API server, on plain manifest dicts, with one field manager."""

    def __init__(
        self,
        client: AsyncClient,
        *,
        field_manager: str = DEFAULT_FIELD_MANAGER,
        config: SingleConfig | None = None,
        timeout: float = 10.0,
    ) -> None:
        self._client = client
        self.field_manager = field_manager
        self.write_calls = 0
        self._crds_loaded_at: float | None = None
        self._config = config
        self._timeout = timeout
        self._http: httpx2.AsyncClient | None = None
        """A plain HTTP client on the same kubeconfig, for calls lightkube has no method for (made on
        first use)."""

    @classmethod
    def connect(
        cls,
        kubeconfig: Path | str | None = None,
        *,
        field_manager: str = DEFAULT_FIELD_MANAGER,
        context: str | None = None,
        timeout: float = 10.0,
    ) -> Kube:
        """Connect with a kubeconfig file, or else in-cluster config, $KUBECONFIG, or ~/.kube/config."""
        config = (KubeConfig.from_file(kubeconfig) if kubeconfig else KubeConfig.from_env()).get(context)
        client = AsyncClient(
            config, field_manager=field_manager, timeout=httpx2.Timeout(timeout), trust_env=False
        )
        return cls(client, field_manager=field_manager, config=config, timeout=timeout)

    async def close(self) -> None:
        if self._http is not None:
            await self._http.aclose()
        await self._client.close()

    async def __aenter__(self) -> Kube:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- kinds

    async def resource_type(self, api_version: str, kind: str) -> Any:
        """The lightkube class for a kind: built-in, or custom (looked up in the cluster's CRDs)."""
        try:
            return resource_registry.load(api_version, kind)
        except LoadResourceError:
            pass
        loaded_at = self._crds_loaded_at
        # A CRD may have been installed since the last look; look again, but not on every call.
        if loaded_at is None or time.monotonic() - loaded_at > CRD_REFRESH_SECONDS:
            await self._load_crds()
        found = resource_registry.get(api_version, kind)
        if found is None:
            raise errors.NotFound(
                f"kind {kind} of {api_version} is not served", status=404, reason="NotFound"
            )
        return found

    async def _load_crds(self) -> None:
        with _api_call("listing CustomResourceDefinitions"):
            async for crd in self._client.list(CustomResourceDefinition):
                create_resources_from_crd(crd)
        self._crds_loaded_at = time.monotonic()

    # -- reads

    async def get(
        self, api_version: str, kind: str, name: str, namespace: str | None = None
    ) -> Manifest | None:
        """The object as a dict, or None when it does not exist."""
        resource = await self.resource_type(api_version, kind)
        try:
            with _api_call(f"reading {kind} {name}"):
                found = await self._client.get(resource, name, namespace=namespace)
        except errors.NotFound:
            return None
        return dict(found.to_dict())

    async def list(
        self,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        *,
        labels: Mapping[str, str] | None = None,
    ) -> list[Manifest]:
        """Objects of a kind. For a namespaced kind, ``namespace="*"`` means every namespace;
        None means the kubeconfig's default namespace."""
        resource = await self.resource_type(api_version, kind)
        selector: dict[str, Any] | None = dict(labels) if labels else None
        with _api_call(f"listing {kind}"):
            return [
                dict(item.to_dict())
                async for item in self._client.list(resource, namespace=namespace, labels=selector)
            ]

    # -- writes

    async def apply(self, desired: Mapping[str, Any], *, force: bool = True) -> ApplyResult:
        """Server-side apply ``desired`` unless the live object already matches it."""
        metadata = desired.get("metadata", {})
        live = await self.get(
            desired["apiVersion"], desired["kind"], metadata["name"], metadata.get("namespace")
        )
        if not needs_apply(desired, live):
            assert live is not None
            return ApplyResult(live, written=False)
        resource = await self.resource_type(desired["apiVersion"], desired["kind"])
        body = resource.from_dict(with_applied_hash(desired))
        self.write_calls += 1
        with _api_call(f"applying {_describe(desired)}"):
            applied = await self._client.apply(body, field_manager=self.field_manager, force=force)
        return ApplyResult(dict(applied.to_dict()), written=True, created=live is None)

    async def create(self, manifest: Mapping[str, Any]) -> Manifest:
        resource = await self.resource_type(manifest["apiVersion"], manifest["kind"])
        self.write_calls += 1
        with _api_call(f"creating {_describe(manifest)}"):
            created = await self._client.create(
                resource.from_dict(dict(manifest)), field_manager=self.field_manager
            )
        return dict(created.to_dict())

    async def delete(
        self,
        api_version: str,
        kind: str,
        name: str,
        namespace: str | None = None,
        *,
        propagation: Literal["Background", "Foreground", "Orphan"] = "Background",
        grace_period: int | None = None,
    ) -> bool:
        """Delete an object; False when it was already gone.

        ``grace_period=0`` removes a pod at once, as a kubelet does once its containers
        have stopped (a plain delete of a terminating pod keeps its old grace period).
        """
        resource = await self.resource_type(api_version, kind)
        self.write_calls += 1
        try:
            with _api_call(f"deleting {kind} {name}"):
                await self._client.delete(
                    resource,
                    name,
                    namespace=namespace,
                    cascade=CascadeType[propagation.upper()],
                    grace_period=grace_period,
                )
        except errors.NotFound:
            return False
        return True

    async def proxy_get(
        self, namespace: str, pod: str, port: int, path: str, *, headers: Mapping[str, str], timeout: float
    ) -> tuple[int, bytes]:
        """GET ``path`` on a pod's port through the API server's pod proxy: (status code, body).

        For an operator that runs outside the cluster, where pod addresses are not routable.
        lightkube has no call for subresource proxies, so this uses an HTTP client built by
        lightkube's public client adapter from the same kubeconfig (same server, CA and
        credentials). No answer at all is :class:`~operator_core.errors.Unavailable`; any
        answer, an error page included, is returned as it came.
        """
        if self._http is None:
            if self._config is None:
                raise errors.OperatorError("this client was not made from a kubeconfig: no pod proxy")
            parameters = client_adapter.ConnectionParams(
                timeout=httpx2.Timeout(self._timeout), trust_env=False
            )
            self._http = client_adapter.AsyncClient(self._config, parameters)
        with _api_call(f"proxying to pod {namespace}/{pod}:{port}"):
            response = await self._http.get(
                f"/api/v1/namespaces/{namespace}/pods/{pod}:{port}/proxy{path}",
                headers=dict(headers),
                timeout=timeout,
            )
        return response.status_code, response.content

    async def patch_status(
        self,
        api_version: str,
        kind: str,
        name: str,
        namespace: str | None,
        status: Mapping[str, Any],
    ) -> Manifest:
        """Merge-patch the status subresource (callers send only what changed)."""
        resource = await self.resource_type(api_version, kind)
        self.write_calls += 1
        with _api_call(f"updating status of {kind} {name}"):
            patched = await self._client.patch(
                resource.Status,
                name,
                {"status": dict(status)},
                namespace=namespace,
                patch_type=PatchType.MERGE,
            )
        return dict(patched.to_dict())
