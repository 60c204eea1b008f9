"""The only module that talks to the Kubernetes API.

:class:`Kube` works on plain manifest dicts of any kind, built-in or custom
(each kind's plural and scope come from the API server's discovery document of its
group-version, as client-go's RESTMapper finds them: no list of every CRD). Reads and
writes are plain JSON over an aiohttp connection (:mod:`operator_core.connection`, with
the kubeconfig's TLS and credentials as lightkube reads them): building lightkube's models
for every object cost most of an operator's CPU at scale, a model drops the fields it does
not know, and lightkube's HTTP client cost two to three times aiohttp's CPU a request. Writes go
through server-side apply with one field manager.

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

import asyncio
import builtins
import contextlib
import json
import logging
import time
from collections.abc import AsyncGenerator, Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from lightkube import KubeConfig
from lightkube.config.kubeconfig import SingleConfig
from lightkube.types import PatchType

from operator_core import errors
from operator_core.cache import (
    EVERY_NAMESPACE,
    OPENED,
    Cache,
    Informer,
    KindRef,
    label_selector,
    selector_covers,
)
from operator_core.clock import micro_time
from operator_core.connection import Answer, AnswerCounter, Connection, NoAnswer, decode_json
from operator_core.manifests import APPLIED_HASH_ANNOTATION, Manifest, needs_apply, with_applied_hash
from operator_core.secrets import scrub

__all__ = ["ALL", "APPLIED_HASH_ANNOTATION", "ApiOutages", "ApplyResult", "Kube", "ServedKind"]

DEFAULT_FIELD_MANAGER = "operator-suite"
ALL = EVERY_NAMESPACE
"""The namespace that means every namespace, in :meth:`Kube.list` (lightkube's spelling)."""
# How stale a group-version's discovered kinds may be when a kind is not found there.
DISCOVERY_REFRESH_SECONDS = 10.0


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


_log = logging.getLogger("operator_core.kube")


class ApiOutages:
    """What the clients of one process know of their API servers' outages. The clients of one process
    (the operator's, its Lease's, its webhooks') share one, given to :meth:`Kube.connect`: an outage is
    said once per process, not once per client."""

    def __init__(self) -> None:
        self.silent_since: dict[str, float] = {}
        """API server address -> since when it has not answered (monotonic)."""
        self.answered: set[str] = set()
        """The API servers that answered once: no answer from one of them is an outage."""


def _refusal(answer: Answer, what: str) -> errors.KubeError:
    """The error an answer of 400 or more stands for, with the message of the Status object it carries
    (its HTTP code when it has none: a 404 page for an API group that is not served, say)."""
    message, reason = f"HTTP {answer.status}", ""
    with contextlib.suppress(ValueError):
        status = answer.json()
        if isinstance(status, dict) and status.get("message"):
            message, reason = str(status["message"]), str(status.get("reason") or "")
    return _error_for(answer.status)(scrub(f"{what}: {message}"), status=answer.status, reason=reason)


def _json_value(value: Any) -> Any:
    """What json.dumps cannot write itself: a datetime, as the API's RFC 3339 (microseconds for a
    MicroTime; the API server reads both forms)."""
    if isinstance(value, datetime):
        return micro_time(value)
    raise TypeError(f"{type(value).__name__} is not JSON")


def _without_nulls(value: Any) -> Any:
    """An apply body without null fields: a null in an applied configuration is not "unset"."""
    if isinstance(value, Mapping):
        return {key: _without_nulls(item) for key, item in value.items() if item is not None}
    if isinstance(value, list):
        return [_without_nulls(item) for item in value]
    return value


def _label_selector(labels: Mapping[str, str] | None) -> dict[str, str]:
    return {"labelSelector": label_selector(labels)} if labels else {}


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


def _describe(manifest: Mapping[str, Any]) -> str:
    metadata = manifest.get("metadata", {})
    where = f"{metadata.get('namespace')}/" if metadata.get("namespace") else ""
    return f"{manifest.get('kind')} {where}{metadata.get('name')}"


@dataclass(frozen=True)
class ServedKind:
    """How the API server serves one kind, from discovery."""

    plural: str
    namespaced: bool


def _group_version_path(api_version: str) -> str:
    """``/api/v1`` for the core group's ``v1``, ``/apis/{group}/{version}`` for any other."""
    return f"/apis/{api_version}" if "/" in api_version else f"/api/{api_version}"


@dataclass(frozen=True)
class _Discovery:
    kinds: dict[str, ServedKind]
    read_at: float


class Kube:
    """Async access to one API server, on plain manifest dicts, with one field manager."""

    def __init__(
        self,
        connection: Connection | None,
        *,
        field_manager: str = DEFAULT_FIELD_MANAGER,
        outages: ApiOutages | None = None,
    ) -> None:
        self._connection = connection
        """Every request goes here; None for a client that may make none (a test's)."""
        self.outages = outages if outages is not None else ApiOutages()
        """Shared with the other clients of the process that were given the same."""
        self.field_manager = field_manager
        self.write_calls = 0
        self._discovered: dict[str, _Discovery] = {}
        """apiVersion -> the kinds its discovery document lists, and when it was read."""
        self.cache: Cache | None = None
        """Where reads come from for the kinds it holds (:meth:`use_cache`)."""
        self._preferred_versions: dict[str, str] = {}
        self.answering = asyncio.Event()
        """Cleared while the API server, which answered before, does not answer (an outage); set again
        by its next answer. What retries for an outage waits for it, not only for its back-off."""
        self.answering.set()

    @classmethod
    def connect(
        cls,
        kubeconfig: Path | str | None = None,
        *,
        field_manager: str = DEFAULT_FIELD_MANAGER,
        context: str | None = None,
        timeout: float = 10.0,
        on_request: AnswerCounter | None = None,
        outages: ApiOutages | None = None,
    ) -> Kube:
        """Connect with a kubeconfig file, or else in-cluster config, $KUBECONFIG, or ~/.kube/config.
        ``on_request`` is told of every request and its answer's status (the operator's /metrics);
        ``outages`` is the process's memory of outages (its own when None)."""
        config = (KubeConfig.from_file(kubeconfig) if kubeconfig else KubeConfig.from_env()).get(context)
        return cls._of(config, field_manager, timeout, on_request, outages)

    @classmethod
    def _of(
        cls,
        config: SingleConfig | None,
        field_manager: str,
        timeout: float,
        on_request: AnswerCounter | None,
        outages: ApiOutages | None = None,
    ) -> Kube:
        # lightkube's KubeConfig.get raises rather than answer None, when given no default.
        assert config is not None
        connection = Connection(config, timeout=timeout, user_agent=field_manager, on_answer=on_request)
        return cls(connection, field_manager=field_manager, outages=outages)

    @classmethod
    def from_kubeconfig(
        cls,
        document: Mapping[str, Any],
        *,
        field_manager: str = DEFAULT_FIELD_MANAGER,
        timeout: float = 10.0,
        outages: ApiOutages | None = None,
    ) -> Kube:
        """Connect with a kubeconfig given as data (another cluster's, read from a Secret): its current
        context. The caller vets it first (:func:`operator_core.kube.vet_kubeconfig`)."""
        return cls._of(KubeConfig.from_dict(dict(document)).get(), field_manager, timeout, None, outages)

    @property
    def _config(self) -> SingleConfig | None:
        return self._connection.config if self._connection is not None else None

    @property
    def server(self) -> str | None:
        """The API server's URL, as the kubeconfig names it (None for a client made without one)."""
        return self._config.cluster.server if self._config is not None else None

    async def server_version(self) -> str:
        """The API server's version (``GET /version``): the cheapest way to learn that it answers."""
        answer = await self._call("GET", "/version", "asking the API server its version")
        return str(answer.json().get("gitVersion", ""))

    def use_cache(self, cache: Cache) -> None:
        """Read the kinds ``cache`` holds from it, and give it the answers of our writes."""
        self.cache = cache

    def _connected(self) -> Connection:
        if self._connection is None:
            raise errors.OperatorError("this client was not made from a kubeconfig: it makes no requests")
        return self._connection

    async def _call(
        self,
        method: str,
        path: str,
        what: str,
        *,
        params: Mapping[str, str] | None = None,
        body: bytes | None = None,
        content_type: str = "application/json",
    ) -> Answer:
        """One request; an answer of 400 or more raised as its error."""
        sent = time.monotonic()
        with self._no_answer_is_unavailable(what):
            answer = await self._connected().request(
                method,
                path,
                params=params,
                body=body,
                headers={"Content-Type": content_type} if body is not None else None,
            )
        self._answered(sent)
        if answer.status >= 400:
            raise _refusal(answer, what)
        return answer

    @contextlib.contextmanager
    def _no_answer_is_unavailable(self, what: str, *, from_server: bool = True) -> Iterator[None]:
        """No answer at all, in the suite's error tree. From an API server that answered before, it is
        an outage: said once in the log when it begins (and once when it ends, :meth:`_answered`), while
        every request and watch that retries meanwhile logs at debug
        (:func:`~operator_core.errors.said_already`) and waits for :attr:`answering`. Before its first
        answer, the start check says it (operator_core.starting.check_start). ``from_server`` False:
        no answer says nothing of the API server (a pod behind its proxy that did not answer in time)."""
        try:
            yield
        except NoAnswer as error:
            server = self.server or ""
            outage = from_server and server in self.outages.answered
            if outage:
                self.answering.clear()
                if server not in self.outages.silent_since:
                    self.outages.silent_since[server] = time.monotonic()
                    _log.warning(
                        "the API server at %s does not answer (%s): waiting for it; requests and watches "
                        "retry quietly until it does",
                        server,
                        scrub(str(error)),
                    )
            raise errors.Unavailable(
                scrub(f"{what}: no answer from the API server ({error})"), reason=error.reason, outage=outage
            ) from error

    def _answered(self, sent: float) -> None:
        """The API server answered (any status) a request ``sent`` then (monotonic): the end of an
        outage, said once. Not an answer to a request sent before the outage began: an API server going
        away still completes some of what it had, after refusing others, which is no end of anything."""
        server = self.server or ""
        self.outages.answered.add(server)
        since = self.outages.silent_since.get(server)
        if since is not None and sent < since:
            return
        self.answering.set()
        self.outages.silent_since.pop(server, None)
        if since is not None:
            _log.warning("the API server at %s answers again, after %.0f s", server, time.monotonic() - since)

    async def close(self) -> None:
        if self._connection is not None:
            await self._connection.close()

    async def __aenter__(self) -> Kube:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- kinds

    async def version(self) -> dict[str, Any]:
        """The API server's ``/version`` (any client it authenticates may read it)."""
        answer = await self._call("GET", "/version", "reading the API server's version")
        return dict(answer.json())

    async def served_kind(self, api_version: str, kind: str) -> ServedKind:
        """How the API server serves a kind (its plural, whether it lives in namespaces), from the
        discovery document of its group-version (``/api/v1``, ``/apis/{group}/{version}``), which
        every authenticated client may read. Asked once per group-version; a kind it did not list is
        asked again at most every :data:`DISCOVERY_REFRESH_SECONDS` (its CRD may be installed since).
        NotFound when the kind is not served."""
        known = self._discovered.get(api_version)
        if known is None or (
            kind not in known.kinds and time.monotonic() - known.read_at > DISCOVERY_REFRESH_SECONDS
        ):
            known = _Discovery(await self._discover(api_version), time.monotonic())
            self._discovered[api_version] = known
        found = known.kinds.get(kind)
        if found is None:
            raise errors.NotFound(
                f"kind {kind} of {api_version} is not served", status=404, reason="NotFound"
            )
        return found

    async def serves(self, api_version: str, kind: str) -> bool:
        """Whether the API server serves ``kind`` (an optional kind: PodMonitor, HTTPRoute, a provider's)."""
        try:
            await self.served_kind(api_version, kind)
        except errors.NotFound:
            return False
        return True

    async def _discover(self, api_version: str) -> dict[str, ServedKind]:
        try:
            answer = await self._call("GET", _group_version_path(api_version), f"discovering {api_version}")
        except errors.NotFound:
            return {}
        return {
            resource["kind"]: ServedKind(str(resource["name"]), bool(resource["namespaced"]))
            for resource in answer.json().get("resources") or []
            if "/" not in resource["name"]  # not a subresource (status, scale)
        }

    async def preferred_version(self, group: str) -> str:
        """The API version the server prefers for ``group`` (``group/version``; ``v1`` for the core
        group), from its discovery document, asked once per group and client. NotFound when the
        group is not served."""
        if not group:
            return "v1"
        if group not in self._preferred_versions:
            answer = await self._call("GET", f"/apis/{group}", f"discovering API group {group}")
            self._preferred_versions[group] = str(answer.json()["preferredVersion"]["groupVersion"])
        return self._preferred_versions[group]

    async def collection_path(self, api_version: str, kind: str, namespace: str | None = ALL) -> str:
        """The URL path of a kind's objects: in every namespace (``/api/v1/pods``, ``/apis/apps/v1/...``)
        by default, or in one (None: the kubeconfig's default namespace)."""
        served = await self.served_kind(api_version, kind)
        path = _group_version_path(api_version)
        if namespace != ALL and served.namespaced:
            path += f"/namespaces/{namespace or self.default_namespace}"
        return f"{path}/{served.plural}"

    async def object_path(self, api_version: str, kind: str, name: str, namespace: str | None) -> str:
        """The URL path of one object (``namespace`` is ignored for a kind that has none)."""
        return f"{await self.collection_path(api_version, kind, namespace)}/{name}"

    @property
    def default_namespace(self) -> str:
        """The kubeconfig context's namespace, or ``default``."""
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
        answer = await self._call(
            method,
            path,
            what,
            params={"fieldManager": self.field_manager, **(params or {})},
            body=json.dumps(body, default=_json_value).encode(),
            content_type=content_type,
        )
        return self._remember(answer.json())

    # -- reads

    def _informers_for(self, api_version: str, kind: str, *, of_one: bool = False) -> list[Informer]:
        """The synced informers of a kind that the cache holds. For one object (``of_one``), not those
        that think the kind is not served: a caller that names one has seen its CRD."""
        informers = self.cache.informers_of(api_version, kind) if self.cache is not None else []
        return [informer for informer in informers if informer.synced and (informer.served or not of_one)]

    def _covering(
        self,
        api_version: str,
        kind: str,
        labels: Mapping[str, str] | None,
        *,
        of_one: bool = False,
        with_spec: bool = False,
    ) -> Informer | None:
        """A synced informer of a kind that holds every object carrying (or selected by) ``labels``
        (``with_spec``: with their spec)."""
        for informer in self._informers_for(api_version, kind, of_one=of_one):
            if selector_covers(informer.kind.labels, labels) and (informer.kind.keep_spec or not with_spec):
                return informer
        return None

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
        informers = self._informers_for(api_version, kind, of_one=True)
        for informer in informers:
            found: Manifest | None = informer.get(namespace, name)
            if found is not None:
                return found
        if informers and (labelled_only or any(informer.kind.labels is None for informer in informers)):
            return None
        return await self.get_live(api_version, kind, name, namespace)

    async def get_live(
        self, api_version: str, kind: str, name: str, namespace: str | None = None
    ) -> Manifest | None:
        """The object as the API server has it now (a request, whatever the cache holds)."""
        path = await self.object_path(api_version, kind, name, namespace)
        try:
            answer = await self._call("GET", path, f"reading {kind} {name}")
        except errors.NotFound:
            return None
        found: Manifest = answer.json()
        return found

    async def list(
        self,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        *,
        labels: Mapping[str, str] | None = None,
        fields: Mapping[str, str] | None = None,
    ) -> list[Manifest]:
        """Objects of a kind. For a namespaced kind, ``namespace="*"`` means every namespace;
        None means the kubeconfig's default namespace. From the cache when it holds every object
        that ``labels`` selects (``fields``, a field selector, is always asked of the API server)."""
        informer = None if fields else self._covering(api_version, kind, labels)
        if informer is not None and namespace is not None:
            return list(informer.list(namespace, labels))
        items, _ = await self._list_pages((api_version, kind), labels, namespace, fields=fields)
        return items

    # -- writes

    async def apply(self, desired: Mapping[str, Any], *, force: bool = True) -> ApplyResult:
        """Server-side apply ``desired`` unless the live object already matches it."""
        metadata = desired.get("metadata", {})
        informer = self._covering(
            desired["apiVersion"], desired["kind"], metadata.get("labels"), of_one=True, with_spec=True
        )
        if informer is not None:
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
        path = await self.object_path(api_version, kind, name, namespace)
        options: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "DeleteOptions",
            "propagationPolicy": propagation,
        }
        if grace_period is not None:
            options["gracePeriodSeconds"] = grace_period
        self.write_calls += 1
        try:
            await self._call("DELETE", path, f"deleting {kind} {name}", body=json.dumps(options).encode())
        except errors.NotFound:
            return False
        return True

    async def proxy_get(
        self, namespace: str, pod: str, port: int, path: str, *, headers: Mapping[str, str], timeout: float
    ) -> tuple[int, bytes]:
        """GET ``path`` on a pod's port through the API server's pod proxy (see :meth:`proxy`)."""
        return await self.proxy("GET", namespace, pod, port, path, headers=headers, timeout=timeout)

    async def proxy(
        self,
        method: str,
        namespace: str,
        pod: str,
        port: int,
        path: str,
        *,
        headers: Mapping[str, str],
        timeout: float,
        body: bytes | None = None,
        scheme: str = "http",
    ) -> tuple[int, bytes]:
        """``method`` ``path`` on a pod's port through the API server's pod proxy: (status code, body).

        For an operator that runs outside the cluster, where pod addresses are not routable.
        It goes the same connection as every other request (same server, CA and credentials).
        No answer at all is :class:`~operator_core.errors.Unavailable`; any answer, an error page
        included, is returned as it came. With ``scheme`` https, the API server speaks TLS to the pod
        (and, as Kubernetes does for every pod proxy, does not verify the pod's certificate).
        """
        sent = time.monotonic()
        target = f"{pod}:{port}" if scheme == "http" else f"{scheme}:{pod}:{port}"
        with self._no_answer_is_unavailable(f"proxying to pod {namespace}/{pod}:{port}", from_server=False):
            answer = await self._connected().request(
                method,
                f"/api/v1/namespaces/{namespace}/pods/{target}/proxy{path}",
                headers=headers,
                timeout=timeout,
                body=body,
            )
        self._answered(sent)
        return answer.status, answer.body

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
        return (await self.served_kind(*kind)).namespaced

    async def _list_pages(
        self,
        kind: KindRef,
        labels: Mapping[str, str] | None,
        namespace: str | None,
        each: Callable[[Manifest], Manifest] | None = None,
        *,
        fields: Mapping[str, str] | None = None,
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
        if fields:
            parameters["fieldSelector"] = ",".join(f"{key}={value}" for key, value in fields.items())
        items: builtins.list[Manifest] = []
        while True:
            page = (await self._call("GET", path, f"listing {kind_name}", params=parameters)).json()
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
        read_timeout = timeout_seconds + self._connected().timeout
        sent = time.monotonic()
        with self._no_answer_is_unavailable(what):
            async with self._connected().stream(path, params=parameters, read_timeout=read_timeout) as answer:
                self._answered(sent)
                if answer.status >= 400:
                    raise _refusal(Answer(answer.status, await answer.body()), what)
                yield OPENED, {}
                async for line in answer.lines():
                    event = decode_json(line)
                    event_type, obj = event.get("type", ""), event.get("object") or {}
                    if event_type == "ERROR":
                        code = int(obj.get("code") or 0)
                        raise _error_for(code)(
                            scrub(f"{what}: {obj.get('message') or obj.get('reason') or 'watch error'}"),
                            status=code,
                            reason=str(obj.get("reason") or ""),
                        )
                    yield event_type, obj
