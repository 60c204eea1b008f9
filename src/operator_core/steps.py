"""One reconcile of one object, as an ordered list of steps over a scope, then status once: the one
shape of every controller of the suite.

- :class:`Steps`: a controller's reconcile, described once: how its :class:`Scope` is made from the
  object and the context, its ordered steps, and its ``report`` (Ready and the status fields it owns,
  from what the steps left). Its :meth:`Steps.reconcile` runs the steps until one says STOP, then
  writes the status once (:func:`operator_core.manifests.owned_status_patch` of the fields the
  controller owns and the conditions), ``observedGeneration`` only when every step ran.
- :class:`Scope`: what every reconcile's scope holds; each controller's adds its own findings.
- :class:`Outcome` and :func:`run_steps`: run the steps until one says STOP.
- :class:`ConditionBook`: the conditions of one reconcile, set with pure
  :func:`operator_core.conditions.set_condition`, posting a Warning Event only
  when a condition newly turns bad (never on every reconcile), and an Event
  when Ready flips.
- :func:`write_status`: the status patch, only when there is one.

Who calls it: every controller of the operators (each describes its reconcile as a :class:`Steps`), and
:mod:`operator_core.applying`.
"""

from __future__ import annotations

import copy
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from enum import Enum, StrEnum
from typing import Any, Generic, TypeVar

from operator_core.conditions import METAV1, Condition, ConditionShape, ConditionStatus, find, set_condition
from operator_core.crdgen import CustomResource
from operator_core.events import EventRecorder, EventType
from operator_core.kube import Kube
from operator_core.manifests import Manifest, owned_status_patch
from operator_core.reconciling import Context

__all__ = [
    "FINALIZED",
    "ConditionBook",
    "Finalizing",
    "Outcome",
    "Scope",
    "Steps",
    "final_status_patch",
    "run_steps",
    "write_status",
]


class Outcome(Enum):
    """What a reconcile step says: go on to the next step, or stop here (status is still written)."""

    CONTINUE = "continue"
    STOP = "stop"
    APPLY_AND_STOP = "apply-and-stop"
    """Stop here, once the controller's apply step (:attr:`Steps.apply`) has applied what the steps so far
    decided: a new TypesenseCluster's Certificate is made while the cluster waits for it to be issued."""


FINALIZED = -1.0
"""What a finalizer returns once its clean-up is done: the finalizer may go."""

ScopeT = TypeVar("ScopeT")


async def run_steps(
    steps: Iterable[Callable[[ScopeT], Awaitable[Outcome]]],
    scope: ScopeT,
    *,
    finish: Callable[[ScopeT, bool], Awaitable[None]],
    apply: Callable[[ScopeT], Awaitable[Outcome]] | None = None,
) -> None:
    """Run ``steps`` in order over ``scope`` until one returns STOP, then ``finish(scope, completed)``.

    A step that returns APPLY_AND_STOP stops them too, after ``apply`` (the apply step among ``steps``)
    ran. ``finish`` (which writes status) runs even when a step raises; ``completed`` says
    whether every step ran, so that observedGeneration moves only on success.
    """
    completed = False
    try:
        for step in steps:
            outcome = await step(scope)
            if outcome is Outcome.APPLY_AND_STOP:
                if apply is None:
                    named = getattr(step, "__name__", step)
                    raise RuntimeError(f"{named} asked for an apply, and the steps have none")
                await apply(scope)
            if outcome is not Outcome.CONTINUE:
                break
        else:
            completed = True
    finally:
        await finish(scope, completed)


@dataclass
class ConditionBook:
    """The conditions of one object during one reconcile, and the Events they are worth."""

    regarding: Mapping[str, Any]
    recorder: EventRecorder
    conditions: list[Condition] = field(default_factory=list)
    shape: ConditionShape = METAV1
    """How the object's kind writes its conditions."""
    stored: Mapping[str, Condition] = field(default_factory=dict)
    """The conditions as the object's status held them when the book was opened: what its users saw,
    and what a Warning is news against."""
    _warned: set[tuple[str, str, str, str]] = field(default_factory=set)

    @classmethod
    def of(
        cls, obj: Mapping[str, Any], recorder: EventRecorder, shape: ConditionShape = METAV1
    ) -> ConditionBook:
        """A book that starts from the conditions in ``obj``'s status, written in ``shape``."""
        conditions = shape.read(obj)
        return cls(obj, recorder, conditions, shape, {c.type: c for c in conditions})

    def wire(self) -> list[dict[str, Any]]:
        """The conditions as the object's status holds them."""
        return self.shape.write(self.conditions)

    async def set(
        self,
        condition_type: str,
        status: ConditionStatus,
        reason: str,
        message: str = "",
        *,
        warn: StrEnum | None = None,
        warn_on_new_message: bool = False,
    ) -> bool:
        """Set a condition; returns whether its status or reason changed.

        With ``warn``, a Warning Event is posted when the condition turns to a new bad state,
        and, with ``warn_on_new_message``, also when a bad state's message changes (another
        child failing, or the same one for another reason), never for the same one again. New
        against what the object's status said (:attr:`stored`), not against a passing state set
        earlier in the same reconcile ("downloading", before the same broken download again).
        """
        previous = find(self.conditions, condition_type)
        changed = previous is None or (previous.status, previous.reason) != (status, reason)
        seen = self.stored.get(condition_type)
        news = seen is None or (seen.status, seen.reason) != (status, reason)
        new_message = seen is None or seen.message != message
        self.conditions = set_condition(
            self.conditions,
            condition_type,
            status,
            reason,
            message,
            observed_generation=self.regarding["metadata"].get("generation"),
        )
        said = (condition_type, status, reason, message)
        worth_saying = (
            warn is not None and status != "True" and (news or (warn_on_new_message and new_message))
        )
        if worth_saying and warn is not None and said not in self._warned:
            self._warned.add(said)
            await self.event("Warning", warn, message)
        return changed

    async def set_ready(
        self,
        status: ConditionStatus,
        reason: str,
        message: str,
        *,
        became_ready: StrEnum,
        became_not_ready: StrEnum,
        condition_type: str = "Ready",
    ) -> None:
        """Set Ready; a Normal ``became_ready`` Event when it turns True, a Warning ``became_not_ready``
        when it leaves True.

        Unknown and False before the first True (a new object coming up) are worth no Event.
        """
        previous = self.get(condition_type)
        await self.set(condition_type, status, reason, message)
        ready = self.get(condition_type)
        assert ready is not None
        was_ready = previous is not None and previous.status == "True"
        note = ready.message or ready.reason
        if ready.status == "True" and not was_ready:
            await self.event("Normal", became_ready, note)
        elif ready.status != "True" and was_ready:
            await self.event("Warning", became_not_ready, note)

    def get(self, condition_type: str) -> Condition | None:
        return find(self.conditions, condition_type)

    async def event(self, event_type: EventType, reason: StrEnum, note: str) -> None:
        # In the background: the reconcile's next write does not wait for a note.
        self.recorder.emit_soon(self.regarding, event_type, reason, note)


async def write_status(
    kube: Kube, resource: CustomResource, obj: Mapping[str, Any], patch: Mapping[str, Any]
) -> None:
    """Patch ``obj``'s status subresource with ``patch``; nothing at all when it is empty."""
    if patch:
        metadata = obj["metadata"]
        await kube.patch_status(
            resource.api_version, resource.kind, metadata["name"], metadata["namespace"], patch
        )


@dataclass(kw_only=True)
class Scope:
    """One reconcile of one object: its context, put together once, and what its steps have found and
    decided so far. Each controller's scope adds its own findings."""

    obj: dict[str, Any]
    kube: Kube
    book: ConditionBook
    next_look: float
    """Seconds until the next look, lowered (or set to WAIT_FOR_CHANGE) by the steps."""
    status: dict[str, Any] = field(default_factory=dict)
    """The status fields this reconcile owns and sets (None: removed); the finish writes them with the
    conditions, and leaves every other field as it is."""
    baseline: dict[str, Any] | None = None
    """The object with the status on the server, when a step wrote some already (progress that must
    not wait for the end); None: the object as read."""
    held: AsyncExitStack = field(default_factory=AsyncExitStack)
    """What a step holds until the status is written (a lock), let go after it."""
    after_status: list[Callable[[], Awaitable[None]]] = field(default_factory=list)
    """What is done once the status is written (a Job let go once its result is kept), in order;
    nothing when a step raised."""

    @staticmethod
    def parts(obj: dict[str, Any], context: Context, shape: ConditionShape = METAV1) -> dict[str, Any]:
        """The fields every scope starts with, from the object and the controller's context; ``shape``:
        how the object's kind writes its conditions."""
        return {
            "obj": obj,
            "kube": context.kube,
            "book": ConditionBook.of(obj, context.recorder, shape),
            "next_look": context.settings.resync_seconds,
        }

    @property
    def current(self) -> Mapping[str, Any]:
        """The status on the server, as the last write left it."""
        return (self.baseline if self.baseline is not None else self.obj).get("status") or {}

    @property
    def requeue_after(self) -> float:
        """Seconds until the next look: :attr:`next_look`, unless a controller's scope knows better."""
        return self.next_look

    async def write_progress(self, resource: CustomResource, fields: Mapping[str, Any] | None = None) -> None:
        """The owned status fields as the steps have left them so far (or ``fields``: a finalizer's, which
        owns no others) and the conditions, written at once (only what changed): progress a user must
        see, or that must not be lost, before the reconcile ends (a migration under way, a stage done, a
        hook run while an addon is uninstalled). The end's write starts from it; ``observedGeneration``
        waits for the end."""
        # A copy: the steps go on changing the status in place after it is written.
        written = copy.deepcopy(
            {**(self.status if fields is None else fields), "conditions": self.book.wire()}
        )
        await write_status(self.kube, resource, self.obj, owned_status_patch(self.current, written))
        base = self.baseline if self.baseline is not None else self.obj
        status = {**(base.get("status") or {}), **written}
        self.baseline = {**base, "status": {key: value for key, value in status.items() if value is not None}}

    def let_go(self) -> Outcome:
        """A finalizing step's last word: the clean-up is over (done, or nothing to do, or given up
        on, said): the finalizer may go, and no later step runs."""
        self.next_look = FINALIZED
        return Outcome.STOP

    def retry_in(self, seconds: float) -> Outcome:
        """A finalizing step's: its part is not done yet; the finalizer looks again in ``seconds``
        (WAIT_FOR_CHANGE: when the object or what wakes it changes)."""
        self.next_look = seconds
        return Outcome.STOP

    async def record_now(self, resource: CustomResource, **fields: Any) -> None:
        """Status ``fields`` written at once as they are (a merge patch: nested fields not named are
        kept), before an action they record (a pod deleted, a claim grown): an operator that stops right
        after the action finds it recorded, and does not do it twice. The steps read them back from
        :attr:`obj`, and the end's write starts from them."""
        await write_status(self.kube, resource, self.obj, fields)
        self.obj = {**self.obj, "status": {**(self.obj.get("status") or {}), **fields}}
        if self.baseline is not None:
            self.baseline = {**self.baseline, "status": {**(self.baseline.get("status") or {}), **fields}}


StepScope = TypeVar("StepScope", bound=Scope)


@dataclass(frozen=True)
class Steps(Generic[StepScope]):
    """One controller's reconcile: its scope, made once from the object and the context, its ordered
    steps, and its report; the single status write at the end is this class's."""

    resource: CustomResource
    scope: Callable[[dict[str, Any], Context], StepScope]
    steps: Sequence[Callable[[StepScope], Awaitable[Outcome]]]
    report: Callable[[StepScope, bool], Awaitable[None]] | None = None
    """Sets Ready and the status fields the controller owns (:attr:`Scope.status`) from what the steps
    left, told whether every step ran; it runs even when a step raised."""
    apply: Callable[[StepScope], Awaitable[Outcome]] | None = None
    """The step among :attr:`steps` that applies the desired state, which a step that stops with
    APPLY_AND_STOP has run first."""

    async def reconcile(self, obj: dict[str, Any], context: Context) -> float:
        """One reconcile: the steps until one stops, the status once; the seconds until the next look."""
        return await self.run(self.scope(obj, context))

    async def run(self, scope: StepScope) -> float:
        """:meth:`reconcile` of a scope made already (a test's, with its own clock)."""
        async with scope.held:
            await run_steps(self.steps, scope, finish=self._finish, apply=self.apply)
            for then in scope.after_status:
                await then()
        return scope.requeue_after

    async def _finish(self, scope: StepScope, completed: bool) -> None:
        if self.report is not None:
            await self.report(scope, completed)
        # A spec the controller could not act on in full is not "observed".
        generation = scope.obj["metadata"].get("generation") if completed else None
        patch = final_status_patch(scope.current, scope.status, scope.book.wire(), generation)
        written = scope.baseline if scope.baseline is not None else scope.obj
        await write_status(scope.kube, self.resource, written, patch)


@dataclass(frozen=True)
class Finalizing(Generic[StepScope]):
    """One controller's finalizer in the shape of its reconcile: a scope made once from the deleted
    object, and ordered clean-up steps. A step returns CONTINUE when its part is done, or STOP, having
    said when to look again (:meth:`Scope.retry_in`) or that the object may go (:meth:`Scope.let_go`).
    The finalizer may go once every step is done. Nothing is written at the end: a finalizer's status
    is progress (:meth:`Scope.write_progress`), written by the step that makes it."""

    scope: Callable[[dict[str, Any], Context], StepScope]
    steps: Sequence[Callable[[StepScope], Awaitable[Outcome]]]
    needed: Callable[[dict[str, Any]], bool] | None = None
    """Whether the object has anything to clean up; when not, it goes at once, without a scope (whose
    making reads its spec, which need not be valid for it to go)."""

    async def finalize(self, obj: dict[str, Any], context: Context) -> float:
        """:data:`FINALIZED`, or the seconds until the finalizer looks again."""
        if self.needed is not None and not self.needed(obj):
            return FINALIZED
        scope = self.scope(obj, context)
        for step in self.steps:
            if await step(scope) is Outcome.STOP:
                return scope.next_look
        return FINALIZED


def final_status_patch(
    current: Mapping[str, Any],
    owned: Mapping[str, Any],
    conditions: list[dict[str, Any]],
    generation: int | None,
) -> Manifest:
    """The patch a reconcile's end writes: the ``owned`` fields and the ``conditions``, and ``generation``
    as ``observedGeneration`` when given (None: it stays as it is); empty when nothing changed."""
    fields = {**owned, "conditions": conditions}
    if generation is not None:
        fields["observedGeneration"] = generation
    return owned_status_patch(current, fields)
