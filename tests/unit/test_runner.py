"""The operator process's loop error handler hides one exit race of kopf's, and nothing else."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any

import aiohttp
import pytest

from operator_core.runner import _report_loop_error

inner_generators: list[Any] = []


@contextlib.asynccontextmanager
async def streaming_block() -> AsyncIterator[None]:
    yield


async def infinite_watch() -> AsyncIterator[int]:
    block = streaming_block()
    inner_generators.append(block.gen)  # type: ignore[attr-defined]
    async with block:
        yield 1


async def close_inner_before_outer() -> tuple[BaseException, Any]:
    """What loop.shutdown_asyncgens can do to a watch left suspended between two events."""
    outer = infinite_watch()
    await outer.__anext__()
    await inner_generators[-1].aclose()
    with pytest.raises(RuntimeError) as raised:
        await outer.aclose()
    return raised.value, outer


class RecordingLoop:
    def __init__(self) -> None:
        self.reported: list[dict[str, Any]] = []

    def default_exception_handler(self, context: dict[str, Any]) -> None:
        self.reported.append(context)


def test_out_of_order_close_of_kopf_watch_at_exit_is_not_reported() -> None:
    error, outer = asyncio.run(close_inner_before_outer())
    assert "didn't stop after athrow()" in str(error)
    loop = RecordingLoop()
    context = {
        "message": "an error occurred during closing of asynchronous generator",
        "exception": error,
        "asyncgen": outer,
    }
    _report_loop_error(loop, context)  # type: ignore[arg-type]
    assert loop.reported == []


def test_every_other_loop_error_is_reported() -> None:
    loop = RecordingLoop()
    for context in (
        {"message": "Task exception was never retrieved", "exception": RuntimeError("boom")},
        {
            "message": "closing",
            "exception": RuntimeError("generator didn't stop after athrow()"),
            "asyncgen": None,
        },
        {"message": "no exception at all"},
    ):
        _report_loop_error(loop, context)  # type: ignore[arg-type]
    assert len(loop.reported) == 3


async def _read_new_apis() -> None:
    raise aiohttp.ClientConnectionError("Connection closed")


async def _read_old_api() -> None:
    raise aiohttp.ClientConnectionError("Connection closed")


@pytest.mark.parametrize("scan", [_read_new_apis, _read_old_api])
async def test_a_lost_connection_in_kopfs_api_scan_is_one_line_not_a_traceback(
    caplog: pytest.LogCaptureFixture, scan: Callable[[], Coroutine[Any, Any, None]]
) -> None:
    task = asyncio.ensure_future(scan())
    with pytest.raises(aiohttp.ClientConnectionError) as raised:
        await task
    loop = RecordingLoop()
    context = {"message": "Task exception was never retrieved", "exception": raised.value, "future": task}
    with caplog.at_level(logging.WARNING):
        _report_loop_error(loop, context)  # type: ignore[arg-type]
    assert loop.reported == []
    assert "lost its connection: Connection closed" in caplog.text


async def test_a_lost_connection_in_any_other_task_is_reported() -> None:
    async def mine() -> None:
        raise aiohttp.ClientConnectionError("Connection closed")

    task = asyncio.ensure_future(mine())
    with pytest.raises(aiohttp.ClientConnectionError) as raised:
        await task
    loop = RecordingLoop()
    _report_loop_error(
        loop, {"message": "Task exception was never retrieved", "exception": raised.value, "future": task}
    )  # type: ignore[arg-type]
    assert len(loop.reported) == 1
