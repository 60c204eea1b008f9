"""Watch-fed caches: what an operator reads instead of asking the API server.

An :class:`Informer` holds every object of one kind (all namespaces, or only the
namespaces the operator watches; optionally label-selected) in memory: it lists
once, then watches from the list's resourceVersion, as client-go's informers do.
An operator limited to some namespaces may list nothing else (its RBAC is a Role
in each), so there a namespaced kind is listed and watched in each namespace on
its own, as controller-runtime's multi-namespace cache does. Each change calls ``on_change``
with the object, so that a controller can wake the owner at once; a re-list
(after the watch fell too far behind: 410 Gone) reports what appeared, changed
or vanished in between as changes too. A :class:`Cache` is an operator's set
of informers, and :class:`operator_core.kube.Kube` reads from it for the kinds
it covers.

A cache that is filled once says nothing after a watch error, and a re-list
that only adds keeps objects deleted while the watch was down. Here the state
is explicit:
:attr:`Informer.synced` is false from the start until the first list, and
again from a failed watch until the next one is open. :meth:`Cache.require_synced`
is how a destructive step (a delete, quorum surgery, a "missing" child) refuses
to act on a view that may be stale; it raises :class:`~operator_core.errors.NotSynced`,
a temporary error, so the loop backs off and looks again.

What is kept: the object as the API server sent it, without ``managedFields``
(the largest part of most objects, and nothing a reconcile reads), and without
its spec for a kind that is only observed (:attr:`WatchedKind.keep_spec`). The cache
also takes the objects our own writes return (:meth:`Cache.offer`), so that a
reconcile right after a write does not see its own previous state and write
again; a newer resourceVersion always wins.

Who calls it: :mod:`operator_core.controller` makes one per operator;
:mod:`operator_core.kube` reads through it. The list and watch calls themselves are
:class:`WatchSource`'s (:class:`~operator_core.kube.Kube` is one).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import time
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from operator_core import errors

__all__ = [
    "ANY_VALUE",
    "EVERY_NAMESPACE",
    "NEEDED_KINDS",
    "Cache",
    "Informer",
    "KindRef",
    "WatchSource",
    "WatchedKind",
    "label_selector",
    "selector_covers",
    "settled_within",
]

Manifest = dict[str, Any]
KindRef = tuple[str, str]
"""(apiVersion, kind) of a watched kind."""

WATCH_TIMEOUT_SECONDS = 290
"""How long the API server keeps one watch open; the informer opens the next at once (no re-list)."""
SYNC_WARNING_SECONDS = 30.0
"""How long reconciles wait for an unsynced cache before a warning says which kinds are behind."""
FORBIDDEN_RECHECK_SECONDS = (1.0, 2.0, 5.0, 15.0, 60.0)
"""When an informer that RBAC forbids tries again: soon at first, then once a minute (a rule may have
been granted meanwhile). Soon, because a refusal is not always RBAC's last word: an API server that
has just restarted refuses everything until its authorizer has read the roles again (the soak saw
"clusterrole ... system:discovery not found" for a second after each restart), and a minute's wait
there left the operator blind to every cluster for that minute."""
UNSERVED_RECHECK_SECONDS = 300.0
"""How often an informer of a kind that is not served (its CRD not installed) looks again: each look is
a LIST of every CRD, the only request an idle operator made (one a minute, in bench/scale.py). Our
own write of the kind (a PodMonitor applied once its CRD is there) makes it look at once."""
RETRY_SECONDS = (0.5, 1.0, 2.0, 5.0, 10.0)
"""Waits before opening a watch again after it failed, growing with each failure in a row."""
EVERY_NAMESPACE = "*"
"""The scope of a list or watch across every namespace (and of a cluster-scoped kind)."""
OPENED = "OPENED"
"""The event a :class:`WatchSource` yields first, once the API server accepted the watch."""

_log = logging.getLogger("operator_core.cache")


class WatchSource(Protocol):
    """The calls an informer needs: one consistent list, a watch from its resourceVersion, and
    whether a kind lives in namespaces; and ``answering``, cleared while the API server is out."""

    answering: asyncio.Event

    async def list_objects(
        self,
        kind: KindRef,
        labels: Mapping[str, str] | None,
        namespace: str = EVERY_NAMESPACE,
        each: Callable[[Manifest], Manifest] | None = None,
    ) -> tuple[list[Manifest], str]:
        """Every object of ``kind`` in ``namespace`` (or all), each passed through ``each`` as it
        arrives, and the list's resourceVersion."""
        ...

    async def namespaced(self, kind: KindRef) -> bool:
        """Whether ``kind`` lives in namespaces; NotFound when it is not served."""
        ...

    def watch_objects(
        self,
        kind: KindRef,
        labels: Mapping[str, str] | None,
        resource_version: str,
        timeout_seconds: int,
        namespace: str = EVERY_NAMESPACE,
    ) -> AsyncIterator[tuple[str, Manifest]]:
        """(type, object) events after ``resource_version``: :data:`OPENED` first, then ADDED,
        MODIFIED, DELETED and BOOKMARK; raises :class:`~operator_core.errors.Expired` when the
        version is too old to watch from."""
        ...


ANY_VALUE = "*"
"""As a selector's label value: the label is set, to any value (``key`` alone in a label selector, as
Cluster API's ``cluster.x-k8s.io/cluster-name`` on every kubeconfig Secret). No label value can be "*"."""


def selector_covers(informer_labels: Mapping[str, str] | None, wanted: Mapping[str, str] | None) -> bool:
    """Whether an informer selecting ``informer_labels`` holds every object that ``wanted`` selects (or
    that carries ``wanted`` as its labels)."""
    wanted = wanted or {}
    return all(
        key in wanted and (value == ANY_VALUE or wanted[key] == value)
        for key, value in (informer_labels or {}).items()
    )


def label_selector(labels: Mapping[str, str] | None) -> str:
    """``labels`` as the API server's ``labelSelector`` ("" for none): ``key=value``, or ``key`` alone
    for :data:`ANY_VALUE`."""
    return ",".join(key if value == ANY_VALUE else f"{key}={value}" for key, value in (labels or {}).items())


def _labels(obj: Mapping[str, Any]) -> Mapping[str, str]:
    return obj.get("metadata", {}).get("labels") or {}


def _matches(obj: Mapping[str, Any], labels: Mapping[str, str] | None) -> bool:
    """Whether ``obj`` carries every one of ``labels``."""
    return selector_covers(labels, _labels(obj))


def _key(obj: Mapping[str, Any]) -> tuple[str, str]:
    metadata = obj["metadata"]
    return metadata.get("namespace") or "", metadata["name"]


def _revision(value: object) -> int | None:
    """A resourceVersion as a number, when it is one (etcd's revisions are)."""
    return int(value) if isinstance(value, str) and value.isdigit() else None


def _version(obj: Mapping[str, Any]) -> int | None:
    """The object's resourceVersion as a number, when it is one."""
    return _revision(obj.get("metadata", {}).get("resourceVersion"))


def _is_newer(candidate: Mapping[str, Any], current: Mapping[str, Any] | None) -> bool:
    """Whether ``candidate`` is at least as new as ``current``; unknown orders count as newer."""
    if current is None:
        return True
    new, old = _version(candidate), _version(current)
    return new is None or old is None or new >= old


def _trimmed(obj: Manifest, *, keep_spec: bool = True, kept_fields: tuple[str, ...] = ()) -> Manifest:
    """The object without managedFields (nothing reads them, and they are often half its size), without
    its spec when nobody reads that either, and with only ``kept_fields`` of its spec and status
    ("spec.taints", "status.conditions") when those are all anyone reads."""
    metadata = obj.get("metadata")
    if isinstance(metadata, dict) and "managedFields" in metadata:
        obj = {**obj, "metadata": {k: v for k, v in metadata.items() if k != "managedFields"}}
    if kept_fields:
        kept: dict[str, Any] = {k: v for k, v in obj.items() if k not in ("spec", "status")}
        for path in kept_fields:
            part, _, name = path.partition(".")
            source = obj.get(part)
            if isinstance(source, dict) and name in source:
                kept.setdefault(part, {})[name] = source[name]
        return kept
    if not keep_spec and "spec" in obj:
        spec = obj["spec"]
        obj = {k: v for k, v in obj.items() if k != "spec"}
        node = spec.get("nodeName") if isinstance(spec, dict) else None
        if node:  # where a pod runs is read (a backup Job goes there), and is one short string
            obj["spec"] = {"nodeName": node}
    return obj


@dataclass(frozen=True)
class WatchedKind:
    """One kind an operator reads from a cache: ``labels`` None means every object of it; a label whose
    value is :data:`ANY_VALUE` selects the objects that carry it at all.

    ``keep_spec`` False holds the objects without their spec: for a kind that is only observed,
    never applied (a StatefulSet's pods, of which only labels, status and the node they run on are
    read), which saves most of their memory. A pod's ``spec.nodeName`` is kept.
    """

    api_version: str
    kind: str
    labels: Mapping[str, str] | None = None
    keep_spec: bool = True
    kept_fields: tuple[str, ...] = ()
    """When set, the only fields of spec and status held ("spec.taints", "status.conditions"): for a kind
    only a few of whose fields are read (a Node, without its images and volumes)."""

    @property
    def ref(self) -> KindRef:
        return self.api_version, self.kind

    @property
    def name(self) -> str:
        """``Kind.version``, and its label selector if it has one: a cache's name on ``/healthz``."""
        return " ".join(filter(None, (f"{self.kind}.{self.api_version}", label_selector(self.labels))))


class Informer:
    """Every object of one kind, kept current by a watch; see the module's docstring."""

    def __init__(
        self,
        source: WatchSource,
        kind: WatchedKind,
        on_change: Callable[[Manifest], None] | None = None,
        *,
        namespaces: Sequence[str] | None = None,
        retry_seconds: tuple[float, ...] = RETRY_SECONDS,
        watch_timeout_seconds: int = WATCH_TIMEOUT_SECONDS,
    ) -> None:
        self.kind = kind
        self._source = source
        self._on_change = on_change
        self._namespaces = tuple(namespaces) if namespaces else None
        """Only these namespaces (None: every one), for a kind that lives in namespaces."""
        self._retry_seconds = retry_seconds
        self._watch_timeout = watch_timeout_seconds
        self._objects: dict[tuple[str, str], Manifest] = {}
        self._by_label: dict[tuple[str, str], set[tuple[str, str]]] = {}
        """The keys of the objects carrying each label (key, value): a list by label reads only those."""
        self._versions: dict[str, str | None] = {}
        """The resourceVersion each scope (a namespace, or every one) watches from; None: list first."""
        self._scope_synced: dict[str, bool] = {}
        self._synced = asyncio.Event()
        """Set while every scope is listed and its watch open."""
        self._settled = asyncio.Event()
        """Set while it is synced, or RBAC forbids it (it will not sync until a rule is granted)."""
        self.forbidden: str | None = None
        """The API server's refusal (403) while RBAC forbids listing or watching the kind; it holds nothing
        then, and looks again after each of :data:`FORBIDDEN_RECHECK_SECONDS` in turn."""
        self._refusals = 0
        """Refusals in a row, for the wait before the next look."""
        self.lists = 0
        """How many times the informer listed (1 after the start; more after each 410 Gone)."""
        self.served = True
        """False while the API server does not serve the kind (a CRD not installed): it holds nothing."""
        self._look_again = asyncio.Event()

    @property
    def resource_version(self) -> str | None:
        """Where the every-namespace watch resumes (None: it lists first)."""
        return self._versions.get(EVERY_NAMESPACE)

    @resource_version.setter
    def resource_version(self, version: str | None) -> None:
        self._versions[EVERY_NAMESPACE] = version

    def __repr__(self) -> str:
        where = f" in {', '.join(self._namespaces)}" if self._namespaces else ""
        return f"Informer({self.kind.kind} {dict(self.kind.labels or {})}{where})"

    # -- reads

    @property
    def synced(self) -> bool:
        """Listed, and its watch open: what it holds is as current as the watch."""
        return self._synced.is_set()

    async def wait_synced(self) -> None:
        await self._synced.wait()

    @property
    def settled(self) -> bool:
        """Synced, or known to be forbidden: waiting for it longer would tell nothing more."""
        return self._settled.is_set()

    async def wait_settled(self) -> None:
        await self._settled.wait()

    def get(self, namespace: str | None, name: str) -> Manifest | None:
        return self._objects.get((namespace or "", name))

    def list(self, namespace: str | None = None, labels: Mapping[str, str] | None = None) -> list[Manifest]:
        """Objects in ``namespace`` (None or "*": every namespace) that carry every one of ``labels``."""
        every = namespace in (None, "*")
        exact = [(key, value) for key, value in (labels or {}).items() if value != ANY_VALUE]
        candidates: Iterable[tuple[tuple[str, str], Manifest]] = self._objects.items()
        if exact:
            fewest = min((self._by_label.get(pair, set()) for pair in exact), key=len)
            candidates = ((key, self._objects[key]) for key in sorted(fewest))
        return [
            obj
            for (held_in, _), obj in candidates
            if (every or held_in == namespace) and _matches(obj, labels)
        ]

    def __len__(self) -> int:
        return len(self._objects)

    # -- writes

    def offer(self, obj: Manifest) -> None:
        """What one of our own writes returned; kept when it is newer than what the watch told.

        A write of a kind this informer thought not served means its CRD is there now: list at once.
        """
        if not self.served:
            self._look_again.set()
        if not _matches(obj, self.kind.labels):
            return
        key = _key(obj)
        if self._told_already(key[0], obj):
            # The watch is past this version: it told this state, or a later one. A write's answer that
            # comes after the watch's DELETED of the object must not bring back the object it deleted.
            return
        if _is_newer(obj, self._objects.get(key)):
            self._put(key, self._trimmed(obj))
            # Reported now, as the watch event of this version will not be: whoever wrote it is not
            # woken by it (see operator_core.reconciling.Wakeups), but whoever else reads it is.
            self._changed(obj)

    def _told_already(self, namespace: str, obj: Manifest) -> bool:
        """Whether the watch of ``obj``'s scope has delivered every change up to ``obj``'s version."""
        scope = namespace if namespace in self._scope_synced else EVERY_NAMESPACE
        watched, offered = _revision(self._versions.get(scope)), _version(obj)
        return offered is not None and watched is not None and offered <= watched

    # -- the watch

    async def run(self) -> None:
        """List, then watch, until cancelled; a failure costs a retry, never the informer."""
        scopes = await self._scopes()
        self._scope_synced = dict.fromkeys(scopes, False)
        self._synced.clear()
        await asyncio.gather(*(self._follow(scope) for scope in scopes))

    async def _scopes(self) -> tuple[str, ...]:
        """Each watched namespace for a kind that lives in namespaces, when the operator watches only
        some; else the one scope of every namespace."""
        if self._namespaces is None:
            return (EVERY_NAMESPACE,)
        failures = 0
        while True:
            try:
                namespaced = await self._source.namespaced(self.kind.ref)
            except errors.NotFound:
                self._scope_synced = {EVERY_NAMESPACE: False}
                await self._wait_while_not_served(EVERY_NAMESPACE)
                continue
            except Exception as error:
                failures = await self._back_off(failures, error)
                continue
            return self._namespaces if namespaced else (EVERY_NAMESPACE,)

    async def _follow(self, scope: str) -> None:
        """List, then watch, one scope (a namespace, or every one)."""
        failures = 0
        while True:
            try:
                if self._versions.get(scope) is None:
                    await self._list(scope)
                async for event_type, obj in self._source.watch_objects(
                    self.kind.ref,
                    self.kind.labels,
                    self._versions.get(scope) or "",
                    self._watch_timeout,
                    namespace=scope,
                ):
                    if event_type == OPENED:
                        self._mark(scope, True)
                        failures = 0
                    else:
                        self._receive(event_type, obj, scope)
            except errors.NotFound:
                self._versions[scope] = None
                await self._wait_while_not_served(scope)
            except errors.Forbidden as error:
                self._versions[scope] = None
                await self._wait_while_forbidden(scope, error)
            except errors.Expired:
                # Too far behind to resume: list again (and report what changed meanwhile).
                _log.info("%r: watch expired, listing again", self)
                self._mark(scope, False)
                self._versions[scope] = None
            except Exception as error:
                self._mark(scope, False)
                failures = await self._back_off(failures, error)

    async def _wait_while_not_served(self, scope: str) -> None:
        """Not served: nothing of the kind exists, which is a synced view too. Look again later.

        An answer, so any refusal before it is over: a restarted API server refuses even discovery
        until its authorizer has read the roles again, and a kind whose CRD is not installed (PodMonitor,
        HTTPRoute) would otherwise stay forbidden, and its controller's reconciles refused, until the
        CRD came (seen in the soak: minutes of Ready=False, reason WatchForbidden)."""
        if self.served:
            _log.info("%r: not served; looking again every %.0f s", self, UNSERVED_RECHECK_SECONDS)
        if self.forbidden is not None:
            _log.info("%r: answered (not served), the refusal is over", self)
            self.forbidden = None
        self.served, self._refusals = False, 0
        await self._hold_nothing_until_looked_at(scope, synced=True, seconds=UNSERVED_RECHECK_SECONDS)

    async def _wait_while_forbidden(self, scope: str, error: errors.Forbidden) -> None:
        """RBAC forbids the list or the watch: said once (not once per retry), what it held is dropped
        (it could not be kept current), and it looks again later, since a rule may be granted."""
        if self.forbidden is None:
            _log.warning(
                "%r: the operator may not list or watch it, looking again soon, then every %.0f s: %s",
                self,
                FORBIDDEN_RECHECK_SECONDS[-1],
                error,
            )
        self.forbidden = str(error)
        wait = FORBIDDEN_RECHECK_SECONDS[min(self._refusals, len(FORBIDDEN_RECHECK_SECONDS) - 1)]
        self._refusals += 1
        await self._hold_nothing_until_looked_at(scope, synced=False, seconds=wait)

    async def _hold_nothing_until_looked_at(self, scope: str, *, synced: bool, seconds: float) -> None:
        """Drop what the scope held (reported as gone), mark it, and wait ``seconds`` before the next
        look, or less when something says to look again (our own write of a kind thought not served)."""
        self._replace({}, scope)
        self._mark(scope, synced)
        self._look_again.clear()
        await _wait_at_most(self._look_again, seconds)

    async def _back_off(self, failures: int, error: Exception) -> int:
        """Wait before the next try, longer after each failure in a row; a failure of an API server
        outage (said once, by the client) is not said again, and its end cuts the wait short.

        The outage's end also starts the count again: a restarted API server refuses watches for a
        moment ("storage is (re)initializing"), and that refusal must be retried within a second,
        not after the longest wait that the outage's failures had earned (10 s without any reconcile).
        """
        delay = self._retry_seconds[min(failures, len(self._retry_seconds) - 1)]
        if errors.said_already(error):
            _log.debug(
                "%r: watch failed, again in %.1f s or once the API server answers: %s", self, delay, error
            )
            await _wait_at_most(self._source.answering, delay)
            if self._source.answering.is_set():
                return 0
        else:
            _log.warning("%r: watch failed, again in %.1f s: %s", self, delay, error)
            await asyncio.sleep(delay)
        return failures + 1

    def _mark(self, scope: str, synced: bool) -> None:
        self._scope_synced[scope] = synced
        if synced and all(self._scope_synced.values()):
            self._synced.set()
        else:
            self._synced.clear()
        if self._synced.is_set() or self.forbidden is not None:
            self._settled.set()
        else:
            self._settled.clear()

    async def _list(self, scope: str) -> None:
        items, version = await self._source.list_objects(
            self.kind.ref, self.kind.labels, namespace=scope, each=self._trimmed
        )
        self._versions[scope], self.lists, self.served = version, self.lists + 1, True
        self._refusals = 0
        if self.forbidden is not None:
            _log.info("%r: listed, the operator may watch it now", self)
            self.forbidden = None
        self._replace({_key(obj): obj for obj in items}, scope)
        self._mark(scope, True)

    def _replace(self, fresh: dict[tuple[str, str], Manifest], scope: str) -> None:
        """Hold ``fresh`` instead of what the scope held, and report what appeared, changed or vanished."""
        if scope == EVERY_NAMESPACE:
            previous, self._objects, self._by_label = self._objects, {}, {}
        else:
            previous = {key: obj for key, obj in self._objects.items() if key[0] == scope}
            for key in previous:
                self._drop(key)
        for key, obj in fresh.items():
            self._put(key, obj)
        for key, obj in fresh.items():
            old = previous.get(key)
            if old is None or old.get("metadata", {}).get("resourceVersion") != obj["metadata"].get(
                "resourceVersion"
            ):
                self._changed(obj)
        for key in previous.keys() - fresh.keys():
            self._changed(previous[key])

    def _receive(self, event_type: str, obj: Manifest, scope: str = EVERY_NAMESPACE) -> None:
        version = obj.get("metadata", {}).get("resourceVersion")
        if version:
            self._versions[scope] = version
        if event_type == "BOOKMARK":
            return
        key = _key(obj)
        current = self._objects.get(key)
        if event_type == "DELETED":
            self._drop(key)
        elif current is not None and current["metadata"].get("resourceVersion") == version:
            return  # our own write, offered (and reported) already
        elif _is_newer(obj, current):
            self._put(key, self._trimmed(obj))
        self._changed(obj)

    def _put(self, key: tuple[str, str], obj: Manifest) -> None:
        self._drop(key)
        self._objects[key] = obj
        for label in _labels(obj).items():
            self._by_label.setdefault(label, set()).add(key)

    def _drop(self, key: tuple[str, str]) -> None:
        obj = self._objects.pop(key, None)
        if obj is None:
            return
        for label in _labels(obj).items():
            keys = self._by_label.get(label)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self._by_label[label]

    def _trimmed(self, obj: Manifest) -> Manifest:
        return _trimmed(obj, keep_spec=self.kind.keep_spec, kept_fields=self.kind.kept_fields)

    def _changed(self, obj: Manifest) -> None:
        if self._on_change is not None:
            try:
                self._on_change(obj)
            except Exception:  # a waker's bug must not stop the watch
                _log.exception("%r: change handler failed", self)


NEEDED_KINDS: contextvars.ContextVar[frozenset[KindRef] | None] = contextvars.ContextVar(
    "needed_kinds", default=None
)
"""The kinds the controller running this reconcile declared (None: outside any): what its destructive
steps require to be synced (:meth:`Cache.require_synced`). Set by the object loops."""


class Cache:
    """An operator's informers, and the one place that says whether those a reconcile needs are synced.

    The kinds declared before the start (:meth:`watch`) make one informer per kind, of the widest
    selector asked. A kind met at run time (:meth:`ensure`) never widens one: an informer that covers it
    is used, one it covers is replaced, and otherwise it gets an informer of its own selector beside the
    others (a Secret that a chart renders is held with the labels the operator gives it, not as every
    Secret in the cluster).
    """

    def __init__(self, source: WatchSource, namespaces: Sequence[str] | None = None) -> None:
        self._source = source
        self._namespaces = namespaces
        """Only these namespaces (None: every one): what the operator watches."""
        self._informers: dict[KindRef, list[Informer]] = {}
        self._listeners: list[Callable[[KindRef, Manifest], None]] = []
        self._tasks: dict[Informer, asyncio.Task[None]] = {}
        self._started = False

    def watch(self, kinds: Iterable[WatchedKind]) -> None:
        """Hold every object of these kinds (before :meth:`start`; after it, :meth:`ensure`).

        One informer per kind: two selectors of the same kind make one informer of the wider, and
        no selector is the widest; the spec is kept when any of them keeps it."""
        for wanted in kinds:
            held = self._informers.get(wanted.ref)
            current = held[0] if held else None
            labels, keep_spec, kept_fields = wanted.labels, wanted.keep_spec, wanted.kept_fields
            if current is not None:
                keep_spec = keep_spec or current.kind.keep_spec
                kept_fields = _wider_fields(kept_fields, current.kind.kept_fields)
                if current.kind.labels != labels:
                    common = {
                        key: value
                        for key, value in (current.kind.labels or {}).items()
                        if (labels or {}).get(key) == value
                    }
                    labels = common or None
            merged = WatchedKind(wanted.api_version, wanted.kind, labels, keep_spec, kept_fields)
            if current is None or current.kind != merged:
                self._informers[wanted.ref] = [self._informer(merged)]

    def _informer(self, kind: WatchedKind) -> Informer:
        return Informer(self._source, kind, self._notifier(kind.ref), namespaces=self._namespaces)

    def on_change(self, listener: Callable[[KindRef, Manifest], None]) -> None:
        """Call ``listener(kind, object)`` for every change the informers see."""
        self._listeners.append(listener)

    def _notifier(self, kind: KindRef) -> Callable[[Manifest], None]:
        def notify(obj: Manifest) -> None:
            for listener in self._listeners:
                listener(kind, obj)

        return notify

    async def start(self) -> None:
        self._started = True
        for informer in self.informers:
            self._run(informer)

    def _run(self, informer: Informer) -> None:
        # A context of its own: one started from a reconcile (ensure) must not carry that reconcile's
        # identity, or every change it sees would pass for that reconcile's own write.
        self._tasks[informer] = asyncio.create_task(
            informer.run(), name=f"cache {informer!r}", context=contextvars.Context()
        )

    def ensure(self, wanted: WatchedKind) -> Informer:
        """Hold ``wanted`` from now on, also once started: for kinds known only at run time (what a
        chart renders, a provider's kind). An informer that already holds it is kept; those it would
        hold are replaced by it, listed afresh; otherwise it is added beside the kind's others."""
        held = self._informers.setdefault(wanted.ref, [])
        for informer in held:
            if _holds(informer.kind, wanted):
                return informer
        informer = self._informer(wanted)
        replaced = [old for old in held if _holds(wanted, old.kind)]
        held[:] = [*(old for old in held if old not in replaced), informer]
        if self._started:
            for old in replaced:
                task = self._tasks.pop(old, None)
                if task is not None:
                    task.cancel()
            self._run(informer)
        return informer

    async def stop(self) -> None:
        self._started = False
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._tasks.clear()

    # -- reads

    def informer(
        self, api_version: str, kind: str, labels: Mapping[str, str] | None = None
    ) -> Informer | None:
        """The informer of a kind that holds every object ``labels`` select (None: every object)."""
        for informer in self._informers.get((api_version, kind), ()):
            if selector_covers(informer.kind.labels, labels):
                return informer
        return None

    def informers_of(self, api_version: str, kind: str) -> list[Informer]:
        """Every informer of a kind (more than one when run-time selectors did not cover each other)."""
        return list(self._informers.get((api_version, kind), ()))

    @property
    def informers(self) -> list[Informer]:
        return [informer for held in self._informers.values() for informer in held]

    def _of(self, kinds: Iterable[KindRef] | None) -> list[Informer]:
        if kinds is None:
            return self.informers
        wanted = set(kinds)
        return [informer for informer in self.informers if informer.kind.ref in wanted]

    async def wait_settled(self, kinds: Iterable[KindRef] | None = None) -> None:
        """Until every informer of ``kinds`` (None: every one) is synced, or known to be forbidden (it
        would never sync; :meth:`require_watchable` says so to whoever needs it). A warning names the
        ones behind every :data:`SYNC_WARNING_SECONDS`."""
        while True:
            behind = [informer for informer in self._of(kinds) if not informer.settled]
            if not behind:
                return
            if not self._source.answering.is_set():
                # An outage, said already by the client: the caches cannot sync before it ends, and
                # the wait for them starts again from the first answer (seen in a CI run: a restart of
                # the API server longer than the wait made a second warning).
                await self._source.answering.wait()
                continue
            began = time.monotonic()
            await settled_within(behind, SYNC_WARNING_SECONDS)
            still = [repr(informer) for informer in self._of(kinds) if not informer.settled]
            # Only after a whole wait, with the API server answering: caches that settled and were
            # unsettled again at once (the API server going away just then) are not "behind".
            if still and time.monotonic() - began >= SYNC_WARNING_SECONDS and self._source.answering.is_set():
                _log.warning("reconciles wait for the watch caches to sync: %s", ", ".join(still))

    def require_synced(self, what: str) -> None:
        """Raise :class:`~operator_core.errors.NotSynced` unless every informer the current reconcile's
        controller declared (:data:`NEEDED_KINDS`; outside a reconcile, every informer) is synced. A
        forbidden one holds nothing and is read from the API server: it is no stale view."""
        behind = [
            repr(informer)
            for informer in self._of(NEEDED_KINDS.get())
            if not informer.synced and informer.forbidden is None
        ]
        if behind:
            raise errors.NotSynced(f"not {what} while the cache may be stale: {', '.join(behind)} not synced")

    def require_watchable(self, kinds: Iterable[KindRef]) -> None:
        """Raise :class:`~operator_core.errors.Unwatchable` when RBAC forbids watching one of ``kinds``,
        naming each such kind and the API server's refusal (which names the missing permission)."""
        forbidden = [
            f"{informer.kind.kind} ({informer.kind.api_version}): {informer.forbidden}"
            for informer in self._of(kinds)
            if informer.forbidden is not None
        ]
        if forbidden:
            raise errors.Unwatchable("the operator may not watch " + "; ".join(forbidden))

    def offer(self, obj: Manifest) -> None:
        """An object one of our writes returned (see :meth:`Informer.offer`)."""
        for informer in self._informers.get((obj.get("apiVersion", ""), obj.get("kind", "")), ()):
            informer.offer(obj)


async def settled_within(informers: Iterable[Informer], seconds: float) -> None:
    """Until each of ``informers`` is synced or known to be forbidden, or ``seconds`` pass: for a step
    that has just made them (:meth:`Cache.ensure`) and reports whether it may watch their kinds."""
    waits = [asyncio.ensure_future(informer.wait_settled()) for informer in informers if not informer.settled]
    if not waits:
        return
    try:
        # asyncio.wait, not a gather: a wait cancelled by the operator stopping leaves no gathering
        # future whose CancelledError nobody retrieves (logged with a traceback).
        await asyncio.wait(waits, timeout=seconds)
    finally:
        for wait in waits:
            wait.cancel()


async def _wait_at_most(event: asyncio.Event, seconds: float) -> None:
    """Until ``event`` is set, or ``seconds`` pass."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(event.wait(), seconds)


def _wider_fields(one: tuple[str, ...], other: tuple[str, ...]) -> tuple[str, ...]:
    """The fields two askers of a kind keep together: every field when either keeps every one (``()``)."""
    return tuple(sorted(set(one) | set(other))) if one and other else ()


def _holds(holder: WatchedKind, wanted: WatchedKind) -> bool:
    """Whether an informer of ``holder`` holds everything ``wanted`` asks for."""
    held, asked = set(holder.kept_fields), set(wanted.kept_fields)
    fields = not held or (bool(asked) and asked <= held)
    return (
        selector_covers(holder.labels, wanted.labels)
        and (holder.keep_spec or not wanted.keep_spec)
        and fields
    )
