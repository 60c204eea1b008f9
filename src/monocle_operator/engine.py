"""Monocle's search engine as the operator reads it: its cluster health, asked of the engine's pod
straight at its address (a thin adapter; what the answer means is
:func:`monocle_operator.controller.monocle.status.engine_health_condition`'s to say).

One aiohttp session per operator process, made in the running loop at the first question and closed
when the operator stops: the :class:`MonocleRuntime` the operator's start hook makes."""

from __future__ import annotations

import json
from typing import Any

import aiohttp

__all__ = ["ENGINE_HEALTH_PATH", "EngineUnreachable", "MonocleRuntime"]

ENGINE_HEALTH_PATH = "/_cluster/health?level=indices&timeout=2s"
"""Each index's health too, so that a red engine names its red indices."""
ANSWER_SECONDS = 4.0
"""Long enough for a loaded single node; short enough that a dead one holds up no reconcile."""


class EngineUnreachable(Exception):
    """The engine did not answer its health, or not with JSON: why, in a line."""


class MonocleRuntime:
    """What the Monocle operator holds while it runs: the HTTP session to the instances' engines."""

    def __init__(self) -> None:
        self._session: aiohttp.ClientSession | None = None

    async def engine_health(self, address: str) -> dict[str, Any]:
        """``GET /_cluster/health`` of the engine at ``address`` (``http://<pod IP>:9200``)."""
        if self._session is None:
            # No proxy from the environment (trust_env stays off): the engine is on the pod network.
            self._session = aiohttp.ClientSession()
        try:
            async with self._session.get(
                address + ENGINE_HEALTH_PATH, timeout=aiohttp.ClientTimeout(total=ANSWER_SECONDS)
            ) as answer:
                body = await answer.read()
                # 408: a wait that timed out answers with the health it has.
                if answer.status not in (200, 408):
                    raise EngineUnreachable(f"HTTP {answer.status} from {address}")
        except aiohttp.ClientError as error:
            raise EngineUnreachable(f"{address}: {error or type(error).__name__}") from error
        except TimeoutError as error:
            raise EngineUnreachable(f"{address}: no answer within {ANSWER_SECONDS:g} s") from error
        try:
            health = json.loads(body)
        except ValueError as error:
            raise EngineUnreachable(f"{address} answered something other than JSON") from error
        if not isinstance(health, dict):
            raise EngineUnreachable(f"{address} answered something other than a JSON object")
        return health

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
