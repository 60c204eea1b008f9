"""One controller step for every operator: its wiring, and the apply-report-prune of an object's children.

An operator's ``controller.handlers`` module describes itself once, and this
module registers every kopf handler it needs:

- :class:`Operator`: one per process. At start it checks its settings, connects
  (:func:`operator_core.reconciling.connect`), applies the suite's kopf settings and
  runs the operator's own ``start`` hook; at exit, its ``stop`` hook, then closes
  the client. Both hooks get the :class:`Context`.
- :meth:`Operator.controller`: one per custom resource. It registers the watch
  that wakes an object's loop when the object changes, the watches of its
  labelled children (:func:`~operator_core.reconciling.wake_on_children`), the
  watches of what its spec names but does not own (a user's Secret, through
  :class:`~operator_core.reconciling.References`), and one daemon per object
  that runs :func:`~operator_core.reconciling.run_object_loop` with the
  operator's ``reconcile``.

Inside a reconcile, :func:`apply_report_prune` is the one way to bring an
object's children to the desired set: server-side apply each (quiet when
nothing changed), an Event per child created, updated or deleted, the
``ChildrenApplied`` condition, and exactly one Warning when a failure starts or
changes, not one per retry. What a failure then costs (back-off, or waiting
for a change) is :func:`operator_core.errors.retry_policy`'s to say; a spec
that its model refuses (:class:`~operator_core.errors.InvalidSpec`) is
reported by :func:`report_invalid_spec`: Ready=False, reason InvalidSpec, and
one Warning.

Who calls it: the operators' ``controller`` rooms.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import kopf

from operator_core import errors
from operator_core.children import (
    CHILDREN_APPLIED,
    INVALID_SPEC,
    Manifest,
    Owner,
    StepEventReason,
    stale_children,
)
from operator_core.conditions import READY
from operator_core.crdgen import CustomResource
from operator_core.events import EventRecorder
from operator_core.kube import Kube
from operator_core.manifests import merge_patch
from operator_core.reconciling import (
    ConditionBook,
    References,
    Wakeups,
    connect,
    reconcile_gate,
    run_object_loop,
    wake_on_children,
    wake_on_references,
    write_status,
)
from operator_core.runner import configure_kopf
from operator_core.settings import KubeSettings, from_env

__all__ = [
    "CHILDREN_APPLIED",
    "Context",
    "Operator",
    "StepEventReason",
    "apply_report_prune",
    "report_invalid_spec",
]


@dataclass
class Context:
    """What every reconcile of one operator process shares: its client, its Event recorder, its settings.

    ``extras`` holds what an operator's ``start`` hook makes for its own reconciles (a probe
    client, its own settings), by name.
    """

    kube: Kube
    recorder: EventRecorder
    settings: KubeSettings
    extras: dict[str, Any] = field(default_factory=dict)


Reconcile = Callable[[dict[str, Any], Context], Awaitable[float]]
"""One reconcile of one object: returns the seconds until the next look (``math.inf``: wait for a change)."""
Hook = Callable[[Context], Awaitable[None]]
Named = Callable[[dict[str, Any]], Iterable[tuple[str, str]]]
Kinds = Sequence[tuple[str, str, str]]


class Operator:
    """One operator process: its start-up and clean-up, and a controller per custom resource it reconciles."""

    def __init__(
        self,
        name: str,
        api_group: str,
        *,
        start: Hook | None = None,
        stop: Hook | None = None,
    ) -> None:
        self.name = name
        self.api_group = api_group
        self.controller_name = f"{api_group}/{name}"
        self._start, self._stop = start, stop
        self._logger = logging.getLogger(name)
        kopf.on.startup(id=f"{name}-start")(self._started)
        kopf.on.cleanup(id=f"{name}-stop")(self._stopping)

    async def _started(self, settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
        configure_kopf(settings, self.api_group)
        kube, recorder = connect(self.controller_name)
        memo.context = Context(kube, recorder, from_env(KubeSettings))
        memo.gate = reconcile_gate()
        if self._start is not None:
            await self._start(memo.context)

    async def _stopping(self, memo: kopf.Memo, **_: Any) -> None:
        context: Context | None = getattr(memo, "context", None)
        if context is None:
            return
        try:
            if self._stop is not None:
                await self._stop(context)
        finally:
            await context.kube.close()

    def controller(
        self,
        resource: CustomResource,
        reconcile: Reconcile,
        *,
        managed_by: str,
        child_kinds: Kinds = (),
        named: Named | None = None,
        named_kinds: Kinds = (),
    ) -> None:
        """Reconcile every object of ``resource`` in a loop of its own, woken by what can change it.

        ``child_kinds`` (group, version, plural) are watched for objects labelled
        ``managed-by: <managed_by>``, each waking its owner; ``named`` says which
        objects of ``named_kinds`` an object's spec names (as (plural, name) pairs in its
        namespace), and a change to one of them wakes the objects that name it.
        """
        wakeups = Wakeups()
        references = References(named) if named is not None else None
        plural = resource.plural

        async def object_changed(namespace: str | None, name: str, **_: Any) -> None:
            wakeups.wake((namespace, name))

        kopf.on.event(resource.group, resource.version, plural, id=f"{plural}-changed")(object_changed)
        wake_on_children(wakeups, child_kinds, managed_by)
        if references is not None:
            wake_on_references(wakeups, references, named_kinds)

        async def run_object(
            name: str, namespace: str | None, stopped: kopf.DaemonStopped, memo: kopf.Memo, **_: Any
        ) -> None:
            assert namespace is not None, f"{resource.kind} is namespaced"
            context: Context = memo.context

            async def reconcile_object(obj: dict[str, Any]) -> float:
                try:
                    return await reconcile(obj, context)
                except errors.InvalidSpec as error:
                    await report_invalid_spec(context, resource, obj, error)
                    raise

            await run_object_loop(
                context.kube,
                resource,
                name,
                namespace,
                reconcile_object,
                wakeups,
                stopped,
                logger=self._logger,
                gate=memo.gate,
                references=references,
            )

        kopf.daemon(resource.group, resource.version, plural, id=f"{plural}-loop", cancellation_timeout=10.0)(
            run_object
        )


async def report_invalid_spec(
    context: Context, resource: CustomResource, obj: dict[str, Any], error: errors.InvalidSpec
) -> None:
    """Ready=False with reason InvalidSpec and the model's complaint, and one Warning when it is new.

    The loop then waits for the object to change (:func:`operator_core.errors.retry_policy`).
    """
    book = ConditionBook.of(obj, context.recorder)
    await book.set(READY, "False", INVALID_SPEC, str(error), warn=StepEventReason.INVALID_SPEC)
    current = (obj.get("status") or {}).get("conditions") or []
    wanted = [condition.to_wire() for condition in book.conditions]
    if merge_patch({"c": current}, {"c": wanted}):
        await write_status(context.kube, resource, obj, {"conditions": wanted})


async def apply_report_prune(
    kube: Kube,
    book: ConditionBook,
    owner: Owner[Any],
    desired: Sequence[Manifest],
    prunable: Iterable[tuple[str, str]],
) -> None:
    """Apply ``desired``, report it, and delete the owner's children of ``prunable`` kinds it no longer names.

    Each apply is quiet when the live child already matches. A Normal Event names each
    child created, updated or deleted. A failed apply sets ``ChildrenApplied=False``
    (reason ``ApplyFailed``, the child and the error in the message), posts one Warning
    when that failure starts or changes (not on every retry), and is raised again for the
    loop's error policy. A prunable kind that is not served (its CRD is not installed) has
    nothing to prune.
    """
    for manifest in desired:
        what = f"{manifest['kind']} {manifest['metadata']['name']}"
        try:
            result = await kube.apply(manifest)
        except errors.KubeError as error:
            await book.set(
                CHILDREN_APPLIED,
                "False",
                StepEventReason.APPLY_FAILED,
                f"{what}: {error}",
                warn=StepEventReason.APPLY_FAILED,
                warn_on_new_message=True,
            )
            raise
        if result.written:
            reason = StepEventReason.CREATED if result.created else StepEventReason.UPDATED
            await book.event("Normal", reason, f"{reason.lower()} {what}")
    await book.set(CHILDREN_APPLIED, "True", "Applied", f"{len(desired)} objects applied")
    live: list[Manifest] = []
    kinds = list(prunable)
    for api_version, kind in kinds:
        try:
            found = await kube.list(api_version, kind, owner.namespace, labels=owner.instance_selector())
        except errors.NotFound:
            continue  # the kind is not served (its CRD is not installed): nothing of it to prune
        live.extend({**item, "apiVersion": api_version, "kind": kind} for item in found)
    for stale in stale_children(desired, live, kinds):
        name = stale["metadata"]["name"]
        if await kube.delete(stale["apiVersion"], stale["kind"], name, owner.namespace):
            await book.event("Normal", StepEventReason.DELETED, f"deleted {stale['kind']} {name}")
