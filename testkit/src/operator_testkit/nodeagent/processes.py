"""Container processes: started in their own mount and UTS namespaces and session, stopped as the
kubelet stops them.

Each container process runs as::

    unshare -m -u sh -c 'mount --bind "$0" /etc/hosts && hostname POD && exec "$@"' POD_HOSTS ARGV...

so it sees the pod's hosts file (see :mod:`.hosts`) as ``/etc/hosts`` and the
pod's host name, and nothing else on the machine changes; the namespace's mounts are private, and
they vanish with the process. A container run from its image's root filesystem (:mod:`.rootfs`) gets
that root built in the same namespace instead, with the pod's volumes at their paths, and
:mod:`.rootexec` enters it and becomes the container's user before the program runs.

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
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import IO

from operator_testkit.nodeagent.failures import ProgramMissing
from operator_testkit.nodeagent.rootfs import ContainerRoot, root_script
from operator_testkit.nodeagent.volumes import Mount

__all__ = [
    "ContainerProcess",
    "die_with_parent",
    "mount_script",
    "run_to_exit",
    "volume_steps",
    "wrapped_argv",
]

_PR_SET_PDEATHSIG = 1


def mount_script(hostname: str | None = None) -> str:
    """The ``sh -c`` script run in the new namespaces before a program of this machine: the pod's
    hosts file over /etc/hosts (``$0``), then its host name (in a UTS namespace of its own)."""
    steps = ['mount --bind "$0" /etc/hosts']
    if hostname:
        steps.append(f"hostname {shlex.quote(hostname)}")
    return " && ".join([*steps, 'exec "$@"'])


def die_with_parent() -> None:
    """Run in the child before exec: SIGKILL this process when the agent goes away."""
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def wrapped_argv(
    argv: Sequence[str],
    hosts_file: Path,
    hostname: str | None = None,
    root: ContainerRoot | None = None,
    mounts: Sequence[Mount] = (),
) -> list[str]:
    """``argv`` run in a private mount namespace with ``hosts_file`` bound over /etc/hosts, and with
    the pod's ``hostname`` (``gethostname()`` is the pod's name, as in a pod) in a UTS namespace of its
    own; with ``root``, in the image's root filesystem as the container's user, with ``mounts`` at
    their paths (``argv`` is then the program as the image names it); without, a program of this
    machine that sees ``mounts`` at their container paths too (:func:`volume_steps`)."""
    namespaces = ["-m", "-u"] if hostname else ["-m"]
    if root is not None:
        steps = [
            *([f"hostname {shlex.quote(hostname)}"] if hostname else []),
            *root_script(root, mounts, hosts_file),
        ]
        script = " && ".join([*steps, 'exec "$@"'])
        return [
            "unshare",
            *namespaces,
            "sh",
            "-c",
            script,
            str(hosts_file),
            *root.launcher(sys.executable),
            *argv,
        ]
    script = mount_script(hostname)
    if mounts:
        steps = volume_steps(mounts, Path(tempfile.mkdtemp(prefix=".paths-", dir=hosts_file.parent)))
        script = " && ".join([*steps, script])
    return ["unshare", *namespaces, "sh", "-c", script, str(hosts_file), *argv]


def _anchor(path: PurePosixPath) -> PurePosixPath:
    """The nearest folder of ``path`` (itself included) that exists on this machine."""
    while not Path(path).is_dir() and path != path.parent:
        path = path.parent
    return path


def volume_steps(mounts: Sequence[Mount], scratch: Path) -> list[str]:
    """The ``sh`` steps that put a program of this machine's volumes at their container paths, in its
    own mount namespace: a path this machine lacks is made in an overlay of its nearest folder (the
    machine's own files stay as they are), then the volume is bound there. So a path the program is
    told over its API (a Typesense snapshot's) is the container's, as in a pod. A path whose nearest
    folder is / keeps only the translated arguments."""
    steps: list[str] = []
    overlaid: set[PurePosixPath] = set()
    for mount in sorted(mounts, key=lambda m: len(m.container_path)):
        target = PurePosixPath(mount.container_path)
        anchor = _anchor(target)
        if anchor == PurePosixPath("/"):
            continue
        if anchor != target and anchor not in overlaid:
            layer = scratch / str(len(overlaid))
            upper, work, lower = (shlex.quote(str(p)) for p in (layer / "upper", layer / "work", anchor))
            steps.append(f"mkdir -p {upper} {work}")
            options = f"lowerdir={lower},upperdir={upper},workdir={work}"
            steps.append(f"mount -t overlay -o {options} container-paths {lower}")
            overlaid.add(anchor)
        quoted = shlex.quote(str(target))
        if mount.host_path.is_dir():
            steps.append(f"mkdir -p {quoted}")
        else:
            steps.append(f"mkdir -p {shlex.quote(str(target.parent))} && :> {quoted}")
        steps.append(f"mount --bind {shlex.quote(str(mount.host_path))} {quoted}")
    return steps


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
        hostname: str | None = None,
        root: ContainerRoot | None = None,
        mounts: Sequence[Mount] = (),
    ) -> ContainerProcess:
        program = argv[0] if argv else ""
        # A program of the image's own was looked for in its tree by its runner.
        if root is None and shutil.which(program, path=env.get("PATH", os.defpath)) is None:
            # Else sh would start, fail to exec it, and the container would crash-loop with exit 127.
            raise ProgramMissing(f"the program {program!r} is not on this machine")
        log_path.parent.mkdir(parents=True, exist_ok=True)
        log = log_path.open("ab")
        try:
            process = await asyncio.create_subprocess_exec(
                *wrapped_argv(argv, hosts_file, hostname, root, mounts),
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
    hostname: str | None = None,
    root: ContainerRoot | None = None,
    mounts: Sequence[Mount] = (),
) -> int:
    """Run a short command (an exec probe) in the container's context; -1 when it timed out."""
    process = await asyncio.create_subprocess_exec(
        *wrapped_argv(argv, hosts_file, hostname, root, mounts),
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
