"""A stand-in for the operators' EventRecorder in unit tests: it keeps each Event as (type, reason, note)."""

from __future__ import annotations

from typing import Any


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, str]] = []

    async def emit(self, regarding: Any, event_type: str, reason: str, note: str) -> None:
        self.emit_soon(regarding, event_type, reason, note)

    def emit_soon(self, regarding: Any, event_type: str, reason: str, note: str) -> None:
        self.events.append((event_type, str(reason), note))
