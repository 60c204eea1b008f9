"""The only module that talks to the Kubernetes API.

:class:`Kube` works on plain manifest dicts of any kind, built-in or custom
(custom kinds are found through their CRDs, with lightkube's registry). Reads and
writes are plain JSON over lightkube's HTTP client: building lightkube's models
for every object cost most of an operator's CPU at scale, and a model drops the
fields it does not know. Writes go through server-side apply with one field manager.

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
from collections.abc import AsyncGenerator, Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import httpx2
from lightkube import ApiError, AsyncClient, KubeConfig
from lightkube.codecs import resource_registry
from lightkube.config import client_adapter
from lightkube.config.kubeconfig import SingleConfig
from lightkube.core.exceptions import LoadResourceError
from lightkube.core.resource import NamespacedResource
from lightkube.generic_resource import create_resources_from_crd
from lightkube.resources.apiextensions_v1 import CustomResourceDefinition
from lightkube.types import CascadeType, PatchType

from operator_core import errors
from operator_core.cache import ANY_VALUE, EVERY_NAMESPACE, OPENED, Cache, Informer, KindRef, selector_covers
from operator_core.manifests import APPLIED_HASH_ANNOTATION, Manifest, needs_apply, with_applied_hash
from operator_core.secrets import scrub

__all__ = ["ALL", "APPLIED_HASH_ANNOTATION", "ApplyResult", "Kube"]

DEFAULT_FIELD_MANAGER = "operator-suite"
ALL = EVERY_NAMESPACE
"""The namespace that means every namespace, in :meth:`Kube.list` (lightkube's spelling)."""
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
        message, reason = _status_of(error.response)
        raise _error_for(code)(scrub(f"{what}: {message}"), status=code, reason=reason) from error
    except httpx2.TransportError as error:
        reason = type(error).__name__
        raise errors.Unavailable(
            scrub(f"{what}: no answer from the API server ({reason}: {error})"), reason=reason
        ) from error


def _status_of(response: httpx2.Response) -> tuple[str, str]:
    """The message and reason of the Status object an error answer carries (its HTTP code and no
    reason when it has none: a 404 page for an API group that is not served, say)."""
    with contextlib.suppress(ValueError, AttributeError, httpx2.ResponseNotRead):
        status = json.loads(response.content)
        if isinstance(status, dict) and status.get("message"):
            return str(status["message"]), str(status.get("reason") or "")
    return f"HTTP {response.status_code}", ""


def _json_value(value: Any) -> Any:
    """What json.dumps cannot write itself: a datetime, as the API's RFC 3339 (microseconds for a
    MicroTime; the API server reads both forms)."""
    if isinstance(value, datetime):
        return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    raise TypeError(f"{type(value).__name__} is not JSON")


def _without_nulls(value: Any) -> Any:
    """An apply body without null fields: a null in an applied configuration is not "unset"."""
    if isinstance(value, Mapping):
        return {key: _without_nulls(item) for key, item in value.items() if item is not None}
    if isinstance(value, list):
        return [_without_nulls(item) for item in value]
    return value


def _label_selector(labels: Mapping[str, str] | None) -> dict[str, str]:
    if not labels:
        return {}
    terms = (key if value == ANY_VALUE else f"{key}={value}" for key, value in labels.items())
    return {"labelSelector": ",".join(terms)}


_FILE_KEYS = {
    "certificate-authority": "certificate-authority-data",
    "client-certificate": "client-certificate-data",
    "client-key": "client-key-data",
    "tokenFile": "token",
}
"""A kubeconfig's keys that name a file of this machine, and what embeds the same instead."""
_COMMAND_KEYS = ("exec", "auth-provider")


def vet_kubeconfig(document: object) -> Mapping[str, Any]:
    """A kubeconfig read from a Secret, refused (:class:`~operator_core.errors.InvalidKubeconfig`) when it
    could make this process run a command (``exec``, ``auth-provider``) or read its own files (paths
    instead of ``-data``): whoever can write the Secret must not gain the operator's powers."""
    if not isinstance(document, Mapping) or not document.get("clusters") or not document.get("users"):
        raise errors.InvalidKubeconfig("the kubeconfig is not a YAML mapping with clusters and users")
    sections = [("user", (e or {}).get("user") or {}) for e in document.get("users") or []]
    sections += [("cluster", (e or {}).get("cluster") or {}) for e in document.get("clusters") or []]
    for section, fields in sections:
        for key in _COMMAND_KEYS:
            if key in fields:
                raise errors.InvalidKubeconfig(f"the kubeconfig's {section} runs a command ({key}): refused")
        for key, embedded in _FILE_KEYS.items():
            if key in fields:
                raise errors.InvalidKubeconfig(
                    f"the kubeconfig's {section} names a file ({key}): embed it as {embedded}"
                )
    return document


RequestCounter = Callable[[str, str, Mapping[str, Any], int], None]
"""Told of one answered request: its method, path, query parameters, and its answer's status."""


def _httpx_of(client: AsyncClient) -> httpx2.AsyncClient | None:
    """lightkube's own HTTP client inside ``client`` (None if a lightkube release moves it)."""
    inner = getattr(getattr(client, "_client", None), "_client", None)
    return inner if isinstance(inner, httpx2.AsyncClient) else None


def _count_with(http: httpx2.AsyncClient | None, counter: RequestCounter) -> None:
    """Have ``counter`` told of every request ``http`` sends, when its answer comes (a watch: when its
    stream opens)."""
    if http is None:
        return

    async def answered(response: httpx2.Response) -> None:
        request = response.request
        counter(request.method, request.url.path, dict(request.url.params), response.status_code)

    hooks = dict(http.event_hooks)
    hooks["response"] = [*hooks.get("response", []), answered]
    http.event_hooks = hooks


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
        on_request: RequestCounter | None = None,
    ) -> None:
        self._client = client
        self._on_request = on_request
        """Told of every request and its answer's status (the operator's /metrics count them)."""
        if on_request is not None:
            _count_with(_httpx_of(client), on_request)
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
        self._preferred_versions: dict[str, str] = {}

    @classmethod
    def connect(
        cls,
        kubeconfig: Path | str | None = None,
        *,
        field_manager: str = DEFAULT_FIELD_MANAGER,
        context: str | None = None,
        timeout: float = 10.0,
        on_request: RequestCounter | None = None,
    ) -> Kube:
        """Connect with a kubeconfig file, or else in-cluster config, $KUBECONFIG, or ~/.kube/config."""
        config = (KubeConfig.from_file(kubeconfig) if kubeconfig else KubeConfig.from_env()).get(context)
        client = AsyncClient(
            config, field_manager=field_manager, timeout=httpx2.Timeout(timeout), trust_env=False
        )
        return cls(client, field_manager=field_manager, config=config, timeout=timeout, on_request=on_request)

    @classmethod
    def from_kubeconfig(
        cls,
        document: Mapping[str, Any],
        *,
        field_manager: str = DEFAULT_FIELD_MANAGER,
        timeout: float = 10.0,
    ) -> Kube:
        """Connect with a kubeconfig given as data (another cluster's, read from a Secret): its current
        context. The caller vets it first (:func:`operator_core.kube.vet_kubeconfig`)."""
        config = KubeConfig.from_dict(dict(document)).get()
        client = AsyncClient(
            config, field_manager=field_manager, timeout=httpx2.Timeout(timeout), trust_env=False
        )
        return cls(client, field_manager=field_manager, config=config, timeout=timeout)

    @property
    def server(self) -> str | None:
        """The API server's URL, as the kubeconfig names it (None for a client made without one)."""
        return self._config.cluster.server if self._config is not None else None

    async def server_version(self) -> str:
        """The API server's version (``GET /version``): the cheapest way to learn that it answers."""
        with _api_call("asking the API server its version"):
            response = await self._raw().get("/version")
            response.raise_for_status()
        return str(response.json().get("gitVersion", ""))

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
            if self._on_request is not None:
                _count_with(self._http, self._on_request)
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

    async def preferred_version(self, group: str) -> str:
        """The API version the server prefers for ``group`` (``group/version``; ``v1`` for the core
        group), from its discovery document, asked once per group and client. NotFound when the
        group is not served."""
        if not group:
            return "v1"
        if group not in self._preferred_versions:
            with _api_call(f"discovering API group {group}"):
                response = await self._raw().get(f"/apis/{group}")
                response.raise_for_status()
            self._preferred_versions[group] = str(response.json()["preferredVersion"]["groupVersion"])
        return self._preferred_versions[group]

    async def collection_path(self, api_version: str, kind: str, namespace: str | None = ALL) -> str:
        """The URL path of a kind's objects: in every namespace (``/api/v1/pods``, ``/apis/apps/v1/...``)
        by default, or in one (None: the kubeconfig's default namespace)."""
        resource = await self.resource_type(api_version, kind)
        info = resource._api_info  # lightkube keeps a kind's group, version and plural here
        group, version = info.resource.group, info.resource.version
        path = f"/apis/{group}/{version}" if group else f"/api/{version}"
        if namespace != ALL and issubclass(resource, NamespacedResource):
            path += f"/namespaces/{namespace or self._default_namespace()}"
        return f"{path}/{info.plural}"

    async def object_path(self, api_version: str, kind: str, name: str, namespace: str | None) -> str:
        """The URL path of one object (``namespace`` is ignored for a kind that has none)."""
        return f"{await self.collection_path(api_version, kind, namespace)}/{name}"

    def _default_namespace(self) -> str:
        return (self._config.namespace if self._config is not None else None) or "default"

    async def _send(
        self,
        method: str,
        path: str,
        what: str,
        body: Mapping[str, Any],
        *,
        content_type: str = "application/json",
        params: Mapping[str, str] | None = None,
    ) -> Manifest:
        """One write as plain JSON both ways (no lightkube models: they cost time and drop fields they
        do not know), its answer offered to the cache."""
        self.write_calls += 1
        with _api_call(what):
            response = await self._raw().request(
                method,
                path,
                content=json.dumps(body, default=_json_value),
                params={"fieldManager": self.field_manager, **(params or {})},
                headers={"Content-Type": content_type},
            )
            response.raise_for_status()
        return self._remember(response.json())

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
        self,
        api_version: str,
        kind: str,
        name: str,
        namespace: str | None = None,
        *,
        labelled_only: bool = False,
    ) -> Manifest | None:
        """The object as a dict, or None when it does not exist; from the cache when it holds the kind
        (without its spec if the cache holds the kind so: :attr:`~operator_core.cache.WatchedKind.keep_spec`).

        An informer that selects by label answers "absent" only by asking the API server: the
        object may exist without our labels. With ``labelled_only``, the caller's own child that it is
        about to apply anyway, one without our labels counts as absent, and no request is made.
        """
        informer = self._informer_for(api_version, kind, of_one=True)
        if informer is not None:
            found: Manifest | None = informer.get(namespace, name)
            if found is not None or informer.kind.labels is None or labelled_only:
                return found
        return await self.get_live(api_version, kind, name, namespace)

    async def get_live(
        self, api_version: str, kind: str, name: str, namespace: str | None = None
    ) -> Manifest | None:
        """The object as the API server has it now (a request, whatever the cache holds)."""
        path = await self.object_path(api_version, kind, name, namespace)
        try:
            with _api_call(f"reading {kind} {name}"):
                response = await self._raw().get(path)
                response.raise_for_status()
        except errors.NotFound:
            return None
        found: Manifest = response.json()
        return found

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
        items, _ = await self._list_pages((api_version, kind), labels, namespace)
        return items

    # -- writes

    async def apply(self, desired: Mapping[str, Any], *, force: bool = True) -> ApplyResult:
        """Server-side apply ``desired`` unless the live object already matches it."""
        metadata = desired.get("metadata", {})
        informer = self._informer_for(desired["apiVersion"], desired["kind"], of_one=True)
        if (
            informer is not None
            and informer.kind.keep_spec
            and selector_covers(informer.kind.labels, metadata.get("labels"))
        ):
            # The informer would hold it: absent there means absent (and apply creates it either way).
            live = informer.get(metadata.get("namespace"), metadata["name"])
        else:
            live = await self.get(
                desired["apiVersion"], desired["kind"], metadata["name"], metadata.get("namespace")
            )
        if not needs_apply(desired, live):
            assert live is not None
            return ApplyResult(live, written=False)
        path = await self.object_path(
            desired["apiVersion"], desired["kind"], metadata["name"], metadata.get("namespace")
        )
        applied = await self._send(
            "PATCH",
            path,
            f"applying {_describe(desired)}",
            _without_nulls(with_applied_hash(desired)),
            content_type=PatchType.APPLY.value,
            params={"force": "true"} if force else None,
        )
        return ApplyResult(applied, written=True, created=live is None)

    def _remember(self, obj: Manifest) -> Manifest:
        """A write's answer, offered to the cache (it is newer than what the watch told)."""
        if self.cache is not None:
            self.cache.offer(obj)
        return obj

    async def create(self, manifest: Mapping[str, Any]) -> Manifest:
        metadata = manifest.get("metadata", {})
        path = await self.collection_path(manifest["apiVersion"], manifest["kind"], metadata.get("namespace"))
        return await self._send("POST", path, f"creating {_describe(manifest)}", manifest)

    async def create_subresource(
        self, api_version: str, kind: str, name: str, namespace: str | None, subresource: str, body: Manifest
    ) -> Manifest:
        """POST to an object's subresource (a ServiceAccount's ``token``, a Pod's ``eviction``); the
        answer is another kind (a TokenRequest), which no cache holds."""
        path = f"{await self.object_path(api_version, kind, name, namespace)}/{subresource}"
        return await self._send("POST", path, f"creating {kind} {name}/{subresource}", body)

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

    async def patch(
        self, api_version: str, kind: str, name: str, namespace: str | None, patch: Mapping[str, Any]
    ) -> Manifest:
        """Merge-patch an object. A ``metadata.resourceVersion`` in ``patch`` makes it conditional: a
        :class:`~operator_core.errors.Conflict` when the object changed since (for a list, such as
        finalizers, that a merge patch replaces whole)."""
        path = await self.object_path(api_version, kind, name, namespace)
        return await self._send(
            "PATCH", path, f"patching {kind} {name}", patch, content_type=PatchType.MERGE.value
        )

    async def patch_status(
        self,
        api_version: str,
        kind: str,
        name: str,
        namespace: str | None,
        status: Mapping[str, Any],
    ) -> Manifest:
        """Merge-patch the status subresource (callers send only what changed)."""
        path = await self.object_path(api_version, kind, name, namespace)
        return await self._send(
            "PATCH",
            f"{path}/status",
            f"updating status of {kind} {name}",
            {"status": dict(status)},
            content_type=PatchType.MERGE.value,
        )

    # -- the informers' calls (operator_core.cache.WatchSource)

    async def list_objects(
        self,
        kind: KindRef,
        labels: Mapping[str, str] | None,
        namespace: str = ALL,
        each: Callable[[Manifest], Manifest] | None = None,
    ) -> tuple[builtins.list[Manifest], str]:
        """Every object of ``kind`` in ``namespace`` (default: every one), in pages, and the list's
        resourceVersion; ``each`` is applied to every object as its page arrives."""
        return await self._list_pages(kind, labels, namespace, each)

    async def namespaced(self, kind: KindRef) -> bool:
        """Whether ``kind`` lives in namespaces (NotFound when it is not served)."""
        return issubclass(await self.resource_type(*kind), NamespacedResource)

    async def _list_pages(
        self,
        kind: KindRef,
        labels: Mapping[str, str] | None,
        namespace: str | None,
        each: Callable[[Manifest], Manifest] | None = None,
    ) -> tuple[builtins.list[Manifest], str]:
        """Objects of ``kind`` in ``namespace`` (:data:`ALL`: every one), in pages, and the list's
        resourceVersion.

        Plain JSON, not lightkube's models: an informer of thousands of objects has no use for
        them, and building them costs time and memory. ``each`` (an informer's trim) is applied page
        by page, so that a list of thousands of pods is never held whole at its full size.
        """
        api_version, kind_name = kind
        path = await self.collection_path(api_version, kind_name, namespace)
        parameters = {"limit": "500", **_label_selector(labels)}
        items: builtins.list[Manifest] = []
        while True:
            with _api_call(f"listing {kind_name}"):
                response = await self._raw().get(path, params=parameters)
                response.raise_for_status()
            page = response.json()
            # A list's items carry no apiVersion and kind; a watch's objects do.
            typed = (
                {**item, "apiVersion": api_version, "kind": kind_name} for item in page.get("items") or []
            )
            items.extend(typed if each is None else map(each, typed))
            metadata = page.get("metadata") or {}
            if not metadata.get("continue"):
                return items, str(metadata.get("resourceVersion") or "")
            parameters["continue"] = metadata["continue"]

    async def watch_objects(
        self,
        kind: KindRef,
        labels: Mapping[str, str] | None,
        resource_version: str,
        timeout_seconds: int,
        namespace: str = ALL,
        *,
        name: str | None = None,
    ) -> AsyncGenerator[tuple[str, Manifest]]:
        """Watch ``kind`` in ``namespace`` (default: every one) from ``resource_version``, with bookmarks;
        only the object called ``name``, if given (RBAC's ``resourceNames`` then apply).

        Yields :data:`~operator_core.cache.OPENED` once the API server accepted the watch, then
        its events; an ERROR event is raised as its error (410 Gone as
        :class:`~operator_core.errors.Expired`). Ends when the server closes the watch.
        """
        api_version, kind_name = kind
        path = await self.collection_path(api_version, kind_name, namespace)
        parameters = {
            "watch": "true",
            "allowWatchBookmarks": "true",
            "resourceVersion": resource_version,
            "timeoutSeconds": str(timeout_seconds),
            **_label_selector(labels),
            **({"fieldSelector": f"metadata.name={name}"} if name is not None else {}),
        }
        what = f"watching {kind_name}" if name is None else f"watching {kind_name} {name}"
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
