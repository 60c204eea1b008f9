"""The runtime image, built without a Docker engine: a Debian base from mmdebstrap, the Dockerfile by buildah.

No Docker engine runs on these machines, and none is needed:

- the base is a Debian bookworm ``minbase`` root filesystem with ``python3`` and ``python3-venv``,
  made by ``mmdebstrap`` with a fixed ``SOURCE_DATE_EPOCH`` (the same archive state gives the same
  bytes), imported into buildah as ``localhost/operator-suite-base:bookworm`` and cached by the hash of
  its recipe under ``<cache_dir>/image-base-<hash>/``;
- helm, which the Cluster Stack operator runs, comes from an image holding only the pinned static build
  (``localhost/operator-suite-helm``, made from :mod:`operator_testkit.clusterstack_tools`' binary);
- the Dockerfile at the repository's root is built by ``buildah bud --isolation chroot`` (this host's
  OCI runtime refuses its cgroups: "cgroups in hybrid mode not supported"), with the base and helm's
  image pinned by their digests, into buildah storage of our own under ``<cache_dir>/buildah/``;
- :func:`run_in_image` runs a command inside the image (``buildah run``, chroot isolation),
  :func:`push_image` copies it to an OCI registry on loopback; real nodes get it through
  :mod:`operator_testkit.nodes.images`.

buildah and mmdebstrap come from Debian (``make image-tools``); a missing one is named with the command
that installs it. The host's CA bundle is passed to pip as a build secret, so that a network that
intercepts TLS works too; it lands in no layer.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from operator_core.settings import from_env
from operator_testkit.binaries import build_once, say
from operator_testkit.clusterstack_tools import ensure_clusterstack_tools
from operator_testkit.errors import ControlPlaneError
from operator_testkit.settings import ControlPlaneSettings

__all__ = [
    "BASE_NAME",
    "Buildah",
    "Image",
    "build_image",
    "buildah_of",
    "debian_image",
    "ensure_base",
    "image_of_sources",
    "push_image",
    "run_in_image",
    "tag_image",
]

BASE_NAME = "localhost/operator-suite-base"
HELM_IMAGE_NAME = "localhost/operator-suite-helm"
IMAGE_NAME = "localhost/operator-suite"
SOURCE_DATE_EPOCH = "1747699200"  # the Debian snapshot this machine's apt sources name (2025-05-20)


def _mmdebstrap(packages: tuple[str, ...]) -> list[str]:
    """mmdebstrap's options for a bookworm minbase with ``packages``, without manuals and translations."""
    return [
        "--mode=root",
        "--variant=minbase",
        f"--include={','.join(packages)}",
        "--dpkgopt=path-exclude=/usr/share/man/*",
        "--dpkgopt=path-exclude=/usr/share/doc/*",
        "--dpkgopt=path-include=/usr/share/doc/*/copyright",
        "--dpkgopt=path-exclude=/usr/share/locale/*",
        "--dpkgopt=path-exclude=/usr/share/info/*",
        "bookworm",
    ]


_BASE_PACKAGES = ("python3", "python3-venv")
_MIRROR = "http://deb.debian.org/debian"
_CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
_TIMEOUT = 900


@dataclass(frozen=True)
class Image:
    name: str  # localhost/operator-suite:<tag>
    digest: str
    size_bytes: int
    base: str  # the base, pinned by digest


def _tool(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        raise ControlPlaneError(
            f"building the image needs {name}, which is not on this machine: "
            f"apt-get install buildah mmdebstrap (make image-tools does)"
        )
    return found


class Buildah:
    """buildah on storage of our own (overlay, under the cache directory), never the host's default."""

    def __init__(self, root: Path, log: Path) -> None:
        self.root, self.log = root, log

    def __call__(self, *arguments: str, capture: bool = False) -> str:
        command = [
            _tool("buildah"),
            "--root", str(self.root / "storage"),
            "--runroot", str(self.root / "run"),
            "--storage-driver", "overlay",
            *arguments,
        ]  # fmt: skip
        environment = {**os.environ, "TMPDIR": str(self.root / "tmp"), "SOURCE_DATE_EPOCH": SOURCE_DATE_EPOCH}
        (self.root / "tmp").mkdir(parents=True, exist_ok=True)
        with self.log.open("a") as log:
            # A container's environment may hold a credential: the log names the variables only.
            shown = [re.sub(r"^(--env=[^=]+)=.*", r"\1=…", part) for part in command]
            log.write(f"$ {' '.join(shown)}\n")
            log.flush()
            done = subprocess.run(
                command,
                stdout=subprocess.PIPE if capture else log,
                stderr=log,
                text=True,
                env=environment,
                timeout=_TIMEOUT,
                check=False,
            )
        if done.returncode != 0:
            tail = "".join(self.log.read_text(errors="replace").splitlines(keepends=True)[-15:])
            raise ControlPlaneError(
                f"buildah {arguments[0]} failed (exit {done.returncode}); see {self.log}:\n{tail}"
            )
        return (done.stdout or "").strip() if capture else ""

    def has_image(self, name: str) -> bool:
        try:
            return bool(self("images", "--quiet", name, capture=True))
        except ControlPlaneError:
            return False


def buildah_of(settings: ControlPlaneSettings) -> Buildah:
    """buildah on this kit's own image store (under the cache directory)."""
    root = settings.cache_dir / "buildah"
    root.mkdir(parents=True, exist_ok=True)
    return Buildah(root, root / "build.log")


def _maker_environment() -> dict[str, str]:
    """mmdebstrap's environment: this machine's, without its Python settings. The packages' own
    scripts run Python while they install, and ``PYTHONPYCACHEPREFIX`` (which the Makefile sets) once
    made them write their bytecode into the base under this machine's /root/.cache."""
    kept = {name: value for name, value in os.environ.items() if not name.startswith("PYTHON")}
    return {**kept, "SOURCE_DATE_EPOCH": SOURCE_DATE_EPOCH}


def ensure_base(settings: ControlPlaneSettings, buildah: Buildah) -> str:
    """The base image's name pinned by digest; made once per recipe."""
    return debian_image(settings, buildah, BASE_NAME, _BASE_PACKAGES, "base")


def debian_image(
    settings: ControlPlaneSettings,
    buildah: Buildah,
    name: str,
    packages: tuple[str, ...],
    label: str,
    hooks: tuple[str, ...] = (),
) -> str:
    """A Debian bookworm minbase image with ``packages`` (mmdebstrap), named ``name:bookworm-<hash of
    its recipe>`` and returned pinned by digest; made once per recipe, under ``image-<label>-<hash>/``.
    ``hooks`` are mmdebstrap options that run a command in the root as it is made."""
    options = [*hooks, *_mmdebstrap(packages)]
    recipe_parts = [options, _MIRROR, SOURCE_DATE_EPOCH, "without the host's PYTHON* variables"]
    recipe = hashlib.sha256(json.dumps(recipe_parts).encode()).hexdigest()[:12]
    root = settings.cache_dir / f"image-{label}-{recipe}"
    tag = f"{name}:bookworm-{recipe}"

    def make() -> None:
        tarball = root / "rootfs.tar"
        if not tarball.exists():
            say(f"making a Debian bookworm root with {', '.join(packages)} by mmdebstrap (a minute)", "image")
            partial = root / "rootfs.tar.partial"
            with (root / "mmdebstrap.log").open("w") as log:
                subprocess.run(
                    [_tool("mmdebstrap"), *options, str(partial), _MIRROR],
                    stdout=log, stderr=log, check=True, timeout=_TIMEOUT,
                    env=_maker_environment(),
                )  # fmt: skip
            partial.rename(tarball)
        container = buildah("from", "scratch", capture=True)
        try:
            buildah("add", container, str(tarball), "/")
            buildah("config", "--cmd", '["/bin/bash"]', container)
            buildah("commit", "--quiet", "--timestamp", SOURCE_DATE_EPOCH, container, tag)
        finally:
            buildah("rm", container)

    build_once(root, lambda: buildah.has_image(tag), make)
    digest = buildah("inspect", "--type", "image", "--format", "{{.FromImageDigest}}", tag, capture=True)
    return f"{name}@{digest}"


def _ensure_helm_image(settings: ControlPlaneSettings, buildah: Buildah) -> str:
    """An image holding only the pinned helm, static, at ``/usr/bin/helm`` (what the Dockerfile's
    ``HELM_IMAGE`` names), pinned by digest; made once per helm build."""
    tools = ensure_clusterstack_tools(settings)
    version = tools.pins.helm
    digest_of_binary = hashlib.sha256(tools.helm.read_bytes()).hexdigest()[:12]
    tag = f"{HELM_IMAGE_NAME}:{version}-{digest_of_binary}"
    if not buildah.has_image(tag):
        container = buildah("from", "scratch", capture=True)
        try:
            buildah("add", container, str(tools.helm), "/usr/bin/helm")  # 0755, as built
            buildah("commit", "--quiet", "--timestamp", SOURCE_DATE_EPOCH, container, tag)
        finally:
            buildah("rm", container)
    digest = buildah("inspect", "--type", "image", "--format", "{{.FromImageDigest}}", tag, capture=True)
    return f"{HELM_IMAGE_NAME}@{digest}"


def build_image(context: Path, tag: str = "dev", settings: ControlPlaneSettings | None = None) -> Image:
    """Build the repository's Dockerfile in ``context`` as ``localhost/operator-suite:<tag>``."""
    settings = settings or from_env(ControlPlaneSettings)
    buildah = buildah_of(settings)
    base = ensure_base(settings, buildah)
    helm = _ensure_helm_image(settings, buildah)
    name = f"{IMAGE_NAME}:{tag}"
    say(f"building {name} from {context / 'Dockerfile'} (log: {buildah.log})", "image")
    secret = ["--secret", f"id=pipca,src={_CA_BUNDLE}"] if _CA_BUNDLE.exists() else []
    # --force-rm: without it, buildah 1.28 keeps the working container of the helm stage (a FROM with no
    # instruction) mounted after every build, one more overlay mount each time (seen: nine in the cache).
    buildah(
        "bud", "--isolation", "chroot", "--layers=false", "--force-rm", *secret,
        "--build-arg", f"BASE={base}", "--build-arg", f"HELM_IMAGE={helm}", "--tag", name, str(context),
    )  # fmt: skip
    return _described(buildah, name, base)


_BUILD_INPUTS = ("Dockerfile", "pyproject.toml", "README.md")  # what the Dockerfile copies, with src/
SOURCE_TAG_PREFIX = "src-"
_SOURCE_TAGS_KEPT = 2


def sources_hash(context: Path, base: str, helm: str = "") -> str:
    """A hash of everything the Dockerfile builds from, the base and helm's image included: the same
    make the same tag."""
    digest = hashlib.sha256(base.encode() + b"\0" + helm.encode() + b"\0")
    files = [context / name for name in _BUILD_INPUTS]
    files += sorted(p for p in (context / "src").rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    for path in files:
        digest.update(str(path.relative_to(context)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:12]


def image_of_sources(context: Path, settings: ControlPlaneSettings | None = None) -> Image:
    """The image of the sources in ``context``, tagged ``src-<hash of them and the base>``: built once
    (two test workers wait for one build), then found again until a source or the base's recipe
    changes; older ``src-`` images go."""
    settings = settings or from_env(ControlPlaneSettings)
    buildah = buildah_of(settings)
    base = ensure_base(settings, buildah)
    helm = _ensure_helm_image(settings, buildah)
    tag = f"{SOURCE_TAG_PREFIX}{sources_hash(context, base, helm)}"
    name = f"{IMAGE_NAME}:{tag}"

    def build() -> None:
        build_image(context, tag, settings)

    build_once(settings.cache_dir / "image-of-sources", lambda: buildah.has_image(name), build)
    _forget_older_source_images(buildah, keep=name)
    return _described(buildah, name, base)


def _forget_older_source_images(buildah: Buildah, keep: str) -> None:
    """Remove all but the newest ``src-`` images (another worker's removal of the same one is no error).
    Housekeeping only: a listing that fails (buildah loses an image another process removes while it
    lists) leaves the pruning to the next build."""
    try:
        listed = buildah("images", "--format", "{{.Name}}:{{.Tag}} {{.CreatedAtRaw}}", capture=True)
    except ControlPlaneError:
        return
    names = sorted(
        (line.split(None, 1) for line in listed.splitlines() if f":{SOURCE_TAG_PREFIX}" in line),
        key=lambda entry: entry[1],
        reverse=True,
    )
    for old, _ in [entry for entry in names if entry[0] != keep][_SOURCE_TAGS_KEPT - 1 :]:
        with contextlib.suppress(ControlPlaneError):
            buildah("rmi", old)


def _described(buildah: Buildah, name: str, base: str) -> Image:
    digest = buildah("inspect", "--type", "image", "--format", "{{.FromImageDigest}}", name, capture=True)
    return Image(name=name, digest=digest, size_bytes=_size(buildah, name), base=base)


def _size(buildah: Buildah, name: str) -> int:
    """The image's size in bytes, unpacked: the sum of its layers (a registry stores them compressed)."""
    details = json.loads(buildah("inspect", "--type", "image", name, capture=True))
    manifest = json.loads(details["Manifest"])
    return sum(int(layer.get("size", 0)) for layer in manifest.get("layers", []))


def run_in_image(
    image: str,
    *command: str,
    settings: ControlPlaneSettings | None = None,
    environment: dict[str, str] | None = None,
    volumes: dict[Path, str] | None = None,
) -> str:
    """Run ``command`` in a container of ``image`` (as the image's user, on this machine's network),
    with ``environment`` and the host folders of ``volumes`` mounted at their paths; its output."""
    buildah = buildah_of(settings or from_env(ControlPlaneSettings))
    container = buildah("from", "--quiet", image, capture=True)
    options = [f"--env={name}={value}" for name, value in (environment or {}).items()]
    options += [f"--volume={host}:{inside}" for host, inside in (volumes or {}).items()]
    try:
        return buildah("run", "--isolation", "chroot", *options, container, "--", *command, capture=True)
    finally:
        buildah("rm", container)


def tag_image(image: str, name: str, settings: ControlPlaneSettings | None = None) -> None:
    """Give ``image`` the name ``name`` too (in this machine's image store), as ``buildah tag`` does."""
    buildah_of(settings or from_env(ControlPlaneSettings))("tag", image, name)


def push_image(
    image: str, destination: str, settings: ControlPlaneSettings | None = None, *, compress: bool = True
) -> None:
    """Copy ``image`` to ``destination`` (``docker://127.0.0.1:PORT/name:tag`` or ``oci:/dir:tag``).
    ``compress=False`` sends the layers as they are: for a registry on this machine, where gzip would
    only cost CPU (most of a push's time on two cores)."""
    buildah = buildah_of(settings or from_env(ControlPlaneSettings))
    buildah(
        "push", "--tls-verify=false", *([] if compress else ["--disable-compression"]), image, destination
    )
