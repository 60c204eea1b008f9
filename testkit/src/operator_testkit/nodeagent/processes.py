"""Container processes: started in their own mount and UTS namespaces and session, stopped as the
kubelet stops them.

Each container process runs as::

    unshare -m -u sh -c 'mount --bind "$0" /etc/hosts && hostname POD && exec "$@"' POD_HOSTS ARGV...

so it sees the pod's hosts file (see :mod:`.hosts`) as ``/etc/hosts`` and the
pod's host name, and nothing else on the machine changes; the namespace's mounts are private, and
they vanish with the process. A runner that runs an image's program unchanged
(one that reads fixed paths, such as the ServiceAccount token under
``/var/run/secrets/kubernetes.io/serviceaccount``) also gets the pod's volumes
bound at their mount paths (:func:`mount_script`): ``/run`` becomes a fresh
tmpfs of the process's own first, as a container's is, so a mount path under it
needs no directory on the machine; any other mount path must exist already.

``unshare``, ``sh`` and the program are one process (each ``exec`` s the next),
so the pid we hold is the program's. A program that is not on this machine is
refused before anything starts (:class:`.failures.ProgramMissing`).

Every process starts a new session (so its whole group can be signalled) and
gets ``PR_SET_PDEATHSIG`` = SIGKILL, which survives ``exec``: if the agent dies,
the kernel kills its containers. Spawn only from the event loop's thread: the
death signal follows the *thread* that forked.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import shlex
import shutil
import signal
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO

from operator_testkit.nodeagent.failures import ProgramMissing
from operator_testkit.nodeagent.volumes import Mount

__all__ = [
    "ContainerProcess",
    "die_with_parent",
    "mount_script",
    "private_mount_path",
    "run_to_exit",
    "wrapped_argv",
]

_PR_SET_PDEATHSIG = 1
_STAGING = "/run/.pod-volumes"
_PRIVATE_ROOTS = ("/run", "/var/run")  # /var/run is /run on Debian; both become the process's own tmpfs


def _under(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory.rstrip("/") + "/")


def private_mount_path(container_path: str) -> bool:
    """Whether a mount path lies in the process's own ``/run`` (no directory on the machine needed)."""
    return any(_under(container_path, root) for root in _PRIVATE_ROOTS)


def mount_script(mounts: Sequence[Mount] = (), hostname: str | None = None, keep: Sequence[str] = ()) -> str:
    """The ``sh -c`` script run in the new namespaces before the program: the pod's hosts file over
    /etc/hosts (``$0``), its host name (in a UTS namespace of its own), then each volume bound at its
    path (read-only when asked). It reads only which host paths are files.

    A mount may hide the host path behind another (a ``/tmp`` volume hides a state directory under
    /tmp), so every volume is first bound into a staging directory in the new ``/run``, then from
    there to its path, outer paths first so that a nested mount lands on top. A path of ``keep``
    (the program's own code) that a mount hides is bound back over it at the end.
    """
    steps = ['mount --bind "$0" /etc/hosts']
    if hostname:
        steps.append(f"hostname {shlex.quote(hostname)}")
    if not mounts:
        return " && ".join([*steps, 'exec "$@"'])
    steps.append("mount -t tmpfs -o mode=0755,nosuid,nodev,size=16m pod-run /run")
    steps.append(f"mkdir -p {_STAGING}")
    chosen = sorted(mounts, key=lambda m: len(m.container_path))
    hidden = [path for path in keep if any(_under(path, m.container_path) for m in chosen)]
    directories = [mount.host_path.is_dir() for mount in chosen]
    for index, mount in enumerate(chosen):
        make = "mkdir" if directories[index] else ":>"
        staged = f"{_STAGING}/{index}"
        steps += [f"{make} {staged}", f"mount --bind {shlex.quote(str(mount.host_path))} {staged}"]
    for index, path in enumerate(hidden):
        steps += [
            f"mkdir {_STAGING}/keep-{index}",
            f"mount --bind {shlex.quote(path)} {_STAGING}/keep-{index}",
        ]
    for index, mount in enumerate(chosen):
        target = shlex.quote(mount.container_path)
        if private_mount_path(mount.container_path):  # in the new /run: made here
            if directories[index]:
                steps.append(f"mkdir -p {target}")
            else:
                steps.append(f"mkdir -p {shlex.quote(str(Path(mount.container_path).parent))} && :> {target}")
        steps.append(f"mount --bind {_STAGING}/{index} {target}")
        if mount.read_only:
            steps.append(f"mount -o remount,bind,ro {target}")
    for index, path in enumerate(hidden):
        steps += [
            f"mkdir -p {shlex.quote(path)}",
            f"mount --bind {_STAGING}/keep-{index} {shlex.quote(path)}",
        ]
    return " && ".join([*steps, 'exec "$@"'])


def die_with_parent() -> None:
    """Run in the child before exec: SIGKILL this process when the agent goes away."""
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def wrapped_argv(
    argv: Sequence[str],
    hosts_file: Path,
    mounts: Sequence[Mount] = (),
    hostname: str | None = None,
    keep: Sequence[str] = (),
) -> list[str]:
    """``argv`` run in a private mount namespace with ``hosts_file`` bound over /etc/hosts and
    ``mounts`` bound at their paths, and with the pod's ``hostname`` (``gethostname()`` is the pod's
    name, as in a pod) in a UTS namespace of its own."""
    namespaces = ["-m", "-u"] if hostname else ["-m"]
    script = mount_script(mounts, hostname, keep)
    return ["unshare", *namespaces, "sh", "-c", script, str(hosts_file), *argv]


_EXIT_CHECK_SECONDS = 3.0
_UNKNOWN_EXIT = 255  # what asyncio itself reports for a child it could not reap


def _process_state(pid: int) -> str | None:
    """The state letter of /proc/PID/stat (R, S, Z, ...), or None when there is no such process."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def _reap(pid: int) -> int | None:
    """Collect a zombie child's exit code, or None when it was collected elsewhere meanwhile."""
    try:
        reaped, status = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return None
    return os.waitstatus_to_exitcode(status) if reaped else None


def _signal_group(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


class ContainerProcess:
    """One run of one container: a process group writing to a log file."""

    def __init__(self, process: asyncio.subprocess.Process, log: IO[bytes]) -> None:
        self._process = process
        self._log = log
        self.started = time.time()
        self._exit: asyncio.Future[int] = asyncio.ensure_future(process.wait())
        self._missed: int | None = None

    @property
    def pid(self) -> int:
        return self._process.pid

    @property
    def returncode(self) -> int | None:
        return self._process.returncode if self._missed is None else self._missed

    @classmethod
    async def start(
        cls,
        argv: Sequence[str],
        *,
        env: Mapping[str, str],
        cwd: Path,
        hosts_file: Path,
        log_path: Path,
        mounts: Sequence[Mount] = (),
        hostname: str | None = None,
        keep: Sequence[str] = (),
    ) -> ContainerProcess:
        program = argv[0] if argv else ""
        if shutil.which(program, path=env.get("PATH", os.defpath)) is None:
            # Else sh would start, fail to exec it, and the container would crash-loop with exit 127.
            raise ProgramMissing(f"the program {program!r} is not on this machine")
        log_path.parent.mkdir(parents=True, exist_ok=True)
        log = log_path.open("ab")
        try:
            process = await asyncio.create_subprocess_exec(
                *wrapped_argv(argv, hosts_file, mounts, hostname, keep),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=log,
                stderr=asyncio.subprocess.STDOUT,
                cwd=cwd,
                env=dict(env),
                start_new_session=True,
                preexec_fn=die_with_parent,
            )
        except BaseException:
            log.close()
            raise
        return cls(process, log)

    async def wait(self) -> int:
        """The exit code; a process killed by signal N reports 128+N, as a container runtime does.

        asyncio learns of the exit from a watcher thread. Once in a long CI run that news never
        came (a restarted nginx whose pod then hung forever), so an exit asyncio has not reported
        after a few seconds is looked for here too: a zombie is reaped, a vanished pid counts.
        """
        vanished = False
        while self._missed is None:
            done, _ = await asyncio.wait({self._exit}, timeout=_EXIT_CHECK_SECONDS)
            if done:
                break
            state = _process_state(self.pid)
            if state == "Z":
                self._missed = _reap(self.pid)
            elif state is None and vanished:
                self._missed = _UNKNOWN_EXIT  # reaped by someone else, and asyncio was never told
            vanished = state is None
        if self._missed is not None:
            self._exit.cancel()
        code = self._exit.result() if self._missed is None else self._missed
        self._log.close()
        return 128 - code if code < 0 else code

    def signal(self, sig: int) -> None:
        """Signal the whole process group (the program and anything it started)."""
        if self.returncode is None:
            _signal_group(self._process.pid, sig)

    async def stop(self, grace: float) -> int:
        """SIGTERM, then SIGKILL after ``grace`` seconds; returns the exit code."""
        self.signal(signal.SIGTERM)
        try:
            return await asyncio.wait_for(asyncio.shield(self.wait()), timeout=max(grace, 0.0))
        except TimeoutError:
            self.signal(signal.SIGKILL)
            return await self.wait()
        finally:
            _signal_group(self._process.pid, signal.SIGKILL)  # anything the program left in its group


async def run_to_exit(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: Path,
    hosts_file: Path,
    limit: float,
    mounts: Sequence[Mount] = (),
    hostname: str | None = None,
    keep: Sequence[str] = (),
) -> int:
    """Run a short command (an exec probe) in the container's context; -1 when it timed out."""
    process = await asyncio.create_subprocess_exec(
        *wrapped_argv(argv, hosts_file, mounts, hostname, keep),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
        cwd=cwd,
        env=dict(env),
        start_new_session=True,
        preexec_fn=die_with_parent,
    )
    try:
        return await asyncio.wait_for(process.wait(), limit)
    except TimeoutError:
        _signal_group(process.pid, signal.SIGKILL)
        await process.wait()
        return -1
