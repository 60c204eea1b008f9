"""A copy of the containers' logs that outlives their pods, for reading a long run afterwards.

A kubelet removes a pod's log directory soon after the pod is deleted, and a soak deletes pods all the
time: copied only when the run ends, the logs of every node that a step replaced are gone, and with
them the reason a step took long. :class:`PodLogMirror` appends what each ``*.log`` under the nodes'
pod-log directories gained since its last look, every ``interval`` seconds, to a file at the same path
relative to ``root`` under ``destination``. A file that shrank was rotated by the kubelet: its new bytes
follow the old ones in the copy. Only the pod-log directories are walked: the rest of a node's
directory (containerd's and the kubelet's state) is large, and walking it every 2 s would load the
machine a soak measures.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

from operator_core.reconciling import first_of


class PodLogMirror:
    """Appends each log's new bytes under ``pod_log_directories`` to its copy under ``destination``."""

    def __init__(self, root: Path, pod_log_directories: Sequence[Path], destination: Path) -> None:
        self._root = root
        self._directories = tuple(pod_log_directories)
        self._destination = destination
        self._copied: dict[Path, int] = {}

    def copy_new_bytes(self) -> None:
        """One look: every log's bytes that were not copied yet (a log removed meanwhile is skipped)."""
        logs = [log for directory in self._directories for log in directory.rglob("*.log")]
        for log in logs:
            copied = self._copied.get(log, 0)
            try:
                with log.open("rb") as source:
                    size = source.seek(0, 2)
                    if size < copied:  # rotated: the file started again
                        copied = 0
                    if size == copied:
                        continue
                    source.seek(copied)
                    grown = source.read(size - copied)
            except FileNotFoundError:
                continue
            target = self._destination / log.relative_to(self._root)
            target.parent.mkdir(parents=True, exist_ok=True)
            with target.open("ab") as copy:
                copy.write(grown)
            self._copied[log] = copied + len(grown)

    @contextlib.asynccontextmanager
    async def running(self, interval: float = 2.0) -> AsyncIterator[None]:
        """Look every ``interval`` seconds for as long as the block lasts, and once more at its end."""

        stopping = asyncio.Event()

        async def keep_copying() -> None:
            # Stopped between looks, never during one: a look in a thread cannot be cancelled, and two
            # at once would copy the same bytes twice.
            while not stopping.is_set():
                await asyncio.to_thread(self.copy_new_bytes)
                await first_of(stopping, timeout=interval)
            await asyncio.to_thread(self.copy_new_bytes)

        task = asyncio.create_task(keep_copying())
        try:
            yield
        finally:
            stopping.set()
            await task
