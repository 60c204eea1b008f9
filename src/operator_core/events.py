"""Kubernetes Events, posted with a fixed vocabulary of reasons.

Each operator declares its reasons as a ``StrEnum`` in its ``api`` room and
passes members of it here, so that the set of reasons a user may see is
written down in one place. Notes are scrubbed of secret values. Callers post an
Event only for a real change (a transition, a step taken), never on every
reconcile.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Mapping
from enum import StrEnum
from typing import Any, Literal

from operator_core.clock import micro_time
from operator_core.errors import OperatorError, retry_log_level
from operator_core.identity import pod_name
from operator_core.kube import Kube
from operator_core.secrets import scrub

_log = logging.getLogger(__name__)

__all__ = ["EventRecorder", "EventType"]

EventType = Literal["Normal", "Warning"]
# The API server refuses longer notes.
_MAX_NOTE = 1024


class EventRecorder:
    """Posts events.k8s.io/v1 Events about objects, as one reporting controller."""

    def __init__(self, kube: Kube, controller: str, instance: str | None = None) -> None:
        self._kube = kube
        self.controller = controller
        self.instance = instance or pod_name()
        self._pending: set[asyncio.Task[dict[str, Any]]] = set()

    async def emit(
        self,
        regarding: Mapping[str, Any],
        event_type: EventType,
        reason: StrEnum,
        note: str,
        *,
        action: str | None = None,
    ) -> dict[str, Any]:
        """Post one Event about ``regarding`` (any object dict with apiVersion, kind and metadata)."""
        return await self._post(self._event(regarding, event_type, reason, note, action))

    def emit_soon(
        self, regarding: Mapping[str, Any], event_type: EventType, reason: StrEnum, note: str
    ) -> None:
        """Post one Event in the background, as client-go's recorder does: a reconcile does not wait for
        a note before its next write (a new cluster's children). The Event is made now (its time, its
        note); :meth:`flush` waits for what is still on its way."""
        event = self._event(regarding, event_type, reason, note, None)
        task = asyncio.get_running_loop().create_task(self._post(event), name=f"Event {reason}")
        self._pending.add(task)
        task.add_done_callback(self._posted)

    def _posted(self, task: asyncio.Task[dict[str, Any]]) -> None:
        self._pending.discard(task)
        if not task.cancelled() and (error := task.exception()) is not None:
            _log.warning("Event not posted: %s", scrub(str(error)))

    async def flush(self, timeout: float = 5.0) -> None:
        """Wait up to ``timeout`` seconds for the Events still being posted; cancel the rest."""
        pending = list(self._pending)
        if not pending:
            return
        _finished, unfinished = await asyncio.wait(pending, timeout=timeout)
        for task in unfinished:
            task.cancel()
        await asyncio.gather(*unfinished, return_exceptions=True)

    def _event(
        self,
        regarding: Mapping[str, Any],
        event_type: EventType,
        reason: StrEnum,
        note: str,
        action: str | None,
    ) -> dict[str, Any]:
        metadata = regarding["metadata"]
        namespace = metadata.get("namespace") or "default"
        return {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {"name": f"{metadata['name']}.{uuid.uuid4().hex[:16]}", "namespace": namespace},
            "eventTime": micro_time(),
            "reportingController": self.controller,
            "reportingInstance": self.instance,
            "action": action or str(reason),
            "reason": str(reason),
            "type": event_type,
            "note": scrub(note)[:_MAX_NOTE],
            "regarding": {
                "apiVersion": regarding["apiVersion"],
                "kind": regarding["kind"],
                "name": metadata["name"],
                "namespace": metadata.get("namespace"),
                "uid": metadata.get("uid"),
                "resourceVersion": metadata.get("resourceVersion"),
            },
        }

    async def _post(self, event: dict[str, Any]) -> dict[str, Any]:
        try:
            return await self._kube.create(event)
        except OperatorError as error:
            # An Event is a note, not the work: one the API server refuses (a namespace being deleted,
            # a rate limit) is logged and the reconcile goes on, as client-go's recorder does.
            regarding = event["regarding"]
            _log.log(
                retry_log_level(error),
                "Event %s about %s %s not posted: %s",
                event["reason"],
                regarding["kind"],
                regarding["name"],
                error,
            )
            return {}
