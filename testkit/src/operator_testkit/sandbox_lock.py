"""One sandbox per machine: its lock file, and the processes of a sandbox, found by their environment.

It imports next to nothing (the standard library and the test kit's errors), so that
``operator-suite-dev sandbox up`` refuses a second sandbox before it imports the rest of the test
kit: the refusal is said in a fraction of a second, even on a busy machine.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from operator_testkit.errors import ControlPlaneError

__all__ = [
    "DEFAULT_LOCK",
    "MARKER",
    "alive",
    "another_sandbox",
    "complain",
    "refuse_another",
    "release_lock",
    "sandbox_processes",
    "say",
    "take_lock",
]

MARKER = "OPERATOR_SUITE_SANDBOX_DIR"
"""Set to the sandbox's directory in the environment of every process ``up`` starts."""
DEFAULT_LOCK = Path(os.environ.get("OPERATOR_SUITE_SANDBOX_LOCK", "/run/operator-suite/sandbox.lock"))


def say(message: str) -> None:
    """A line of the sandbox's progress."""
    print(f"[sandbox] {message}", flush=True)


def complain(message: str) -> None:
    """A line of why the sandbox cannot do what it was asked."""
    print(f"[sandbox] {message}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------- the sandbox's processes


def _environment(pid: int) -> list[bytes]:
    try:
        return Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return []


def _carries_marker(pid: int, directory: Path) -> bool:
    return f"{MARKER}={directory}".encode() in _environment(pid)


def sandbox_processes(directory: Path) -> list[int]:
    """Every live process of the sandbox in ``directory`` that carries :data:`MARKER`, but this one.

    The nodes' daemons carry it; their containers, whose environment is their own, do not, and are
    stopped with the nodes' cgroup tree."""
    directory = directory.resolve()
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and _carries_marker(int(entry.name), directory):
            found.add(int(entry.name))
    found.discard(os.getpid())
    return sorted(pid for pid in found if alive(pid))


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


# ---------------------------------------------------------------- one sandbox per machine


def _lock_holder(lock: Path) -> tuple[Path, int] | None:
    try:
        data = json.loads(lock.read_text())
        return Path(data["dir"]), int(data["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _holder_runs(directory: Path, pid: int) -> bool:
    """Whether the sandbox named by a lock still runs: its ``up`` is at work, or any process of it lives."""
    try:
        up_running = b"sandbox" in Path(f"/proc/{pid}/cmdline").read_bytes() and alive(pid)
    except OSError:
        up_running = False
    return up_running or bool(sandbox_processes(directory))


def _running_elsewhere(holder: tuple[Path, int] | None, directory: Path) -> Path | None:
    """The directory of the lock's ``holder``, when it is not ``directory`` and its sandbox runs."""
    if holder is not None and holder[0] != directory and _holder_runs(*holder):
        return holder[0]
    return None


def another_sandbox(lock: Path, directory: Path) -> Path | None:
    """The directory of the sandbox that holds ``lock`` and runs, when it is not ``directory``'s."""
    return _running_elsewhere(_lock_holder(lock), directory)


def refuse_another(running: Path, lock: Path) -> None:
    """Say that a sandbox runs already, from ``running``, and how to stop it."""
    complain(f"another sandbox runs on this machine, from {running} (lock {lock}).")
    complain(f"stop it first: operator-suite-dev sandbox down --dir {running}")


def take_lock(lock: Path, directory: Path) -> Path | None:
    """Take the machine's sandbox lock for ``directory``; the running sandbox's directory if another holds it.

    The lock is created whole (written aside, then linked into place, which fails if it exists);
    a lock whose sandbox no longer runs is stale and taken over.
    """
    lock.parent.mkdir(parents=True, exist_ok=True)
    mine = lock.with_name(f".{lock.name}.{os.getpid()}")
    mine.write_text(json.dumps({"dir": str(directory), "pid": os.getpid()}))
    try:
        for _ in range(3):
            try:
                os.link(mine, lock)
                return None
            except FileExistsError:
                holder = _lock_holder(lock)
                running = _running_elsewhere(holder, directory)
                if running is not None:
                    return running
                if holder is not None:
                    say(f"taking over the lock {lock} of a sandbox that no longer runs ({holder[0]})")
                lock.unlink(missing_ok=True)
        raise ControlPlaneError(f"could not take the sandbox lock {lock}")
    finally:
        mine.unlink(missing_ok=True)


def release_lock(lock: Path, directory: Path) -> None:
    holder = _lock_holder(lock)
    if holder is not None and holder[0] == directory:
        lock.unlink(missing_ok=True)
