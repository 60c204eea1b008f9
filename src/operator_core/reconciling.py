"""Building blocks of a level-triggered controller, shared by the operators' ``controller`` rooms.

- :class:`Wakeups`: one event per object; a watch handler of the object or of
  any of its children sets it, and the object's loop wakes at once.
- :func:`run_loop`: reconcile, then sleep until woken, stopped, or the delay the
  reconcile asked for passes; failures back off and never end the loop.
- :class:`ConditionBook`: the conditions of one reconcile, set with pure
  :func:`operator_core.conditions.set_condition`, posting a Warning Event only
  when a condition newly turns bad (never on every reconcile).

Added for the Monocle operator; the Typesense operator's handlers hold an
earlier copy of the same loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Hashable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

from operator_core import errors
from operator_core.conditions import Condition, ConditionStatus, find, set_condition
from operator_core.events import EventRecorder, EventType

__all__ = ["DEFAULT_RETRY_SECONDS", "ConditionBook", "Stopped", "Wakeups", "run_loop"]

DEFAULT_RETRY_SECONDS = (2.0, 5.0, 10.0, 30.0)


class Stopped(Protocol):
    """What kopf's ``DaemonStopped`` offers: truthy once stopping, and awaitable until then."""

    def __bool__(self) -> bool: ...

    def wait(self) -> Awaitable[Any]: ...


class Wakeups:
    """Per-object wake-up events, keyed by whatever names an object (e.g. namespace and name)."""

    def __init__(self) -> None:
        self._events: dict[Hashable, asyncio.Event] = {}

    def register(self, key: Hashable) -> asyncio.Event:
        return self._events.setdefault(key, asyncio.Event())

    def forget(self, key: Hashable) -> None:
        self._events.pop(key, None)

    def wake(self, key: Hashable) -> None:
        if event := self._events.get(key):
            event.set()

    def keys(self) -> list[Hashable]:
        return list(self._events)


async def run_loop(
    once: Callable[[], Awaitable[float | None]],
    wakeup: asyncio.Event,
    stopped: Stopped,
    *,
    what: str,
    logger: logging.Logger,
    retry_seconds: tuple[float, ...] = DEFAULT_RETRY_SECONDS,
) -> None:
    """Call ``once`` until it returns None (the object is gone) or ``stopped``.

    ``once`` returns the seconds until the next look. A failure is logged and retried
    with back-off: a bug must not stop the object's loop (kopf would wait a minute).
    """
    failures = 0
    while not stopped:
        wakeup.clear()
        try:
            delay = await once()
            if delay is None:
                return
            failures = 0
        except errors.KubeError as error:
            delay = retry_seconds[min(failures, len(retry_seconds) - 1)]
            failures += 1
            logger.warning("reconcile of %s failed, retrying in %.0f s: %s", what, delay, error)
        except Exception:
            delay = retry_seconds[min(failures, len(retry_seconds) - 1)]
            failures += 1
            logger.exception("reconcile of %s crashed, retrying in %.0f s", what, delay)
        await _sleep(wakeup, stopped, delay)


async def _sleep(wakeup: asyncio.Event, stopped: Stopped, seconds: float) -> None:
    """Until woken, stopped, or ``seconds`` pass."""
    waiters = {asyncio.ensure_future(wakeup.wait()), asyncio.ensure_future(stopped.wait())}
    try:
        await asyncio.wait(waiters, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()


@dataclass
class ConditionBook:
    """The conditions of one object during one reconcile, and the Events they are worth."""

    regarding: Mapping[str, Any]
    recorder: EventRecorder
    conditions: list[Condition] = field(default_factory=list)

    @classmethod
    def of(cls, obj: Mapping[str, Any], recorder: EventRecorder) -> ConditionBook:
        """A book that starts from the conditions in ``obj``'s status."""
        current = (obj.get("status") or {}).get("conditions") or []
        return cls(obj, recorder, [Condition.model_validate(c) for c in current])

    async def set(
        self,
        condition_type: str,
        status: ConditionStatus,
        reason: str,
        message: str = "",
        *,
        warn: StrEnum | None = None,
    ) -> bool:
        """Set a condition; returns whether its status or reason changed.

        With ``warn``, a Warning Event is posted when the condition turns to a new bad state.
        """
        previous = find(self.conditions, condition_type)
        changed = previous is None or (previous.status, previous.reason) != (status, reason)
        self.conditions = set_condition(
            self.conditions,
            condition_type,
            status,
            reason,
            message,
            observed_generation=self.regarding["metadata"].get("generation"),
        )
        if warn is not None and status != "True" and changed:
            await self.event("Warning", warn, message)
        return changed

    def get(self, condition_type: str) -> Condition | None:
        return find(self.conditions, condition_type)

    async def event(self, event_type: EventType, reason: StrEnum, note: str) -> None:
        await self.recorder.emit(self.regarding, event_type, reason, note)
