"""Enter a container's root and become its user, then exec its program: the last step of a runtime.

Run by this machine's Python (``python -I``, so no variable of the container's steers it) as the last
link of :mod:`.processes`' chain, after the root was built (:func:`.rootfs.root_script`)::

    rootexec.py --root DIR --uid U --gid G --groups A,B --workdir W [--no-new-privileges]
                [--drop-capabilities] -- PROGRAM ARGS...

It chroots into DIR, sets the supplementary groups, the group and the user, drops every capability
from the bounding set and sets no_new_privs when asked (``capabilities: drop: [ALL]``,
``allowPrivilegeEscalation: false``), changes to the working directory and execs PROGRAM, looked up
on the container's own ``PATH`` inside the root, with the environment it was started with, unchanged. Each
step that fails says which, on stderr, and exits 127 (the program could not be run), as a runtime's
"exec failed" does. The program keeps this process's pid: the agent's pid is the program's.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import sys

_PR_CAPBSET_DROP = 24
_PR_SET_NO_NEW_PRIVS = 38
_CAP_LAST_CAP = "/proc/sys/kernel/cap_last_cap"


def _arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="rootexec")
    parser.add_argument("--root", required=True)
    parser.add_argument("--uid", type=int, required=True)
    parser.add_argument("--gid", type=int, required=True)
    parser.add_argument("--groups", default="")
    parser.add_argument("--workdir", default="/")
    parser.add_argument("--no-new-privileges", action="store_true")
    parser.add_argument("--drop-capabilities", action="store_true")
    parser.add_argument("--keep-pwd", action="store_true", help="the container's own env sets PWD")
    parser.add_argument("program", nargs=argparse.REMAINDER)
    arguments = parser.parse_args(argv)
    if arguments.program[:1] == ["--"]:
        arguments.program = arguments.program[1:]
    if not arguments.program:
        parser.error("no program to run")
    return arguments


def _fail(step: str, error: OSError) -> None:
    print(f"container start failed: {step}: {error.strerror or error}", file=sys.stderr, flush=True)
    raise SystemExit(127)


def _environment_as_given(keep_pwd: bool) -> dict[str, str]:
    """The environment this process was started with, from the kernel: Python itself may have added
    ``LC_CTYPE`` to ``os.environ`` at start (PEP 538's locale coercion), which is not the container's;
    and ``PWD``, which the ``sh`` before it exports, is not either (unless the container sets it)."""
    with open("/proc/self/environ", "rb") as given:
        entries = given.read().split(b"\0")
    environment = dict(
        (name.decode(errors="surrogateescape"), value.decode(errors="surrogateescape"))
        for name, _, value in (entry.partition(b"=") for entry in entries if b"=" in entry)
    )
    if not keep_pwd:
        environment.pop("PWD", None)
        environment.pop("OLDPWD", None)
    return environment


def main(argv: list[str]) -> None:
    arguments = _arguments(argv)
    environment = _environment_as_given(arguments.keep_pwd)
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    with open(_CAP_LAST_CAP) as last:  # read before chroot: the root may have no /proc/sys
        last_capability = int(last.read())
    try:
        os.chroot(arguments.root)
        os.chdir("/")
    except OSError as error:
        _fail(f"entering the root {arguments.root}", error)
    if arguments.drop_capabilities:
        for capability in range(last_capability + 1):
            if libc.prctl(_PR_CAPBSET_DROP, capability, 0, 0, 0) != 0:
                _fail("dropping capabilities", OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno())))
    try:
        os.setgroups([int(group) for group in arguments.groups.split(",") if group])
        os.setgid(arguments.gid)
        os.setuid(arguments.uid)
    except OSError as error:
        _fail(f"becoming {arguments.uid}:{arguments.gid}", error)
    if arguments.no_new_privileges and libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        _fail("setting no_new_privs", OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno())))
    try:
        os.chdir(arguments.workdir)
    except OSError as error:
        _fail(f"changing to the working directory {arguments.workdir}", error)
    program = arguments.program
    try:
        os.execvpe(program[0], program, environment)  # noqa: S606 (the container's program, as given)
    except OSError as error:
        _fail(f"exec {program[0]!r}", error)


if __name__ == "__main__":
    main(sys.argv[1:])
