"""One reconcile of one object, as an ordered list of steps over a scope, then status once.

- :class:`Outcome` and :func:`run_steps`: run the steps until one says STOP.
- :class:`ConditionBook`: the conditions of one reconcile, set with pure
  :func:`operator_core.conditions.set_condition`, posting a Warning Event only
  when a condition newly turns bad (never on every reconcile), and an Event
  when Ready flips.
- :func:`write_status`: the status patch, only when there is one.

Who calls it: the operators' ``controller.reconcile`` (steps, conditions, status), and
:mod:`operator_core.applying`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum, StrEnum
from typing import Any, TypeVar

from operator_core.conditions import METAV1, Condition, ConditionShape, ConditionStatus, find, set_condition
from operator_core.crdgen import CustomResource
from operator_core.events import EventRecorder, EventType
from operator_core.kube import Kube

__all__ = ["ConditionBook", "Outcome", "run_steps", "write_status"]


class Outcome(Enum):
    """What a reconcile step says: go on to the next step, or stop here (status is still written)."""

    CONTINUE = "continue"
    STOP = "stop"


ScopeT = TypeVar("ScopeT")


async def run_steps(
    steps: Iterable[Callable[[ScopeT], Awaitable[Outcome]]],
    scope: ScopeT,
    *,
    finish: Callable[[ScopeT, bool], Awaitable[None]],
) -> None:
    """Run ``steps`` in order over ``scope`` until one returns STOP, then ``finish(scope, completed)``.

    ``finish`` (which writes status) runs even when a step raises; ``completed`` says
    whether every step ran, so that observedGeneration moves only on success.
    """
    completed = False
    try:
        for step in steps:
            if await step(scope) is Outcome.STOP:
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
