"""What backs a PersistentVolume on disk: a plain directory, or a size-limited tmpfs; wiping and filling.

A claim that asks for it (storageClassName :data:`SIZE_LIMITED_CLASS`, or the
annotation :data:`SIZE_LIMITED_ANNOTATION` = ``"true"``) is backed by a tmpfs
mounted on its directory with ``size=`` its requested storage, so ``df`` in the
volume shows the limit and a full volume is really full (``ENOSPC``). tmpfs only
uses memory for what is written, so a large request costs nothing until filled;
:func:`fill` refuses volumes that are not size-limited, so a test can never fill
this machine's disk.

Why tmpfs and not a loop-mounted image: no loop devices, no mkfs, nothing left
on disk. Why the agent's own mount namespace (:func:`enter_private_mount_namespace`):
the kernel then drops every mount the agent made when the agent and its
containers are gone, even after a SIGKILL, so no mount can outlive it. The
cost: a size-limited volume's files are visible only to the agent and its
containers (``/proc/<agent pid>/root/<path>`` from outside).

:func:`size_limit` and :func:`parse_quantity` are pure; the rest are small
filesystem adapters, run in a thread by the agent.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from decimal import Decimal
from pathlib import Path
from typing import Any

__all__ = [
    "FILL_FILE",
    "SIZE_LIMITED_ANNOTATION",
    "SIZE_LIMITED_CLASS",
    "enter_private_mount_namespace",
    "fill",
    "is_mount_point",
    "mount_size_limited",
    "parse_quantity",
    "size_limit",
    "unfill",
    "unmount",
    "wipe",
]

SIZE_LIMITED_CLASS = "nodeagent-size-limited"
SIZE_LIMITED_ANNOTATION = "nodeagent.operator-suite.io/size-limited"
FILL_FILE = ".nodeagent-fill"
_CLONE_NEWNS = 0x00020000
_CHUNK = 1 << 20

_SUFFIXES = {
    "": 1,
    "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18,
    "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60,
}  # fmt: skip
_QUANTITY = re.compile(r"^([0-9]+(?:\.[0-9]+)?)(?:[eE]([0-9]+))?([a-zA-Z]*)$")

Manifest = Mapping[str, Any]


def parse_quantity(text: str) -> int:
    """A Kubernetes storage quantity (``1Gi``, ``500M``, ``1e9``) in bytes, rounded up (pure)."""
    match = _QUANTITY.match(text.strip())
    if not match or match.group(3) not in _SUFFIXES or (match.group(2) and match.group(3)):
        raise ValueError(f"not a storage quantity: {text!r}")
    number = Decimal(match.group(1)) * (10 ** int(match.group(2) or 0)) * _SUFFIXES[match.group(3)]
    return int(number.to_integral_value(rounding="ROUND_CEILING"))


def size_limit(claim: Manifest) -> int | None:
    """The byte limit of a claim that asks to be size-limited; None for a plain directory (pure)."""
    spec = claim.get("spec") or {}
    annotations = (claim.get("metadata") or {}).get("annotations") or {}
    wanted = spec.get("storageClassName") == SIZE_LIMITED_CLASS or (
        str(annotations.get(SIZE_LIMITED_ANNOTATION, "")).lower() == "true"
    )
    if not wanted:
        return None
    return parse_quantity(str(((spec.get("resources") or {}).get("requests") or {}).get("storage", "1Gi")))


# ---------------------------------------------------------------- adapters


def enter_private_mount_namespace() -> bool:
    """Move this process into a mount namespace of its own, with private propagation.

    Call before any thread starts: unsharing affects only the calling thread's view
    of the filesystem. Returns False (and changes nothing) when not permitted.
    """
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    if libc.unshare(_CLONE_NEWNS) != 0:
        return False
    # Without this, mounts made here would propagate back to the machine's namespace.
    result = subprocess.run(["mount", "--make-rprivate", "/"], capture_output=True, check=False)
    return result.returncode == 0


def is_mount_point(path: Path) -> bool:
    return os.path.ismount(path)


def mount_size_limited(path: Path, limit: int) -> None:
    """Mount a tmpfs of ``limit`` bytes on ``path`` (made if missing), unless one is there already."""
    path.mkdir(parents=True, exist_ok=True)
    if is_mount_point(path):
        return
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={limit},mode=0755", "nodeagent-volume", str(path)],
        capture_output=True,
        check=True,
    )


def unmount(path: Path) -> None:
    """Unmount ``path`` if something is mounted there (lazily, so a busy volume never blocks)."""
    if is_mount_point(path):
        subprocess.run(["umount", "--lazy", str(path)], capture_output=True, check=False)


def wipe(path: Path) -> int:
    """Remove everything inside ``path`` (the directory, or mount, stays); returns entries removed."""
    removed = 0
    for entry in list(path.iterdir()) if path.is_dir() else []:
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            with contextlib.suppress(FileNotFoundError):
                entry.unlink()
        removed += 1
    return removed


def fill(path: Path) -> int:
    """Write :data:`FILL_FILE` in a size-limited volume until it is full; returns the bytes written."""
    if not is_mount_point(path):
        raise ValueError(f"{path} is not a size-limited volume; only those can be filled")
    written = 0
    chunk = b"\0" * _CHUNK
    descriptor = os.open(path / FILL_FILE, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        size = _CHUNK
        while size:
            try:
                written += os.write(descriptor, chunk[:size])
            except OSError as error:
                if error.errno != errno.ENOSPC:
                    raise
                size //= 2  # the last bytes too, in smaller pieces
    finally:
        os.close(descriptor)
    return written


def unfill(path: Path) -> bool:
    """Remove :data:`FILL_FILE`; returns whether it was there."""
    try:
        (path / FILL_FILE).unlink()
    except FileNotFoundError:
        return False
    return True
