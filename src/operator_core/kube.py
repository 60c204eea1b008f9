"""The only module that talks to the Kubernetes API.

:class:`Kube` wraps lightkube's async client and works on plain manifest
dicts of any kind, built-in or custom (custom kinds are found through their
CRDs). Writes go through server-side apply with one field manager.

Quiet writes: :meth:`Kube.apply` skips the call when the pure
:func:`operator_core.manifests.needs_apply` says the live object already holds
the desired manifest. A reconcile where nothing changed therefore makes zero write calls;
``Kube.write_calls`` counts them so tests can prove it.

Cached reads: with a :class:`~operator_core.cache.Cache` (:meth:`Kube.use_cache`),
:meth:`Kube.get`, :meth:`Kube.list` and the comparison inside :meth:`Kube.apply`
read from its informers for the kinds they hold, and our writes' answers go back
into it; anything else is a request. A cached object is shared: read it, never
change it in place. :meth:`Kube.list_objects` and :meth:`Kube.watch_objects`
are the informers' own two calls.

Client errors are wrapped once, into :mod:`operator_core.errors`, with server
text scrubbed of registered secret values.
"""

from __future__ import annotations

import builtins
import contextlib
import json
import time
from collections.abc import AsyncIterator, Iterator, Mapping
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
from operator_core.cache import OPENED, Cache, Informer, KindRef, selector_covers
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
    410: errors.Expired,
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
        raise _error_for(code)(scrub(f"{what}: {_status_message(error.response)}"), status=code) from error
    except httpx2.TransportError as error:
        reason = type(error).__name__
        raise errors.Unavailable(
            scrub(f"{what}: no answer from the API server ({reason}: {error})"), reason=reason
        ) from error


def _status_message(response: httpx2.Response) -> str:
    """The message of the Status object an error answer carries, or its HTTP code when it has none."""
    with contextlib.suppress(ValueError, AttributeError, httpx2.ResponseNotRead):
        message = json.loads(response.content).get("message")
        if message:
            return str(message)
    return f"HTTP {response.status_code}"


def _label_selector(labels: Mapping[str, str] | None) -> dict[str, str]:
    return {"labelSelector": ",".join(f"{key}={value}" for key, value in labels.items())} if labels else {}


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
        self.cache: Cache | None = None
        """Where reads come from for the kinds it holds (:meth:`use_cache`)."""

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

    def use_cache(self, cache: Cache) -> None:
        """Read the kinds ``cache`` holds from it, and give it the answers of our writes."""
        self.cache = cache

    def _raw(self) -> httpx2.AsyncClient:
        """The plain HTTP client, built by lightkube's public adapter from the same kubeconfig."""
        if self._http is None:
            if self._config is None:
                raise errors.OperatorError("this client was not made from a kubeconfig: no raw HTTP calls")
            parameters = client_adapter.ConnectionParams(
                timeout=httpx2.Timeout(self._timeout), trust_env=False
            )
            self._http = client_adapter.AsyncClient(self._config, parameters)
        return self._http

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

    async def collection_path(self, api_version: str, kind: str) -> str:
        """The URL path of a kind's objects in every namespace (``/api/v1/pods``, ``/apis/apps/v1/...``)."""
        resource = await self.resource_type(api_version, kind)
        info = resource._api_info  # lightkube keeps a kind's group, version and plural here
        group, version = info.resource.group, info.resource.version
        return f"/apis/{group}/{version}/{info.plural}" if group else f"/api/{version}/{info.plural}"

    async def _load_crds(self) -> None:
        with _api_call("listing CustomResourceDefinitions"):
            async for crd in self._client.list(CustomResourceDefinition):
                create_resources_from_crd(crd)
        self._crds_loaded_at = time.monotonic()

    # -- reads

    def _informer_for(self, api_version: str, kind: str, *, of_one: bool = False) -> Informer | None:
        """The synced informer of a kind, if the cache holds it. For one object (``of_one``), not an
        informer that thinks its kind is not served: a caller that names one has seen its CRD."""
        informer = self.cache.informer(api_version, kind) if self.cache is not None else None
        if informer is None or not informer.synced or (of_one and not informer.served):
            return None
        return informer

    async def get(
        self, api_version: str, kind: str, name: str, namespace: str | None = None
    ) -> Manifest | None:
        """The object as a dict, or None when it does not exist; from the cache when it holds the kind.

        An informer that selects by label answers "absent" only by asking the API server: the
        object may exist without our labels.
        """
        informer = self._informer_for(api_version, kind, of_one=True)
        if informer is not None:
            found: Manifest | None = informer.get(namespace, name)
            if found is not None or informer.kind.labels is None:
                return found
        return await self.get_live(api_version, kind, name, namespace)

    async def get_live(
        self, api_version: str, kind: str, name: str, namespace: str | None = None
    ) -> Manifest | None:
        """The object as the API server has it now (a request, whatever the cache holds)."""
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
        None means the kubeconfig's default namespace. From the cache when it holds every object
        that ``labels`` selects."""
        informer = self._informer_for(api_version, kind)
        if informer is not None and namespace is not None and selector_covers(informer.kind.labels, labels):
            return list(informer.list(namespace, labels))
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
        informer = self._informer_for(desired["apiVersion"], desired["kind"], of_one=True)
        if informer is not None and selector_covers(informer.kind.labels, metadata.get("labels")):
            # The informer would hold it: absent there means absent (and apply creates it either way).
            live = informer.get(metadata.get("namespace"), metadata["name"])
        else:
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
        return ApplyResult(self._remember(applied), written=True, created=live is None)

    def _remember(self, answer: Any) -> Manifest:
        """A write's answer as a dict, offered to the cache (it is newer than what the watch told)."""
        obj = dict(answer.to_dict())
        if self.cache is not None:
            self.cache.offer(obj)
        return obj

    async def create(self, manifest: Mapping[str, Any]) -> Manifest:
        resource = await self.resource_type(manifest["apiVersion"], manifest["kind"])
        self.write_calls += 1
        with _api_call(f"creating {_describe(manifest)}"):
            created = await self._client.create(
                resource.from_dict(dict(manifest)), field_manager=self.field_manager
            )
        return self._remember(created)

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
        With a cache, a delete is refused (:class:`~operator_core.errors.NotSynced`) while it
        is not synced: whatever decided it may have read a stale view.
        """
        if self.cache is not None:
            self.cache.require_synced(f"deleting {kind} {name}")
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
        client = self._raw()
        with _api_call(f"proxying to pod {namespace}/{pod}:{port}"):
            response = await client.get(
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
        return self._remember(patched)

    # -- the informers' calls (operator_core.cache.WatchSource)

    async def list_objects(
        self, kind: KindRef, labels: Mapping[str, str] | None
    ) -> tuple[builtins.list[Manifest], str]:
        """Every object of ``kind`` in every namespace, in pages, and the list's resourceVersion.

        Plain JSON, not lightkube's models: an informer of thousands of objects has no use for
        them, and building them costs time and memory.
        """
        api_version, kind_name = kind
        path = await self.collection_path(api_version, kind_name)
        parameters = {"limit": "500", **_label_selector(labels)}
        items: builtins.list[Manifest] = []
        while True:
            with _api_call(f"listing {kind_name}"):
                response = await self._raw().get(path, params=parameters)
                response.raise_for_status()
            page = response.json()
            # A list's items carry no apiVersion and kind; a watch's objects do.
            items.extend(
                {**item, "apiVersion": api_version, "kind": kind_name} for item in page.get("items") or []
            )
            metadata = page.get("metadata") or {}
            if not metadata.get("continue"):
                return items, str(metadata.get("resourceVersion") or "")
            parameters["continue"] = metadata["continue"]

    async def watch_objects(
        self, kind: KindRef, labels: Mapping[str, str] | None, resource_version: str, timeout_seconds: int
    ) -> AsyncIterator[tuple[str, Manifest]]:
        """Watch ``kind`` in every namespace from ``resource_version``, with bookmarks.

        Yields :data:`~operator_core.cache.OPENED` once the API server accepted the watch, then
        its events; an ERROR event is raised as its error (410 Gone as
        :class:`~operator_core.errors.Expired`). Ends when the server closes the watch.
        """
        api_version, kind_name = kind
        path = await self.collection_path(api_version, kind_name)
        parameters = {
            "watch": "true",
            "allowWatchBookmarks": "true",
            "resourceVersion": resource_version,
            "timeoutSeconds": str(timeout_seconds),
            **_label_selector(labels),
        }
        what = f"watching {kind_name}"
        # The server ends the watch after timeout_seconds; reading may wait that long between events.
        timeout = httpx2.Timeout(self._timeout, read=timeout_seconds + self._timeout)
        with _api_call(what):
            async with self._raw().stream("GET", path, params=parameters, timeout=timeout) as response:
                if response.status_code >= 400:
                    await response.aread()  # the Status object that says why
                    response.raise_for_status()
                yield OPENED, {}
                async for line in response.aiter_lines():
                    if not line.strip():
                        continue
                    event = json.loads(line)
                    event_type, obj = event.get("type", ""), event.get("object") or {}
                    if event_type == "ERROR":
                        code = int(obj.get("code") or 0)
                        raise _error_for(code)(
                            scrub(f"{what}: {obj.get('message') or obj.get('reason') or 'watch error'}"),
                            status=code,
                            reason=str(obj.get("reason") or ""),
                        )
                    yield event_type, obj
