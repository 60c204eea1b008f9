"""What an operator process does beside its reconciles: timing its first pass, giving memory back."""

from __future__ import annotations

import asyncio
import gc
from typing import Any

import pytest

from operator_core import memory
from operator_core.cache import Informer, WatchedKind
from operator_core.controller import _FirstPass


def cluster(name: str, version: str = "1") -> dict[str, Any]:
    return {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": name, "namespace": "ns", "resourceVersion": version},
    }


def informer_holding(*names: str) -> Informer:
    informer = Informer(source=None, kind=WatchedKind("example.com/v1", "Widget"))  # type: ignore[arg-type]
    for name in names:
        informer.offer(cluster(name))
    return informer


def test_the_first_pass_is_done_once_every_object_there_at_the_start_was_reconciled() -> None:
    informer = informer_holding("a", "b", "c")
    first = _FirstPass()
    assert not first.finished(informer, ("ns", "a"))
    assert not first.finished(informer, ("ns", "a"))  # again: still b and c
    informer.offer(cluster("d"))  # created after the start: not waited for
    assert not first.finished(informer, ("ns", "b"))
    assert first.done_at is None
    assert first.finished(informer, ("ns", "c"))
    assert first.done_at is not None
    assert not first.finished(informer, ("ns", "d"))  # reported once


def test_an_object_deleted_before_its_turn_does_not_hold_the_first_pass_forever() -> None:
    informer = informer_holding("a", "b")
    first = _FirstPass()
    informer._objects.pop(("ns", "b"))  # deleted: the watch dropped it
    assert first.finished(informer, ("ns", "a"))


async def test_memory_is_trimmed_only_after_work(monkeypatch: pytest.MonkeyPatch) -> None:
    trims: list[int] = []
    work = [0]
    monkeypatch.setattr(memory, "trimmer", lambda: lambda: trims.append(work[0]))
    task = asyncio.create_task(memory.trim_after_work(lambda: work[0], interval=0.01))
    await asyncio.sleep(0.05)
    assert trims == []  # idle: nothing to give back
    work[0] = 3
    await asyncio.sleep(0.05)
    assert trims == [3]  # once per burst, not on every look
    task.cancel()


def test_glibc_trims_for_real() -> None:
    release = memory.trimmer()
    assert release is not None, "this suite runs on glibc"
    release()


def test_a_large_block_goes_back_to_the_system_when_it_is_freed() -> None:
    """The 256 KiB read buffer of a TLS connection, freed once the connection closes: with the mmap
    threshold held, the process's resident memory falls by it at once, however many came before."""
    assert memory.large_blocks_to_the_system(), "glibc's mallopt answered"

    def resident_kib() -> int:
        with open("/proc/self/status") as status:
            return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))

    pins = []  # what lives on after each buffer (a connection's other objects): holes, not a heap top
    for _ in range(3):  # without the setting, glibc raises its threshold after the first round: 0 back
        buffers = []
        for _ in range(40):
            buffers.append(bytearray(256 * 1024))
            pins.append(bytearray(1024))
        held = resident_kib()
        del buffers
        assert held - resident_kib() > 30 * 256, "most of the 40 buffers' 10 MiB went back at once"


def test_what_lives_at_the_end_of_the_start_is_left_out_of_later_collections() -> None:
    long_lived = {"cached": [{"object": n} for n in range(100)]}
    garbage: list[Any] = []
    garbage.append(garbage)  # a cycle: only the collector frees it
    del garbage
    try:
        memory.freeze_long_lived()
        assert gc.get_freeze_count() > 0
        # Left out of every generation, so no pass looks at it; the cycle was collected first.
        assert not any(gc.is_tracked(o) and o is long_lived for o in gc.get_objects())
        assert not [o for o in gc.get_objects() if isinstance(o, list) and len(o) == 1 and o[0] is o]
    finally:
        gc.unfreeze()  # the test process goes on collecting as before
