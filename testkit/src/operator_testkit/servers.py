"""Starting and stopping the test kit's child processes, in one place: the control plane's
components, the real nodes' daemons, the operators run as processes, and the servers (the OCI
registry, the S3 server).

:func:`spawn` starts each one the same way: in its own process group and session (a Ctrl-C meant for
the caller does not reach it), its output appended to its log file, and, unless it must outlive this
process (a sandbox's), killed by the kernel if this process dies first. :func:`stop_group` stops one
group and all. :func:`serve_on_free_port` starts a server on a free port, tries another port when it
lost the race for the first, and says why it did not start with the last lines of its log.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import ctypes
import functools
import os
import signal
import ssl
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from operator_testkit.errors import ControlPlaneError

__all__ = [
    "die_with_parent",
    "log_tail",
    "popen",
    "popen_bound",
    "serve_on_free_port",
    "spawn",
    "stop_group",
    "trusting",
]

_PR_SET_PDEATHSIG = 1
_STOP_GRACE_SECONDS = 10.0
_PORT_ATTEMPTS = 3
Server = TypeVar("Server")


def die_with_parent() -> None:
    """Run in the child before exec: SIGKILL this process when the parent goes away.

    "The parent" is the thread that started it, not the process (prctl(2)): a child started from a
    thread that ends first dies with that thread. Start it with :func:`popen_bound` where the calling
    thread may not last (``asyncio.to_thread``'s workers end with their test's event loop)."""
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


_spawner: concurrent.futures.ThreadPoolExecutor | None = None
_spawner_lock = threading.Lock()


def popen_bound(argv: Sequence[str], **options: Any) -> subprocess.Popen[bytes]:
    """``subprocess.Popen`` of a child that dies with this process (:func:`die_with_parent`), started
    from one thread that lives as long as this process, whichever thread asks. A control plane's API
    server restarted from an ``asyncio.to_thread`` worker (the chaos soak) was killed when that worker
    ended with its test, and every later test of the session met a dead API server."""
    global _spawner
    with _spawner_lock:
        if _spawner is None:
            _spawner = concurrent.futures.ThreadPoolExecutor(
                max_workers=1, thread_name_prefix="bound-spawner"
            )

    before_exec = options.pop("preexec_fn", None)

    def child() -> None:
        die_with_parent()
        if before_exec is not None:
            before_exec()

    def spawn() -> subprocess.Popen[bytes]:
        return subprocess.Popen(argv, preexec_fn=child, **options)

    if threading.current_thread().name.startswith("bound-spawner"):
        return spawn()
    return _spawner.submit(spawn).result()


def popen(argv: Sequence[str], *, bound: bool, **options: Any) -> subprocess.Popen[bytes]:
    """``subprocess.Popen``, or :func:`popen_bound` when the child must die with this process."""
    return popen_bound(argv, **options) if bound else subprocess.Popen(argv, **options)


def spawn(
    argv: Sequence[str], log: Path, *, bound: bool, truncate: bool = False, **options: Any
) -> subprocess.Popen[bytes]:
    """``argv`` in a session of its own, its stdout and stderr appended to ``log`` (the log holds only
    this run with ``truncate``), no stdin; bound to this process unless ``bound`` is False.
    ``options`` go to ``subprocess.Popen`` (``cwd``, ``env``, ``pass_fds``)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("wb" if truncate else "ab") as output:  # the child keeps its own copy
        return popen(
            argv,
            bound=bound,
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            **options,
        )


def trusting(ca_cert: Path | None) -> ssl.SSLContext | bool:
    """What an HTTP client passes as ``verify`` to reach a server of ours: its CA with TLS, else True."""
    return ssl.create_default_context(cafile=str(ca_cert)) if ca_cert else True


def log_tail(log: Path, lines: int = 30) -> str:
    if not log.exists():
        return "(no log)"
    return "".join(log.read_text(errors="replace").splitlines(keepends=True)[-lines:])


def stop_group(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM the process group, wait, then SIGKILL whatever is left; reap it."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=_STOP_GRACE_SECONDS)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def _wait_until_answering(
    name: str,
    process: subprocess.Popen[bytes],
    answers: Callable[[], bool],
    log: Path,
    timeout: float,
) -> bool:
    """True once ``answers()``; False if the port was taken; raises on any other failure."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            tail = log_tail(log)
            if "address already in use" in tail:
                return False
            raise ControlPlaneError(
                f"{name} exited with code {process.returncode} while starting; last lines of {log}:\n{tail}"
            )
        if answers():
            return True
        time.sleep(0.1)
    raise ControlPlaneError(
        f"{name} did not answer within {timeout:.0f} s; last lines of {log}:\n{log_tail(log)}"
    )


def serve_on_free_port(
    name: str,
    start: Callable[[], tuple[subprocess.Popen[bytes], Server]],
    answers: Callable[[Server], bool],
    log: Path,
    timeout: float,
) -> tuple[subprocess.Popen[bytes], Server]:
    """``start()`` (which picks a free port) until the server answers: another port when its first
    was taken between choosing and binding it, a :class:`ControlPlaneError` naming ``name`` and
    quoting ``log`` otherwise. A server that did not start is stopped."""
    for _ in range(_PORT_ATTEMPTS):
        process, server = start()
        try:
            if _wait_until_answering(name, process, functools.partial(answers, server), log, timeout):
                return process, server
        except BaseException:
            stop_group(process)
            raise
        stop_group(process)
    raise ControlPlaneError(
        f"{name} found no free port in {_PORT_ATTEMPTS} attempts; last lines of {log}:\n{log_tail(log)}"
    )
