"""A container run from its image's own root filesystem, as a container runtime runs it.

For an image the machine's image store holds (this suite's own, built by ``make image``), the node
agent does not run a program of this machine: it runs the image's. Each container gets, in mount and
UTS namespaces of its own (:mod:`.processes`):

- **its root**: an overlay whose lower layer is the image's unpacked tree (:func:`operator_testkit.
  image.unpacked_image`, never written to) and whose upper layer is a tmpfs of the container's own, so
  that what it writes is gone when it stops, as with a new container; mounted at the pod's
  ``runners/<container>/rootfs`` directory, so that the process's working directory and root, as
  ``/proc`` shows them, lie in the pod's directory (where the agent's clean-up looks);
- **what a runtime mounts**: ``/proc``, a ``/dev`` tmpfs with the usual device nodes and ``/dev/shm``,
  ``/sys`` read-only, the pod's hosts file at ``/etc/hosts``, its host name at ``/etc/hostname``, and a
  ``/etc/resolv.conf`` naming no server (names resolve through the hosts file; nothing leaves loopback);
- **the pod's volumes** at their paths, symbolic links resolved inside the image (``/var/run`` is a link
  to ``/run`` in Debian), read-only where the mount says so;
- then ``readOnlyRootFilesystem`` remounts the root read-only, after the mount points were made in it
  (as runc does), and :mod:`.rootexec` enters the root: the pod's ``runAsUser``/``runAsGroup`` (else the
  image's ``USER``), no new privileges, dropped capabilities, the working directory, and ``exec``.

The environment is what a kubelet gives, and nothing of the agent's: the image's ``ENV``, ``HOME`` from
the image's passwd (else ``/``), ``HOSTNAME``, the service links and ``KUBERNETES_*`` variables, then the
container's ``env`` (:func:`container_environment`).

Everything here is pure but :func:`root_script`'s reading of which volume sources are files.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from operator_testkit.nodeagent.env import ConfigError
from operator_testkit.nodeagent.volumes import Mount

__all__ = [
    "ROOTEXEC_SCRIPT",
    "ContainerRoot",
    "container_environment",
    "container_identity",
    "path_in_tree",
    "root_script",
]

Manifest = Mapping[str, Any]
ROOTEXEC_SCRIPT = Path(__file__).with_name("rootexec.py")
DEFAULT_PATH = (
    "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"  # containerd's, when the image sets none
)
_DEVICES = ("null", "zero", "full", "random", "urandom", "tty")
_UPPER = "/run/.container-root"  # the tmpfs holding the overlay's upper layer, in the new /run
_MAX_LINKS = 40  # as the kernel's ELOOP limit: a loop of links in an image is refused, not followed


@dataclass(frozen=True)
class ContainerRoot:
    """How one container enters its image's root filesystem."""

    tree: Path  # the image's unpacked tree (the overlay's lower layer)
    mount_point: Path  # where the overlay is mounted in the container's namespace
    uid: int
    gid: int
    groups: tuple[int, ...] = ()
    working_dir: str = "/"
    read_only: bool = False
    no_new_privileges: bool = False
    drop_capabilities: bool = False  # capabilities: drop: [ALL]
    hostname_file: Path | None = None  # the pod's /etc/hostname
    resolv_file: Path | None = None  # the pod's /etc/resolv.conf
    files: Mapping[str, Path] = field(default_factory=dict)  # more files bound over the image's
    sets_pwd: bool = False  # the container's env names PWD (else the wrapping shell's is dropped)

    def launcher(self, python: str) -> list[str]:
        """The argv prefix that enters the root, becomes the user and execs what follows ``--``."""
        return [
            python, "-I", str(ROOTEXEC_SCRIPT),
            "--root", str(self.mount_point),
            "--uid", str(self.uid), "--gid", str(self.gid),
            "--groups", ",".join(str(group) for group in self.groups),
            "--workdir", self.working_dir,
            *(["--no-new-privileges"] if self.no_new_privileges else []),
            *(["--drop-capabilities"] if self.drop_capabilities else []),
            *(["--keep-pwd"] if self.sets_pwd else []),
            "--",
        ]  # fmt: skip


def path_in_tree(tree: Path, path: str) -> str:
    """``path`` as the container sees it, with every symbolic link on the way resolved inside ``tree``
    (an absolute link target is the container's root, not this machine's); the last part need not
    exist. Pure but for reading the tree's links: a link that would leave the tree cannot (``..`` stops
    at its root), and a loop is a :class:`.ConfigError`."""
    parts = [part for part in PurePosixPath(path).parts if part != "/"]
    resolved: list[str] = []
    followed = 0
    while parts:
        part = parts.pop(0)
        if part in ("", "."):
            continue
        if part == "..":
            if resolved:
                resolved.pop()
            continue
        candidate = tree.joinpath(*resolved, part)
        if candidate.is_symlink():
            followed += 1
            if followed > _MAX_LINKS:
                raise ConfigError(f"too many levels of symbolic links in the image resolving {path}")
            target = os.readlink(candidate)
            if target.startswith("/"):
                resolved = []
            parts = [p for p in PurePosixPath(target).parts if p != "/"] + parts
            continue
        resolved.append(part)
    return "/" + "/".join(resolved)


def _entries(table: str) -> list[list[str]]:
    return [line.split(":") for line in table.splitlines() if line.count(":") >= 2]


def _user(value: str, passwd: str) -> tuple[int, int | None]:
    """A user given as a number or a name of the image's passwd: (uid, its primary group if listed)."""
    for fields in _entries(passwd):
        if value in (fields[0], fields[2]) and fields[2].isdigit():
            primary = fields[3] if len(fields) > 3 else ""
            return int(fields[2]), int(primary) if primary.isdigit() else None
    if value.isdigit():
        return int(value), None
    raise ConfigError(f"unable to find user {value}: no matching entries in the image's passwd file")


def _group(value: str, group: str) -> int:
    if value.isdigit():
        return int(value)
    for fields in _entries(group):
        if fields[0] == value and fields[2].isdigit():
            return int(fields[2])
    raise ConfigError(f"unable to find group {value}: no matching entries in the image's group file")


def container_identity(
    pod: Manifest, container: Manifest, image_user: str, passwd: str, group: str
) -> tuple[int, int, tuple[int, ...]]:
    """(uid, gid, supplementary groups) of a container, as a runtime decides them (pure).

    ``runAsUser``/``runAsGroup`` of the container's ``securityContext``, else the pod's, else the
    image's ``USER`` (``uid[:gid]`` or names of its passwd and group); with no group given, the user's
    primary group in the image's passwd, else 0. The pod's ``fsGroup`` and ``supplementalGroups`` are
    the supplementary groups. ``runAsNonRoot`` refuses a container that would run as root.
    """
    pod_context = pod.get("spec", {}).get("securityContext") or {}
    context = container.get("securityContext") or {}

    def setting(key: str) -> Any:
        return context.get(key, pod_context.get(key))

    image_name, _, image_group = image_user.partition(":")
    run_as_user = setting("runAsUser")
    uid, primary = _user(str(run_as_user) if run_as_user is not None else image_name or "0", passwd)
    gid = primary or 0
    if image_group and run_as_user is None:
        gid = _group(image_group, group)
    if setting("runAsGroup") is not None:
        gid = int(setting("runAsGroup"))
    if setting("runAsNonRoot") and uid == 0:
        raise ConfigError("container has runAsNonRoot and image will run as root")
    extra = [pod_context.get("fsGroup"), *(pod_context.get("supplementalGroups") or [])]
    groups = tuple(sorted({int(g) for g in extra if g is not None}))
    return uid, gid, groups


def _home(uid: int, passwd: str) -> str:
    for fields in _entries(passwd):
        if fields[2] == str(uid) and len(fields) > 5 and fields[5]:
            return fields[5]
    return "/"


def container_environment(
    image_env: Sequence[str],
    uid: int,
    passwd: str,
    kubelet: Mapping[str, str],
    container: Mapping[str, str],
) -> dict[str, str]:
    """A container's environment, as containerd and the kubelet build it (pure): the image's ``ENV``
    (``PATH`` defaulted), ``HOME`` from the image's passwd for the user when the image sets none (else
    ``/``), then the kubelet's (``HOSTNAME``, service links), then the container's own ``env``."""
    environment = dict(entry.partition("=")[::2] for entry in image_env)
    environment.setdefault("PATH", DEFAULT_PATH)
    environment.setdefault("HOME", _home(uid, passwd))
    environment.update(kubelet)
    environment.update(container)
    return environment


def root_script(root: ContainerRoot, mounts: Sequence[Mount], hosts_file: Path) -> list[str]:
    """The ``sh`` steps that build the container's root in its new mount namespace, before
    :mod:`.rootexec` enters it: the overlay, the kernel's filesystems, the pod's files and volumes,
    then the read-only remount. Every mount point is a path inside the root resolved in the image."""
    tree = root.tree
    top = shlex.quote(str(root.mount_point))

    def at(path: str) -> str:
        return f"{root.mount_point}{path_in_tree(tree, path)}"

    def inside(path: str) -> str:
        return shlex.quote(at(path))

    steps = [
        "mount -t tmpfs -o mode=0755,nosuid,nodev,size=256m container-run /run",
        f"mkdir -p {_UPPER}/upper {_UPPER}/work",
        f"mount -t overlay -o lowerdir={shlex.quote(str(tree))},upperdir={_UPPER}/upper,"
        f"workdir={_UPPER}/work container-root {top}",
        f"mkdir -p {inside('/proc')} {inside('/dev')} {inside('/sys')} {inside('/etc')}",
        f"mount -t proc -o nosuid,nodev,noexec proc {inside('/proc')}",
        f"mount -t tmpfs -o mode=0755,nosuid,size=64k dev {inside('/dev')}",
    ]
    dev = shlex.quote(at("/dev"))
    for device in _DEVICES:
        steps += [f":> {dev}/{device}", f"mount --bind /dev/{device} {dev}/{device}"]
    steps += [
        f"mkdir {dev}/shm {dev}/pts",
        f"mount -t tmpfs -o mode=1777,nosuid,nodev,noexec,size=64m shm {dev}/shm",
        f"ln -s /proc/self/fd {dev}/fd && ln -s /proc/self/fd/0 {dev}/stdin",
        f"ln -s /proc/self/fd/1 {dev}/stdout && ln -s /proc/self/fd/2 {dev}/stderr",
        f"mount --rbind -o ro /sys {inside('/sys')} && mount -o remount,bind,ro {inside('/sys')}",
    ]
    files = {"/etc/hosts": hosts_file, **dict(root.files)}
    if root.hostname_file is not None:
        files["/etc/hostname"] = root.hostname_file
    if root.resolv_file is not None:
        files["/etc/resolv.conf"] = root.resolv_file
    for path, source in files.items():
        target = inside(path)
        steps += [f"rm -f {target} && :> {target}", f"mount --bind {shlex.quote(str(source))} {target}"]
    for mount in sorted(mounts, key=lambda m: len(m.container_path)):  # outer paths first
        target = inside(mount.container_path)
        if mount.host_path.is_dir():
            steps.append(f"mkdir -p {target}")
        else:
            parent = shlex.quote(str(PurePosixPath(at(mount.container_path)).parent))
            steps.append(f"mkdir -p {parent} && :> {target}")
        steps.append(f"mount --bind {shlex.quote(str(mount.host_path))} {target}")
        if mount.read_only:
            steps.append(f"mount -o remount,bind,ro {target}")
    if root.read_only:
        steps.append(f"mount -o remount,ro {top}")
    return steps
