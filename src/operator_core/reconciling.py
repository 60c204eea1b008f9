"""Building blocks of a level-triggered controller, shared by the operators' ``controller`` rooms.

One loop per custom object, woken by changes:

- :func:`connect`: the API client and Event recorder an operator's start-up handler makes.

- :class:`Wakeups`: one event per object; a change the watch caches see to the
  object, one of its children or something it names (:class:`References`) sets
  it, and the object's loop wakes at once.
- :func:`run_object_loop`: the body of an operator's per-object loop, which the
  watch cache starts as soon as it holds a new object: wait until the watch
  caches have listed, read the object (from them), reconcile it until it is
  gone or being deleted, taking turns through :func:`reconcile_gate` with the operator's other objects.
- :func:`run_loop`: reconcile, then sleep until woken, stopped, or the delay the
  reconcile asked for passes; failures never end the loop, and
  :func:`operator_core.errors.retry_policy` says whether one backs off or waits
  for a change.

- :class:`Context`: what every reconcile of one operator process shares (its client, its Event
  recorder, its settings, what its start hook made).

One reconcile's steps, conditions and status are :mod:`operator_core.steps`'s.

Who calls it: :mod:`operator_core.controller` (the wiring every operator uses).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import math
import time
from collections.abc import Awaitable, Callable, Hashable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from operator_core import errors
from operator_core.cache import NEEDED_KINDS, KindRef
from operator_core.children import INSTANCE_LABEL, MANAGED_BY_LABEL, OWNER_NAMESPACE_LABEL, Manifest
from operator_core.crdgen import CustomResource
from operator_core.errors import Retry, StartFailed, retry_policy
from operator_core.events import EventRecorder
from operator_core.kube import ApiOutages, Kube
from operator_core.metrics import count_request
from operator_core.settings import KubeSettings, from_env

__all__ = [
    "DEFAULT_RETRY_SECONDS",
    "WAIT_FOR_CHANGE",
    "Context",
    "References",
    "Stopped",
    "Wakeups",
    "connect",
    "first_of",
    "reconcile_gate",
    "reconciling_as",
    "run_loop",
    "run_object_loop",
    "unless_stopped",
    "waker",
]

DEFAULT_RETRY_SECONDS = (2.0, 5.0, 10.0, 30.0)
WAIT_FOR_CHANGE = math.inf
"""What a reconcile returns when only a change can help (a Secret only the user can create): no timer."""
LONG_TURN_WAIT_SECONDS = 10.0
"""A pass that waited longer than this for its turn (:func:`reconcile_gate`) says so: every turn was taken
by reconciles that run long, and a change to this object waited for one of them to end."""


T = TypeVar("T")


class Flag(Protocol):
    """Something to wait for: an :class:`asyncio.Event`, a stop flag."""

    def wait(self) -> Awaitable[Any]: ...


class Stopped(Flag, Protocol):
    """A stop flag: truthy once stopping, and awaitable until then."""

    def __bool__(self) -> bool: ...


_RECONCILING: contextvars.ContextVar[tuple[Wakeups, Hashable] | None] = contextvars.ContextVar(
    "reconciling", default=None
)
"""The object whose reconcile runs in this task: its own writes do not wake it again."""


@contextlib.contextmanager
def reconciling_as(wakeups: Wakeups, key: Hashable) -> Iterator[None]:
    """Within: the reconcile of ``key`` (of ``wakeups``) runs in this task; its writes do not wake it."""
    token = _RECONCILING.set((wakeups, key))
    try:
        yield
    finally:
        _RECONCILING.reset(token)


class Wakeups:
    """Per-object wake-up events, keyed by whatever names an object (e.g. namespace and name).

    A change made by an object's own reconcile (its status, its children) does not wake that
    object: it knows, and a second pass would only find nothing to do. It wakes any other
    object that reads it (a ClusterStack whose release's status changed).
    """

    def __init__(self) -> None:
        self._events: dict[Hashable, asyncio.Event] = {}

    def register(self, key: Hashable) -> asyncio.Event:
        return self._events.setdefault(key, asyncio.Event())

    def forget(self, key: Hashable) -> None:
        self._events.pop(key, None)

    def wake(self, key: Hashable) -> None:
        reconciling = _RECONCILING.get()
        if reconciling is not None and reconciling[0] is self and reconciling[1] == key:
            return
        if event := self._events.get(key):
            event.set()

    def registered(self) -> list[Hashable]:
        return list(self._events)


def connect_client(outages: ApiOutages | None = None) -> Kube:
    """The API client (:class:`KubeSettings`, from OPERATOR_SUITE_* variables), from ``--kubeconfig``,
    ``$KUBECONFIG``, the in-cluster configuration or ``~/.kube/config``; :class:`StartFailed` with the
    reason when none can be read. ``outages``: the process's memory of outages, shared by its clients."""
    settings = from_env(KubeSettings)
    try:
        return Kube.connect(
            field_manager=settings.field_manager,
            timeout=settings.request_timeout,
            on_request=count_request,
            outages=outages,
        )
    except Exception as error:  # lightkube's ConfigError, an unreadable file, a malformed one
        raise StartFailed(f"no usable kubeconfig or in-cluster configuration: {error}") from error


def connect(controller: str, outages: ApiOutages | None = None) -> tuple[Kube, EventRecorder]:
    """The API client (:func:`connect_client`) and an Event recorder."""
    kube = connect_client(outages)
    return kube, EventRecorder(kube, controller=controller)


def reconcile_gate() -> asyncio.Semaphore:
    """The turns an operator's object loops take (:attr:`KubeSettings.max_concurrent_reconciles` at once)."""
    return asyncio.Semaphore(from_env(KubeSettings).max_concurrent_reconciles)


class References:
    """Which of a namespace's objects (a user's Secret, say) each instance's spec names. Pure bookkeeping.

    Those objects are not children: they carry none of our labels, so only this book says whose
    loop a change to one of them must wake (a missing Secret created at last, a key rotated).
    """

    def __init__(self, named: Callable[[dict[str, Any]], Iterable[tuple[str, str]]]) -> None:
        self.named = named
        """What an instance (the object as read) names: (kind, name) pairs in its own namespace."""
        self._holders: dict[tuple[str, str, str], set[str]] = {}
        """(kind, namespace, name) -> the instances that name it."""

    def remember(self, namespace: str, instance: str, referenced: Iterable[tuple[str, str]]) -> None:
        """``instance`` now names exactly ``referenced``: (kind, name) pairs in its own namespace."""
        for (_, held_in, _), holders in list(self._holders.items()):
            if held_in == namespace:
                holders.discard(instance)
        for plural, name in referenced:
            self._holders.setdefault((plural, namespace, name), set()).add(instance)
        self._holders = {key: holders for key, holders in self._holders.items() if holders}

    def forget(self, namespace: str, instance: str) -> None:
        self.remember(namespace, instance, ())

    def holders(self, kind: str, namespace: str, name: str) -> set[str]:
        return set(self._holders.get((kind, namespace, name), ()))


async def run_object_loop(
    kube: Kube,
    resource: CustomResource,
    name: str,
    namespace: str,
    reconcile: Callable[[dict[str, Any]], Awaitable[float]],
    wakeups: Wakeups,
    stopped: Stopped,
    *,
    logger: logging.Logger,
    gate: asyncio.Semaphore | None = None,
    references: References | None = None,
    retry_seconds: tuple[float, ...] = DEFAULT_RETRY_SECONDS,
    batch_seconds: float = 0.0,
    needs: frozenset[KindRef] | None = None,
) -> None:
    """Reconcile one namespaced custom object until it is deleted (or being deleted) or ``stopped``.

    Each pass reads the object afresh and hands it to ``reconcile``, which returns the
    seconds until the next look; changes registered with ``wakeups`` under
    ``(namespace, name)`` cut the wait short, and so do changes to what the object
    names in ``references``, as of each pass. Each pass first waits for the caches of
    ``needs`` (the kinds its controller declared; None: every cache) to be synced.
    """
    key = (namespace, name)
    NEEDED_KINDS.set(needs)  # this loop's own task: what its deletes require to be synced

    async def once() -> float | None:
        began = time.monotonic()
        if kube.cache is not None:
            # Nothing is decided from a cache that has not listed yet (after a start, or a 410).
            await kube.cache.wait_settled(needs)
        settled = time.monotonic()
        async with gate or contextlib.nullcontext():
            started = time.monotonic()
            _say_waits(logger, settled - began, started - settled)
            # The cache started this loop, and tells it of the object's deletion: what it holds is enough.
            obj = await kube.get(resource.api_version, resource.kind, name, namespace)
            if obj is None or obj["metadata"].get("deletionTimestamp"):
                return None
            with reconciling_as(wakeups, key):
                if references is not None:
                    references.remember(namespace, name, references.named(obj))
                delay = await reconcile(obj)
            logger.debug(
                "reconciled version %s in %.2f s; next look %s",
                obj["metadata"].get("resourceVersion"),
                time.monotonic() - started,
                "when woken" if delay == WAIT_FOR_CHANGE else f"in {delay:.0f} s",
            )
            return delay

    try:
        await run_loop(
            once,
            wakeups.register(key),
            stopped,
            what=f"{namespace}/{name}",
            logger=logger,
            retry_seconds=retry_seconds,
            batch_seconds=batch_seconds,
            answering=kube.answering,
        )
    finally:
        wakeups.forget(key)
        if references is not None:
            references.forget(namespace, name)


def _say_waits(logger: logging.Logger, caches: float, turn: float) -> None:
    """What a pass waited for before it began: the watch caches to list, then a turn. A long wait for a
    turn is a warning (the operator's turns were all taken, and a change waited); the rest is debug."""
    if turn > LONG_TURN_WAIT_SECONDS:
        logger.warning(
            "waited %.0f s for a turn to reconcile: every turn was taken by longer reconciles"
            " (OPERATOR_SUITE_MAX_CONCURRENT_RECONCILES says how many run at once)",
            turn,
        )
    elif caches + turn >= 0.5:
        logger.debug("began after %.2f s for the watch caches and %.2f s for a turn", caches, turn)


async def run_loop(
    once: Callable[[], Awaitable[float | None]],
    wakeup: asyncio.Event,
    stopped: Stopped,
    *,
    what: str,
    logger: logging.Logger,
    retry_seconds: tuple[float, ...] = DEFAULT_RETRY_SECONDS,
    batch_seconds: float = 0.0,
    answering: asyncio.Event | None = None,
) -> None:
    """Call ``once`` until it returns None (the object is gone) or ``stopped``.

    ``once`` returns the seconds until the next look (:data:`WAIT_FOR_CHANGE`: only when
    woken). A failure never ends the loop, nor pauses it longer than its back-off;
    :func:`operator_core.errors.retry_policy` says what it costs: a temporary error is
    retried with back-off, a bug with its traceback in the log; a permanent one is logged
    once and waits until the object, or something it names or owns, changes. A failure of an
    API server outage (:func:`~operator_core.errors.said_already`) is logged at debug, and the
    outage's end (``answering``, the client's) cuts its back-off short. Once woken,
    the loop waits ``batch_seconds`` more, and every wake-up meanwhile joins the same pass.
    """
    failures = 0
    last_permanent = ""
    while not stopped:
        wakeup.clear()
        outage = False
        try:
            delay = await once()
            if delay is None:
                return
            failures, last_permanent = 0, ""
        except Exception as error:
            if stopped:
                # The operator is stopping and its client may be closed already: nothing to report.
                logger.debug("reconcile of %s ended by the operator stopping: %s", what, error)
                return
            if retry_policy(error) is Retry.WAIT_FOR_CHANGE:
                delay = WAIT_FOR_CHANGE
                if str(error) != last_permanent:
                    logger.warning("%s cannot be reconciled until it changes: %s", what, error)
                last_permanent = str(error)
            else:
                delay = retry_seconds[min(failures, len(retry_seconds) - 1)]
                failures += 1
                outage = errors.said_already(error)
                if isinstance(error, errors.OperatorError):
                    level = errors.retry_log_level(error)
                    logger.log(level, "reconcile of %s failed, retrying in %.0f s: %s", what, delay, error)
                else:
                    logger.exception("reconcile of %s crashed, retrying in %.0f s", what, delay)
        back = answering if outage and answering is not None else None
        if await _sleep(wakeup, stopped, delay, back) and batch_seconds > 0:
            # A change rarely comes alone (a new StatefulSet's status, then its pods, one by one):
            # what comes with it is taken in the same pass, and written in one status write.
            await first_of(stopped, timeout=batch_seconds)


async def _sleep(
    wakeup: asyncio.Event, stopped: Stopped, seconds: float, answering: asyncio.Event | None = None
) -> bool:
    """Until woken (True), stopped, ``seconds`` pass (never, for :data:`WAIT_FOR_CHANGE`), or the API
    server answers again (``answering``, when the failure was its outage)."""
    await first_of(wakeup, stopped, *([answering] if answering is not None else []), timeout=seconds)
    return wakeup.is_set() and not stopped


async def unless_stopped(work: Awaitable[T], stopping: Flag) -> tuple[bool, T | None]:
    """``work``'s result, unless ``stopping`` is set first: then ``work`` is cancelled, and (False, None).
    For what may wait long before anything runs (the start check on an API server that does not
    answer): a SIGTERM meanwhile ends it at once, not when it gives up."""
    task = asyncio.ensure_future(work)
    stopped = asyncio.ensure_future(stopping.wait())
    try:
        await asyncio.wait({task, stopped}, return_when=asyncio.FIRST_COMPLETED)
    except BaseException:
        task.cancel()
        raise
    finally:
        stopped.cancel()
    if task.done():
        return True, task.result()
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    return False, None


async def first_of(*flags: Flag, timeout: float) -> None:
    """Until one of ``flags`` is set, or ``timeout`` seconds pass (never, for :data:`WAIT_FOR_CHANGE`)."""
    waiters = [asyncio.ensure_future(flag.wait()) for flag in flags]
    try:
        await asyncio.wait(
            waiters, timeout=None if math.isinf(timeout) else timeout, return_when=asyncio.FIRST_COMPLETED
        )
    finally:
        for waiter in waiters:
            waiter.cancel()


RuntimeT = TypeVar("RuntimeT")


@dataclass
class Context:
    """What every reconcile of one operator process shares: its client, its Event recorder, its settings,
    and its runtime.

    ``runtime`` is what the operator's ``start`` hook made for its own reconciles (its settings, a probe
    client, what it keeps between reconciles): one object of the operator's own type, which a
    controller reads with :meth:`runtime_of`.
    """

    kube: Kube
    recorder: EventRecorder
    settings: KubeSettings
    runtime: object = None

    def runtime_of(self, kind: type[RuntimeT]) -> RuntimeT:
        """The runtime, as the operator's own ``kind``; a start hook that made none (or another) is a
        wiring mistake, said at once."""
        if not isinstance(self.runtime, kind):
            raise TypeError(f"the start hook made {type(self.runtime).__name__}, not {kind.__name__}")
        return self.runtime


def waker(
    books: Sequence[Wakeups],
    primary: KindRef,
    managed_by: str,
    references: References | None,
    wake_all_on: frozenset[KindRef] = frozenset(),
    namespaces_woken: Callable[[Manifest], Iterable[str]] | None = None,
) -> Callable[[KindRef, Manifest], None]:
    """What a change seen by the caches wakes, in each of ``books``: the object itself, the owner of a
    child, the holders of a named object, every object of its namespace and of those
    ``namespaces_woken`` names for it (``wake_all_on``)."""

    def changed(kind: KindRef, obj: Manifest) -> None:
        metadata = obj.get("metadata") or {}
        namespace, labels = metadata.get("namespace"), metadata.get("labels") or {}
        keys: list[Any] = []
        if kind == primary:
            keys.append((namespace, metadata.get("name")))
        else:
            if labels.get(MANAGED_BY_LABEL) == managed_by and INSTANCE_LABEL in labels:
                keys.append((labels.get(OWNER_NAMESPACE_LABEL, namespace), labels[INSTANCE_LABEL]))
            if references is not None:
                holders = references.holders(kind[1], namespace or "", metadata.get("name", ""))
                keys.extend((namespace, holder) for holder in holders)
        woken = (
            {namespace, *(namespaces_woken(obj) if namespaces_woken else ())}
            if kind in wake_all_on
            else set()
        )
        for wakeups in books:
            for key in wakeups.registered() if woken else ():
                if isinstance(key, tuple) and key[0] in woken:
                    wakeups.wake(key)
            for key in keys:
                wakeups.wake(key)

    return changed
