"""Giving memory back to the system once a burst of work is over, and keeping the collector's pauses short.

CPython hands the memory of freed objects back to the C allocator, and glibc's
allocator keeps it: it returns pages to the system only from the top of its
heap, so a few live objects high up pin everything freed below them. After a
cold start with 1,000 clusters (every list, watch event and apply answer parsed
into dicts, most of them garbage a moment later), the Typesense operator held
283 MiB at rest, of which the live objects needed about 200 (bench/scale.py).
``malloc_trim(0)`` returns the free pages from anywhere in the heap: called
every half minute in which reconciles ran (never while idle), it costs a few
milliseconds and leaves the process near the size its live objects need.

Where the C library has no ``malloc_trim`` (musl, macOS), :func:`trimmer`
answers None and nothing runs.

Large blocks go straight back to the system (:func:`large_blocks_to_the_system`). Every TLS connection
to the API server holds a 256 KiB read buffer (asyncio's), and a burst of reconciles opens dozens of
them; glibc serves a block that large from its own mapping, but after the first such block is freed
it raises that threshold and serves the next ones from its heap, where a freed buffer stays until a
trim. The connections close 15 s after their last request, usually after the last trim of a burst:
an idle operator with 100 clusters kept about 11 MiB of them (bench/scale.py). With the threshold held
at its default, each buffer is unmapped as its connection closes.

The cyclic garbage collector's full passes look at every container object the process holds: the
modules, classes and functions of pydantic, lightkube, aiohttp and the operator, and what the caches
hold. One such pass took 130 ms in an operator with 40 clusters, in the middle of a new cluster's
writes (bench/scale.py, one at a time: its p95 doubled). :func:`freeze_long_lived`, once the caches
have first listed, leaves everything alive then out of every later pass (``gc.freeze``): the same
pass then took 13 ms. Those objects are still freed when their last reference goes; only a cycle
among them that becomes garbage later is never collected, and what lives at that moment is the code
and the first lists, which live as long as the process.

Who calls them: :class:`operator_core.controller.Operator`, at start.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import gc
import logging
from collections.abc import Callable
from typing import Any

__all__ = [
    "TRIM_INTERVAL_SECONDS",
    "freeze_long_lived",
    "large_blocks_to_the_system",
    "trim_after_work",
    "trimmer",
]

TRIM_INTERVAL_SECONDS = 30.0
"""How often to look whether work was done since the last trim; an idle operator never trims."""

_log = logging.getLogger("operator_core.memory")


_M_MMAP_THRESHOLD = -3
"""mallopt's parameter for the size from which a block gets its own mapping (glibc's malloc.h)."""
MMAP_THRESHOLD_BYTES = 128 * 1024
"""glibc's default; set explicitly, it stays there (glibc no longer raises it as blocks are freed)."""


def _libc_function(name: str) -> Any:
    """A function of the C library, or None where it has none."""
    library = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(library) if library else ctypes.CDLL(None)
        return getattr(libc, name)
    except (OSError, AttributeError):
        return None


def large_blocks_to_the_system() -> bool:
    """Hold glibc's mmap threshold at 128 KiB, so that every block that large is unmapped when freed;
    False where the C library has no ``mallopt`` (then nothing changes)."""
    mallopt = _libc_function("mallopt")
    if mallopt is None:
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES))


def trimmer() -> Callable[[], None] | None:
    """glibc's ``malloc_trim(0)``, or None where the C library has none."""
    trim = _libc_function("malloc_trim")
    if trim is None:
        return None
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int

    def release() -> None:
        trim(0)

    return release


async def trim_after_work(work_done: Callable[[], int], interval: float = TRIM_INTERVAL_SECONDS) -> None:
    """Every ``interval`` seconds, trim once if ``work_done()`` (a counter) moved since the last look.

    Runs until cancelled; a process whose C library cannot trim returns at once.
    """
    release = trimmer()
    if release is None:
        _log.debug("the C library has no malloc_trim: freed memory stays with the allocator")
        return
    seen = work_done()
    while True:
        await asyncio.sleep(interval)
        now = work_done()
        if now != seen:
            seen = now
            release()


def freeze_long_lived() -> None:
    """Collect the garbage there is, then leave every object alive now out of the collector's later
    passes."""
    gc.collect()
    gc.freeze()
