"""Build, or reuse, the control-plane binaries from the project's pinned Go modules.

``hack/controlplane/go.mod`` pins k8s.io/kubernetes and maps each staging
module to its published tag; ``hack/etcd/go.mod`` pins etcd on its own, so
the two dependency graphs never mix. The binaries land in
``~/.cache/operator-suite/<versions>-<hash of the go.mod/go.sum files>/bin``,
outside any work tree, so a second run (or a second clone) reuses them and a
changed pin builds afresh. A file lock keeps two builders from racing.

``operator-suite-dev binaries`` is the command-line face of :func:`ensure_binaries`.

The build-and-cache steps (:func:`find_hack_dir`, :func:`pin_digest`, :func:`required_version`,
:func:`build_once`, :func:`run_go`, :func:`build_binary`, :func:`say`) are shared with every other
pinned tool. Most are a table of :class:`GoProgram` rows built by :func:`ensure_go_programs` (the
real nodes' programs, Prometheus and promtool, versitygw); the control plane builds its commands in
one ``go build`` (they share one module and most of their packages), and the Cluster Stack tools
also copy CRDs out of modules (:mod:`operator_testkit.clusterstack_tools`).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from operator_core.settings import from_env
from operator_testkit.errors import ControlPlaneError
from operator_testkit.settings import ControlPlaneSettings

__all__ = [
    "KUBERNETES_COMMANDS",
    "Binaries",
    "GoProgram",
    "GoPrograms",
    "build_binary",
    "build_once",
    "build_telling",
    "ensure_binaries",
    "ensure_go_programs",
    "find_hack_dir",
    "kubernetes_ldflags",
    "pin_digest",
    "required_version",
    "run_go",
    "say",
]

KUBERNETES_COMMANDS = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl")
_PINNED_FILES = ("controlplane/go.mod", "controlplane/go.sum", "etcd/go.mod", "etcd/go.sum")


@dataclass(frozen=True)
class Binaries:
    """Where each control-plane program is."""

    directory: Path

    def path(self, name: str) -> Path:
        return self.directory / name

    @property
    def etcd(self) -> Path:
        return self.path("etcd")

    @property
    def kube_apiserver(self) -> Path:
        return self.path("kube-apiserver")

    @property
    def kube_controller_manager(self) -> Path:
        return self.path("kube-controller-manager")

    @property
    def kube_scheduler(self) -> Path:
        return self.path("kube-scheduler")

    @property
    def kubectl(self) -> Path:
        return self.path("kubectl")

    def complete(self) -> bool:
        return all(self.path(name).is_file() for name in (*KUBERNETES_COMMANDS, "etcd"))


def find_hack_dir() -> Path:
    """The project's ``hack`` directory: $OPERATOR_SUITE_HACK_DIR, else found above the cwd or this file."""
    override = os.environ.get("OPERATOR_SUITE_HACK_DIR")
    if override:
        return Path(override)
    for start in (Path.cwd(), Path(__file__).resolve()):
        for parent in (start, *start.parents):
            if (parent / "hack" / "controlplane" / "go.mod").is_file():
                return parent / "hack"
    raise ControlPlaneError(
        "cannot find hack/controlplane/go.mod; run from the operator-suite checkout "
        "or set OPERATOR_SUITE_HACK_DIR"
    )


def pin_digest(hack: Path, pinned_files: Iterable[str], *recipe: str) -> str:
    """12 hex digits of a sha256 over the build recipe (flags and the like) and the pinned files
    (paths under ``hack``): a changed pin or flag gets a cache directory of its own."""
    digest = hashlib.sha256()
    for text in recipe:
        digest.update(text.encode())
    for name in pinned_files:
        path = hack / name
        try:
            content = path.read_bytes()
        except OSError as error:
            raise ControlPlaneError(f"cannot read the pinned file {path}: {error}") from error
        digest.update(name.encode())
        digest.update(content)
    return digest.hexdigest()[:12]


def _pin_digest(hack: Path, settings: ControlPlaneSettings) -> str:
    """A digest of everything that decides the binaries: the pinned modules and the build flags."""
    return pin_digest(hack, _PINNED_FILES, kubernetes_ldflags(settings.kubernetes_version))


def cache_directory(settings: ControlPlaneSettings, hack: Path) -> Path:
    label = f"k8s-{settings.kubernetes_version}-etcd-{settings.etcd_version}-{_pin_digest(hack, settings)}"
    return settings.cache_dir / label


def required_version(go_mod: Path, module: str) -> str:
    """The version of ``module`` that a pinned ``go.mod`` requires."""
    try:
        text = go_mod.read_text()
    except OSError as error:
        raise ControlPlaneError(f"cannot read the pinned file {go_mod}: {error}") from error
    line = re.compile(rf"^\s*(?:require\s+)?{re.escape(module)}\s+(v\S+)", re.MULTILINE)
    match = line.search(text)
    if match is None:
        raise ControlPlaneError(f"{go_mod} requires no version of {module}")
    return match.group(1)


@contextmanager
def _exclusive(lock_path: Path) -> Iterator[None]:
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with lock_path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def build_once(root: Path, complete: Callable[[], bool], build: Callable[[], None]) -> None:
    """Call ``build`` unless ``complete()``, holding the file lock ``<root>.lock``: two builders never
    race, and the second finds the first one's result instead of building again."""
    if complete():
        return
    with _exclusive(root.parent / f"{root.name}.lock"):
        if not complete():
            root.mkdir(parents=True, exist_ok=True)
            build()


def _go_environment() -> dict[str, str]:
    env = dict(os.environ)
    # Static binaries, built by the local Go: never fetch another toolchain.
    env.update({"CGO_ENABLED": "0", "GOTOOLCHAIN": "local", "GOFLAGS": "-buildvcs=false -mod=readonly"})
    return env


def kubernetes_ldflags(version: str) -> str:
    """The version stamps upstream's build sets, for servers and for client-go's User-Agent alike."""
    major, minor = version.lstrip("v").split(".")[:2]
    values = {
        "gitVersion": version,
        "gitMajor": major,
        "gitMinor": minor,
        "gitTreeState": "clean",
        "buildDate": "1970-01-01T00:00:00Z",
    }
    stamps = [
        f"-X {package}.{key}={value}"
        for package in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version")
        for key, value in values.items()
    ]
    return " ".join(["-s", "-w", *stamps])


def run_go(arguments: list[str], workdir: Path, log: Path, *, capture_stdout: bool = False) -> str:
    """``go ARGUMENTS`` in ``workdir`` (static, local toolchain, go.sum read-only), its output
    appended to ``log``. A failure raises :class:`ControlPlaneError` with the log's last lines.

    With ``capture_stdout``, stdout is returned (and appended to the log after stderr).
    """
    go = shutil.which("go")
    if go is None:
        raise ControlPlaneError(
            "the Go toolchain ('go') is not on PATH; it builds the test kit's binaries from hack/"
        )
    with log.open("a") as output:
        output.write(f"$ (cd {shlex.quote(str(workdir))} && go {shlex.join(arguments)})\n")
        output.flush()
        result = subprocess.run(
            [go, *arguments],
            cwd=workdir,
            env=_go_environment(),
            stdout=subprocess.PIPE if capture_stdout else output,
            stderr=output if capture_stdout else subprocess.STDOUT,
            text=True,
            check=False,
        )
        if capture_stdout:
            output.write(result.stdout)
    if result.returncode != 0:
        tail = "".join(log.read_text(errors="replace").splitlines(keepends=True)[-30:])
        command = " ".join(arguments[:2] if arguments[0] == "mod" else arguments[:1])
        raise ControlPlaneError(
            f"go {command} failed in {workdir} (exit {result.returncode}; whole log: {log}):\n{tail}"
        )
    return result.stdout if capture_stdout else ""


def build_binary(target: Path, package: str, ldflags: str, module_dir: Path, log: Path) -> None:
    """``go build`` one ``package`` of the module pinned in ``module_dir`` into ``target``, which
    appears at once (built aside, then renamed) or not at all."""
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".build-{target.name}-", dir=target.parent))
    try:
        built = staging / target.name
        run_go(["build", "-trimpath", "-ldflags", ldflags, "-o", str(built), package], module_dir, log)
        built.replace(target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _build(settings: ControlPlaneSettings, hack: Path, target: Path) -> None:
    staging = Path(tempfile.mkdtemp(prefix="build-", dir=target.parent))
    log = target.parent / f"{target.name}.build.log"
    try:
        say(
            f"building kube-apiserver, kube-controller-manager, kube-scheduler, kubectl "
            f"{settings.kubernetes_version} (log: {log})"
        )
        started = time.monotonic()
        run_go(
            [
                "build",
                "-trimpath",
                "-ldflags",
                kubernetes_ldflags(settings.kubernetes_version),
                "-o",
                f"{staging}/",
                *(f"k8s.io/kubernetes/cmd/{name}" for name in KUBERNETES_COMMANDS),
            ],
            hack / "controlplane",
            log,
        )
        say(f"building etcd {settings.etcd_version}")
        run_go(
            [
                "build",
                "-trimpath",
                "-ldflags",
                "-s -w",
                "-o",
                str(staging / "etcd"),
                "go.etcd.io/etcd/server/v3",
            ],
            hack / "etcd",
            log,
        )
        say(f"built in {time.monotonic() - started:.0f} s")
        shutil.rmtree(target, ignore_errors=True)
        staging.rename(target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def build_telling(what: str, target: Path, package: str, ldflags: str, module_dir: Path, log: Path) -> None:
    """:func:`build_binary`, saying on stderr what is built (a minute or more, often) and how long it took."""
    say(f"building {what} (log: {log})")
    started = time.monotonic()
    build_binary(target, package, ldflags, module_dir, log)
    say(f"{what}: done in {time.monotonic() - started:.0f} s")


def say(message: str, command: str = "binaries") -> None:
    """A progress line on stderr: ``[operator-suite-dev COMMAND] MESSAGE``."""
    print(f"[operator-suite-dev {command}] {message}", file=sys.stderr, flush=True)


def ensure_binaries(settings: ControlPlaneSettings | None = None) -> Binaries:
    """The control-plane binaries, built first if the cache does not hold them for the current pins."""
    settings = settings or from_env(ControlPlaneSettings)
    hack = find_hack_dir()
    root = cache_directory(settings, hack)
    binaries = Binaries(root / "bin")
    build_once(root, binaries.complete, lambda: _build(settings, hack, binaries.directory))
    return binaries


# ---------------------------------------------------------------- Go programs from a table


@dataclass(frozen=True)
class GoProgram:
    """One program built from a pinned module: its name, the ``hack/`` folder pinning it, its package
    and the linker flags its upstream release sets (versions, mostly)."""

    name: str
    module: str
    package: str
    ldflags: str


@dataclass(frozen=True)
class GoPrograms:
    """Programs built into one cache directory, ``<directory>/bin/<name>``."""

    directory: Path
    programs: tuple[GoProgram, ...]

    @property
    def bin(self) -> Path:
        return self.directory / "bin"

    def path(self, name: str) -> Path:
        return self.bin / name

    def complete(self) -> bool:
        return all(self.path(program.name).is_file() for program in self.programs)


def ensure_go_programs(
    label: str,
    programs: tuple[GoProgram, ...],
    pinned_files: Iterable[str],
    recipe: Iterable[str],
    settings: ControlPlaneSettings,
) -> GoPrograms:
    """``programs``, built into ``<cache_dir>/<label>-<hash of the pinned files and the recipe>/bin``
    unless there already; only a missing program is built, each saying so (:func:`build_telling`)."""
    hack = find_hack_dir()
    built = GoPrograms(settings.cache_dir / f"{label}-{pin_digest(hack, pinned_files, *recipe)}", programs)

    def build() -> None:
        log = built.directory / "build.log"
        for program in programs:
            if not built.path(program.name).is_file():
                what = f"{program.name} ({program.module})"
                build_telling(
                    what,
                    built.path(program.name),
                    program.package,
                    program.ldflags,
                    hack / program.module,
                    log,
                )

    build_once(built.directory, built.complete, build)
    return built
