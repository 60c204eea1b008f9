"""One controller step for every operator: its process's life, and the wiring of each custom resource.

An operator's ``controller.wiring`` module describes itself once (its ``OPERATOR``), and
:mod:`operator_core.runner` runs it:

- :class:`Operator`: one per process. :meth:`Operator.run` connects
  (:func:`operator_core.reconciling.connect`), checks that the API server answers and serves the
  operator's own kinds (:func:`operator_core.starting.check_start`), starts the watch caches
  (:mod:`operator_core.cache`) that every read of its reconciles comes from and runs the operator's
  own ``start`` hook; once told to stop (even during the start check), it lets the reconciles in
  flight finish (:data:`LOOP_STOP_SECONDS`), runs its ``stop`` hook, then stops the caches and
  closes the client. Both hooks get the :class:`Context`. :meth:`Operator.health`
  is what ``/healthz`` shows: the reconciles counted and each cache's state.
- :meth:`Operator.controller`: one per custom resource. It adds to the caches
  the resource itself, its labelled children and what its spec names but does
  not own (a user's Secret, through :class:`~operator_core.reconciling.References`);
  a change to any of them wakes the object's loop at once. The cache starts one
  loop per object as soon as it holds it,
  :func:`~operator_core.reconciling.run_object_loop` with the operator's
  ``reconcile`` (decision 20); the loop waits for the caches of the kinds its controller declared,
  and for no other (decision 24).

Inside a reconcile, the children are brought to the desired set by
:func:`operator_core.applying.apply_report_prune`, a spec that its model refuses is reported
by :func:`operator_core.applying.report_invalid_spec`, and a declared kind RBAC does not let the
operator watch by :func:`operator_core.applying.report_unwatchable`.

Who calls it: the operators' ``controller`` rooms.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Sequence
from typing import Any

from operator_core import errors
from operator_core.applying import report_invalid_spec, report_unwatchable
from operator_core.cache import NEEDED_KINDS, Cache, Informer, KindRef, WatchedKind
from operator_core.children import (
    MANAGED_BY_LABEL,
    Manifest,
)
from operator_core.crdgen import CustomResource
from operator_core.kube import ApiOutages, Kube
from operator_core.logs import about_object
from operator_core.memory import freeze_long_lived, large_blocks_to_the_system, trim_after_work
from operator_core.metrics import ReplicaState, timed_reconcile
from operator_core.reconciling import (
    Context,
    References,
    Wakeups,
    connect,
    reconcile_gate,
    reconciling_as,
    run_loop,
    run_object_loop,
    unless_stopped,
    waker,
)
from operator_core.settings import KubeSettings, from_env
from operator_core.starting import EXIT_SECONDS, check_start, process_started
from operator_core.steps import FINALIZED

__all__ = ["FINALIZED", "LOOP_STOP_SECONDS", "Operator"]


Reconcile = Callable[[dict[str, Any], Context], Awaitable[float]]
"""One reconcile of one object: returns the seconds until the next look (``math.inf``: wait for a change)."""
Start = Callable[[Context], Awaitable[object]]
"""The start hook: makes the operator's runtime (:attr:`Context.runtime`) once the caches are up."""
Hook = Callable[[Context], Awaitable[None]]
Named = Callable[[dict[str, Any]], Iterable[tuple[str, str]]]
Kinds = Sequence[tuple[str, str]]
"""(apiVersion, kind) pairs."""


class Operator:
    """One operator process: its start-up and clean-up, and a controller per custom resource it reconciles."""

    def __init__(
        self,
        name: str,
        api_group: str,
        *,
        start: Start | None = None,
        stop: Hook | None = None,
        retired_finalizers: Sequence[str] = (),
        serving: Callable[[ApiOutages], contextlib.AbstractAsyncContextManager[object]] | None = None,
    ) -> None:
        self.name = name
        self._serving = serving
        self.replica = ReplicaState()
        """Whether this replica leads and its caches are synced (/readyz), as the runner and the start say."""
        self.outages = ApiOutages()
        """The memory of API server outages that every client of this process shares."""
        self.api_group = api_group
        self.controller_name = f"{api_group}/{name}"
        self._start_hook, self._stop_hook = start, stop
        self._logger = logging.getLogger(name)
        self._watched: list[WatchedKind] = []
        self._listeners: list[Callable[[KindRef, Manifest], None]] = []
        self.reconciles = 0
        """Reconciles run since the start (every pass of every loop), shown on the liveness endpoint."""
        self._reconciled: set[tuple[str, str, str]] = set()
        """(kind, namespace, name) of every object reconciled at least once since the start."""
        self._first_passes: dict[str, _FirstPass] = {}
        self._context: Context | None = None
        """Set once the caches are up and the start hook ran: the object loops may start."""
        self._connected: Context | None = None
        """Set from the moment the client exists: what the stop closes."""
        self._gate: asyncio.Semaphore | None = None
        self._finalizing: dict[tuple[str, tuple[Any, Any]], asyncio.Task[None]] = {}
        self._loops: dict[tuple[str, str, str, str], asyncio.Task[None]] = {}
        """(purpose, kind, namespace, name) -> the loop reconciling that object, or letting it go."""
        self.legacy_finalizers = (f"{api_group}/finalizer", *retired_finalizers)
        """Finalizers nothing of this operator honours, removed wherever they are found, so that an
        object can still be deleted: the one an earlier runtime put on every object before the loops
        were the cache's own (decision 20), and ``retired_finalizers``, those of an operator this
        one took over from (upstream's on the objects it made) whose clean-up has no work left here."""
        self._stopping_flag = _Flag()
        self._trimming: asyncio.Task[None] | None = None
        self._synced_watch: asyncio.Task[None] | None = None
        self._needs: dict[str, frozenset[KindRef]] = {}
        """Kind -> the kinds its controller declared: what its loops wait for, and nothing else."""
        self._resources: list[CustomResource] = []
        """The kinds it reconciles (their objects' loops start from the caches); each must be served
        for it to start."""
        self._hooked = False
        """Whether the start hook ran (then the stop hook runs too, whatever happened after)."""
        self._start_checked = False
        """Whether the start was checked once already in this process (a standby's check before it leads)."""

    def health(self) -> dict[str, Any]:
        """What ``/healthz`` shows: how many reconciles ran, of how many objects, when each kind's
        first pass ended, and what each watch cache holds (keyed by kind, and its label selector if any),
        whether it is synced, and the API server's refusal while RBAC forbids it."""
        context = self._context
        cache = context.kube.cache if context is not None else None
        return {
            "reconciles": {
                "count": self.reconciles,
                "objects": len(self._reconciled),
                "first_pass_done_at": {kind: first.done_at for kind, first in self._first_passes.items()},
                "at": time.time(),
            },
            "caches": {
                informer.kind.name: {
                    "objects": len(informer),
                    "synced": informer.synced,
                    "served": informer.served,
                    "forbidden": informer.forbidden,
                }
                for informer in (cache.informers if cache is not None else [])
            },
        }

    def serving(self) -> contextlib.AbstractAsyncContextManager[object]:
        """What every replica serves, leader or standby, for the process's whole life (the Cluster Stack
        operator's admission webhooks: a Service sends their calls to any ready pod); entered before
        the election, left at the end."""
        return self._serving(self.outages) if self._serving is not None else contextlib.nullcontext()

    async def run(self, stopping: asyncio.Event, namespaces: tuple[str, ...] | None = None) -> None:
        """Start, reconcile until ``stopping`` is set, then stop cleanly; raise
        :class:`~operator_core.errors.StartFailed` when the operator cannot start (after cleaning up).

        ``namespaces`` (``--namespace``; None: every one): its watch caches list and watch only there,
        which is all a namespace-scoped operator's Roles allow."""
        try:
            started, _ = await unless_stopped(self._start(namespaces), stopping)
            if started:
                await stopping.wait()
        finally:
            await self._stop()

    async def check_can_start(self, kube: Kube) -> None:
        """:func:`check_start` for this operator's kinds: the runner asks it before a replica waits for
        its Lease too, so that a standby does not wait on an API server it can never use.

        The first check of the process counts its patience from the process's start, so that a start
        that gives up is over within :data:`~operator_core.starting.START_SECONDS` of it; a later one
        (a standby's, once it leads) from its own start."""
        since = None if self._start_checked else process_started() - EXIT_SECONDS
        self._start_checked = True
        await check_start(kube, self._resources, since=since)

    async def _start(self, namespaces: tuple[str, ...] | None) -> None:
        large_blocks_to_the_system()  # before the first connection's buffer (operator_core.memory)
        kube, recorder = connect(self.controller_name, self.outages)
        self._connected = Context(kube, recorder, from_env(KubeSettings))
        await self.check_can_start(kube)
        cache = Cache(kube, namespaces=namespaces)
        cache.watch(self._watched)
        for listener in self._listeners:
            cache.on_change(listener)
        kube.use_cache(cache)
        await cache.start()
        declared = frozenset(kind.ref for kind in self._watched)
        self._synced_watch = asyncio.create_task(
            _report_synced(cache, declared, self.replica), name="report caches synced"
        )
        context, gate = self._connected, reconcile_gate()
        if self._start_hook is not None:
            self._hooked = True
            context.runtime = await self._start_hook(context)
        # Only now may loops start: one per object the first lists found (each listener saw it then, too
        # early), and from now on as the watches report new ones.
        self._context, self._gate = context, gate
        for resource in self._resources:
            kind = (resource.api_version, resource.kind)
            informer = cache.informer(*kind)
            for obj in informer.list() if informer is not None else []:
                for listener in self._listeners:
                    listener(kind, obj)
        self._trimming = asyncio.create_task(trim_after_work(lambda: self.reconciles), name="memory trim")

    async def _stop(self) -> None:
        context = self._connected
        if context is None:
            return
        self._stopping_flag.set()
        # A reconcile in flight may finish (its loop then sees the flag); one that takes longer is cancelled.
        loops = list(self._loops.values())
        if loops:
            _finished, unfinished = await asyncio.wait(loops, timeout=LOOP_STOP_SECONDS)
            for task in unfinished:
                task.cancel()
            await asyncio.gather(*loops, return_exceptions=True)
        background = [
            *self._finalizing.values(),
            *([self._trimming] if self._trimming else []),
            *([self._synced_watch] if self._synced_watch else []),
        ]
        for task in background:
            task.cancel()
        await asyncio.gather(*background, return_exceptions=True)
        try:
            if self._stop_hook is not None and self._hooked:
                await self._stop_hook(context)
        finally:
            await context.recorder.flush()
            if context.kube.cache is not None:
                await context.kube.cache.stop()
            await context.kube.close()
            self._connected = None

    def _object_loops(
        self, resource: CustomResource, run_object: Callable[[str, str], Coroutine[Any, Any, None]]
    ) -> Callable[[KindRef, Manifest], None]:
        """A listener that keeps one reconcile loop running for each object of ``resource`` in the cache
        that is not being deleted, from the moment the cache first holds it.

        The loop ends by itself once its object is gone or being deleted. The cache starts it: a new
        object is reconciled as soon as its ADDED event lands, with no second watch of the kind and no
        finalizer written first.
        """
        primary = (resource.api_version, resource.kind)
        self._resources.append(resource)

        def maybe_start(kind: KindRef, obj: Manifest) -> None:
            context = self._context
            if kind != primary or context is None or self._stopping_flag:
                return
            metadata = obj.get("metadata") or {}
            namespace, name = metadata.get("namespace") or "", metadata.get("name") or ""
            informer = context.kube.cache.informer(*primary) if context.kube.cache is not None else None
            held = informer.get(namespace, name) if informer is not None else obj
            if held is None:
                return
            if held["metadata"].get("deletionTimestamp"):
                if set(self.legacy_finalizers) & set(held["metadata"].get("finalizers") or []):
                    self._start_loop(("release", resource.kind, namespace, name), self._release_legacy(held))
                return
            key = ("reconcile", resource.kind, namespace, name)

            def restart_if_back() -> None:
                # Deleted and made again while the old loop was ending: the new object needs its own.
                if informer is not None and (again := informer.get(namespace, name)) is not None:
                    maybe_start(kind, again)

            self._start_loop(key, run_object(namespace, name), ended=restart_if_back)

        return maybe_start

    def _start_loop(
        self,
        key: tuple[str, str, str, str],
        loop: Coroutine[Any, Any, None],
        ended: Callable[[], None] | None = None,
    ) -> None:
        """Run ``loop`` as the one task for ``key``, unless one runs already; ``ended`` when it ends."""
        if key in self._loops:
            loop.close()
            return
        purpose, kind, namespace, name = key
        task = asyncio.get_running_loop().create_task(loop, name=f"{purpose} {kind} {namespace}/{name}")
        self._loops[key] = task

        def done(_: asyncio.Task[None]) -> None:
            self._loops.pop(key, None)
            if ended is not None and not self._stopping_flag:
                ended()

        task.add_done_callback(done)

    async def _release_legacy(self, obj: Manifest) -> None:
        """Remove :attr:`legacy_finalizers` from an object being deleted (retried as a reconcile is)."""
        context = self._context
        assert context is not None
        metadata = obj["metadata"]

        async def once() -> None:
            current = await context.kube.get(
                obj["apiVersion"], obj["kind"], metadata["name"], metadata["namespace"]
            )
            if current is not None:
                await _set_finalizers(context.kube, current, remove=list(self.legacy_finalizers))

        await run_loop(
            once,
            asyncio.Event(),
            self._stopping_flag,
            what=f"{metadata['namespace']}/{metadata['name']}'s retired finalizers",
            logger=self._logger,
            answering=context.kube.answering,
        )

    def _finalizers(
        self, resource: CustomResource, finalizer: str, finalize: Reconcile, finalizing: Wakeups
    ) -> Callable[[KindRef, Manifest], None]:
        """A listener that starts a finalizing loop for each object of ``resource`` being deleted.

        An object's reconcile loop ends once it is being deleted, so the clean-up runs in a loop of
        its own, started by the cache (at start too, for objects deleted while the operator was
        down), woken like the reconcile loop, until ``finalize`` returns :data:`FINALIZED`.
        """
        primary = (resource.api_version, resource.kind)

        def maybe_start(kind: KindRef, obj: Manifest) -> None:
            metadata = obj.get("metadata") or {}
            if kind != primary or not metadata.get("deletionTimestamp") or self._context is None:
                return
            if finalizer not in (metadata.get("finalizers") or []):
                return
            key = (metadata.get("namespace"), metadata.get("name"))
            if (resource.kind, key) in self._finalizing:
                return
            task = asyncio.get_running_loop().create_task(
                self._finalize_loop(resource, key, finalizer, finalize, finalizing),
                name=f"finalize {resource.kind} {key}",
            )
            self._finalizing[(resource.kind, key)] = task

        return maybe_start

    async def _finalize_loop(
        self,
        resource: CustomResource,
        key: tuple[Any, Any],
        finalizer: str,
        finalize: Reconcile,
        finalizing: Wakeups,
    ) -> None:
        context = self._context
        assert context is not None
        kube, (namespace, name) = context.kube, key
        needs = self._needs[resource.kind]
        NEEDED_KINDS.set(needs)  # this loop's own task: what its deletes require to be synced
        # Once the clean-up is done it is not done again: a removal of the finalizer that meets a write
        # made meanwhile (a reconcile's last status, a user's label) is a conflict, and its retry only
        # removes the finalizer, without running the clean-up (and its Event) a second time.
        cleaned_up = False

        async def once() -> float | None:
            nonlocal cleaned_up
            if kube.cache is not None:
                await kube.cache.wait_settled(needs)
            async with self._gate or contextlib.nullcontext():
                obj = await kube.get(resource.api_version, resource.kind, name, namespace)
                if obj is None or finalizer not in (obj["metadata"].get("finalizers") or []):
                    return None
                self.reconciles += 1
                with reconciling_as(finalizing, key):
                    if not cleaned_up:
                        delay = await finalize(obj, context)
                        if delay != FINALIZED:
                            return delay
                        cleaned_up = True
                    await _set_finalizers(kube, obj, remove=[finalizer, *self.legacy_finalizers])
                return None

        try:
            await run_loop(
                once,
                finalizing.register(key),
                self._stopping_flag,
                what=f"deletion of {namespace}/{name}",
                logger=self._logger,
                answering=kube.answering,
            )
        finally:
            finalizing.forget(key)
            self._finalizing.pop((resource.kind, key), None)

    def controller(
        self,
        resource: CustomResource,
        reconcile: Reconcile,
        *,
        managed_by: str,
        child_kinds: Kinds = (),
        observed_kinds: Kinds = (),
        named: Named | None = None,
        named_kinds: Sequence[tuple[str, str] | WatchedKind] = (),
        wake_all_on: Kinds = (),
        namespaces_woken: Callable[[Manifest], Iterable[str]] | None = None,
        read_kinds: Sequence[WatchedKind] = (),
        finalizer: str | None = None,
        finalize: Reconcile | None = None,
        needs_finalizer: Callable[[Manifest], bool] | None = None,
        on_gone: Callable[[Context, str, str], None] | None = None,
    ) -> None:
        """Reconcile every object of ``resource`` in a loop of its own, woken by what can change it.

        Every read comes from the operator's watch caches (:mod:`operator_core.cache`):
        ``resource`` itself, ``child_kinds`` ((apiVersion, kind) pairs; objects labelled
        ``managed-by: <managed_by>``, each waking the owner its instance label names),
        ``observed_kinds`` (labelled alike, never applied, held without their spec: a
        StatefulSet's pods), and
        ``named_kinds``, of which ``named`` says which objects an object's spec names (as
        (kind, name) pairs in its namespace); a change to one of them wakes the objects that
        name it; a :class:`~operator_core.cache.WatchedKind` there holds only the objects its labels
        select (the kubeconfig Secrets Cluster API labels, not every Secret). A change to an object
        of ``wake_all_on`` (held whole) wakes every object of
        ``resource`` in its namespace, and in those ``namespaces_woken`` names for it: for what any
        of them may depend on (a Cluster API Cluster using a ClusterClass, maybe of another
        namespace). ``read_kinds`` are held for the reconciles to read, wake nothing and hold
        up no loop (the Nodes the Typesense members run on: a node that goes NotReady changes its
        pods, which wake).

        With ``finalizer``, every object carries it from its first reconcile, and an object being
        deleted is handed to ``finalize`` (its clean-up, which may wait, returning the seconds
        until the next look) until it returns :data:`FINALIZED`; then the finalizer is removed.
        With ``needs_finalizer`` too, only an object for which it returns True carries it (one
        whose spec leaves something behind that no owner reference cleans up), and loses it again
        when it no longer does.

        ``on_gone(context, namespace, name)`` runs when an object's loop ends because it is gone or
        being deleted: to drop what the operator keeps about it (its metrics' series, what its runtime
        remembers).
        """
        wakeups, finalizing = Wakeups(), Wakeups()
        references = References(named) if named is not None else None
        primary = (resource.api_version, resource.kind)
        labelled = {MANAGED_BY_LABEL: managed_by}
        declared = [
            WatchedKind(*primary),
            *(WatchedKind(v, k, labelled) for v, k in child_kinds),
            *(WatchedKind(v, k, labelled, keep_spec=False) for v, k in observed_kinds),
            *(kind if isinstance(kind, WatchedKind) else WatchedKind(*kind) for kind in named_kinds),
            *(WatchedKind(v, k) for v, k in wake_all_on),
        ]
        self._watched.extend([*declared, *read_kinds])
        # Its loops wait for these caches only: one that cannot sync (RBAC forbids it) holds up no other
        # controller, and the objects of this one say which kind it is (report_unwatchable). Not for
        # read_kinds: what a reconcile only reads, it reads as it can (an API read before the cache
        # synced, or a refusal that it says in its status), and it never stops for them.
        needs = self._needs[resource.kind] = frozenset(kind.ref for kind in declared)
        # The finalizing loops are woken as the reconcile loops are (a Cluster that lets a deletion go).
        books = (wakeups, finalizing) if finalizer is not None else (wakeups,)
        self._listeners.append(
            waker(books, primary, managed_by, references, frozenset(wake_all_on), namespaces_woken)
        )
        if (finalizer is None) != (finalize is None):
            raise TypeError("a finalizer and its finalize step come together")
        if finalizer is not None and finalize is not None:
            self._listeners.append(self._finalizers(resource, finalizer, finalize, finalizing))
        first_pass = self._first_passes.setdefault(resource.kind, _FirstPass())

        async def reconcile_object(obj: dict[str, Any], context: Context) -> float:
            namespace, name = obj["metadata"]["namespace"], obj["metadata"]["name"]
            self.reconciles += 1
            self._reconciled.add((resource.kind, namespace, name))
            try:
                if context.kube.cache is not None:
                    context.kube.cache.require_watchable(needs)
                ours = [finalizer] if finalizer is not None else []
                holds = needs_finalizer is None or needs_finalizer(obj)
                await _set_finalizers(
                    context.kube,
                    obj,
                    add=ours if holds else [],
                    remove=[*self.legacy_finalizers, *([] if holds else ours)],
                )
                with timed_reconcile(resource.kind):
                    return await reconcile(obj, context)
            except errors.InvalidSpec as error:
                await report_invalid_spec(context, resource, obj, error)
                raise
            except errors.Unwatchable as error:
                await report_unwatchable(context, resource, obj, error)
                raise
            finally:
                informer = context.kube.cache.informer(*primary) if context.kube.cache else None
                if first_pass.finished(informer, (namespace, name)):
                    self._logger.info("every %s there at the start has been reconciled once", resource.kind)

        async def run_object(namespace: str, name: str) -> None:
            context = self._context
            assert context is not None, "object loops start once the operator has"
            with about_object(resource.kind, namespace, name):
                await run_object_loop(
                    context.kube,
                    resource,
                    name,
                    namespace,
                    lambda obj: reconcile_object(obj, context),
                    wakeups,
                    self._stopping_flag,
                    logger=self._logger,
                    gate=self._gate,
                    references=references,
                    batch_seconds=context.settings.batch_seconds,
                    needs=needs,
                )
            if on_gone is not None and not self._stopping_flag:
                on_gone(context, namespace, name)

        self._listeners.append(self._object_loops(resource, run_object))


class _FirstPass:
    """The objects of one kind that were there at the start and that no reconcile has finished since.

    Once none is left, a (re)started operator has looked at everything it found: logged once, and
    the time is on the liveness endpoint (``first_pass_done_at``), which is how bench/scale.py times
    a restart that has nothing to write.
    """

    def __init__(self) -> None:
        self._left: set[tuple[str, str]] | None = None
        self.done_at: float | None = None
        """Wall time the last of them was reconciled; None until then."""

    def finished(self, informer: Informer | None, key: tuple[str, str]) -> bool:
        """Note that ``key``'s reconcile finished; whether that was the last one left."""
        if self.done_at is not None:
            return False
        if self._left is None:  # the first reconcile: the caches are synced by now
            held = informer.list() if informer is not None else []
            self._left = {(obj["metadata"].get("namespace", ""), obj["metadata"]["name"]) for obj in held}
        self._left.discard(key)
        if informer is not None and len(self._left) <= _FIRST_PASS_RECHECK:
            # Deleted before their turn: nothing left to look at.
            self._left = {(ns, name) for ns, name in self._left if informer.get(ns, name) is not None}
        if self._left:
            return False
        self.done_at = time.time()
        return True


_FIRST_PASS_RECHECK = 16
"""How few objects must be left before the first pass looks whether they still exist (cheap then)."""


class _Flag:
    """The stop flag of the loops the operator runs: set once it is stopping."""

    def __init__(self) -> None:
        self._event = asyncio.Event()

    def set(self) -> None:
        self._event.set()

    def __bool__(self) -> bool:
        return self._event.is_set()

    async def wait(self) -> None:
        await self._event.wait()


LOOP_STOP_SECONDS = 10.0
"""How long a stopping operator lets the reconciles in flight finish before cancelling them."""


async def _report_synced(cache: Cache, declared: frozenset[KindRef], replica: ReplicaState) -> None:
    """/readyz and the gauge: ready once every watch cache declared at the start has listed its kind (or
    is known to be forbidden, which the objects that need it report). The start is over then: what
    lives now (the code, the first lists) is left out of the garbage collector's later passes."""
    await cache.wait_settled(declared)
    replica.caches_synced(True)
    freeze_long_lived()


async def _set_finalizers(
    kube: Kube, obj: Manifest, *, add: Sequence[str] = (), remove: Sequence[str] = ()
) -> None:
    """Add ``add`` to the finalizers and take ``remove`` out, in one patch or none; conditional on the
    object's resourceVersion, since a merge patch replaces the whole list (with others' finalizers)."""
    metadata = obj["metadata"]
    current = list(metadata.get("finalizers") or [])
    wanted = [f for f in current if f not in remove] + [f for f in add if f not in current]
    if wanted == current:
        return
    patch = {"metadata": {"finalizers": wanted, "resourceVersion": metadata["resourceVersion"]}}
    await kube.patch(obj["apiVersion"], obj["kind"], metadata["name"], metadata.get("namespace"), patch)
