"""A real S3-compatible server (versitygw, its posix backend) on a free loopback port, for the Typesense
backup tests: buckets are directories under its storage, objects are files.

:func:`ensure_versitygw` builds, or reuses, ``versitygw`` from the Go module
``github.com/versity/versitygw`` (``cmd/versitygw``), pinned in ``hack/versitygw/go.mod``, the way
:mod:`.prometheus_tools` builds Prometheus::

    <cache_dir>/versitygw-V-<hash of the pinned files and the build flags>/bin/versitygw  build.log

:func:`running_s3` starts it with a root access key and secret of its own (plain HTTP, or HTTPS with a
certificate from :mod:`.pki`), waits until it answers, and stops it on the way out, also when the block
raises; it runs in its own process group and dies with the test process (:mod:`.servers`).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import ssl
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

from operator_core.settings import from_env
from operator_testkit.binaries import GoProgram, ensure_go_programs, find_hack_dir, required_version
from operator_testkit.controlplane import free_port
from operator_testkit.pki import create_pki
from operator_testkit.servers import serve_on_free_port, spawn, stop_group, trusting
from operator_testkit.settings import ControlPlaneSettings

__all__ = ["RunningS3", "ensure_versitygw", "running_s3", "start_detached_s3"]

_VERSITYGW = "github.com/versity/versitygw"
_PINNED_FILES = ("versitygw/go.mod", "versitygw/go.sum")


def _ldflags(version: str) -> str:
    """The version stamp of versitygw's release build, so that ``--version`` names it."""
    return f"-s -w -X main.Version={version}"


def ensure_versitygw(settings: ControlPlaneSettings | None = None) -> Path:
    """The pinned versitygw binary, built first (about a minute) if the cache lacks it.

    A failed build raises :class:`ControlPlaneError` naming the ``go`` command, its directory and its
    log (whose last lines it quotes)."""
    settings = settings or from_env(ControlPlaneSettings)
    version = required_version(find_hack_dir() / "versitygw" / "go.mod", _VERSITYGW)
    program = GoProgram("versitygw", "versitygw", f"{_VERSITYGW}/cmd/versitygw", _ldflags(version))
    built = ensure_go_programs(
        f"versitygw-{version}", (program,), _PINNED_FILES, [_ldflags(version)], settings
    )
    return built.path("versitygw")


@dataclass(frozen=True)
class RunningS3:
    """One running S3 server, and the root credentials it accepts."""

    endpoint: str
    """``http://127.0.0.1:PORT`` (or ``https://``): what an S3 client's endpoint URL names."""
    access_key: str
    secret_key: str
    region: str
    directory: Path
    """Its storage (``data/``: one directory per bucket), log and, with TLS, certificates (``pki/``)."""
    ca_cert: Path | None
    pid: int

    @property
    def log(self) -> Path:
        return self.directory / "versitygw.log"

    @property
    def storage(self) -> Path:
        return self.directory / "data"

    def aws_environment(self, ca_bundle: str | None = None) -> dict[str, str]:
        """The variables AWS's tools (and ``typesense-backup``) read to reach this server as its root
        user; ``ca_bundle``, where its CA is seen from the client (this machine's path by default)."""
        environment = {
            "AWS_ENDPOINT_URL_S3": self.endpoint,
            "AWS_REGION": self.region,
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
        }
        if self.ca_cert is not None:
            environment["AWS_CA_BUNDLE"] = ca_bundle or str(self.ca_cert)
        return environment

    def create_bucket(self, name: str) -> None:
        """A new bucket ``name``: with the posix backend, a folder of its storage."""
        (self.storage / name).mkdir()

    def ssl_context(self) -> ssl.SSLContext | bool:
        """What an HTTP client passes to trust this server: its CA with TLS, else True."""
        return trusting(self.ca_cert)


def _answers(server: RunningS3) -> bool:
    """Any HTTP answer (an anonymous request is refused with 403 once it serves)."""
    try:
        httpx.get(server.endpoint, verify=server.ssl_context(), timeout=2, trust_env=False)
    except httpx.HTTPError:
        return False
    return True


def _start_versitygw(
    binary: Path, directory: Path, *, tls: bool, region: str, address: str, detached: bool, timeout: float
) -> tuple[subprocess.Popen[bytes], RunningS3]:
    """versitygw serving ``directory/data`` on a free port of ``address``, once it answers."""
    (directory / "data").mkdir(parents=True, exist_ok=True)
    ca_cert: Path | None = None
    tls_flags: list[str] = []
    if tls:
        pki = create_pki(directory / "pki", service_ip="127.0.0.1", addresses=(address,))
        ca_cert = pki.ca_cert
        tls_flags = ["--cert", str(pki.serving_cert), "--key", str(pki.serving_key)]
    access_key, secret_key = f"test-{secrets.token_hex(4)}", secrets.token_urlsafe(24)
    log, storage = directory / "versitygw.log", str(directory / "data")

    def start() -> tuple[subprocess.Popen[bytes], RunningS3]:
        host = f"{address}:{free_port()}"
        environment = {**os.environ, "ROOT_ACCESS_KEY": access_key, "ROOT_SECRET_KEY": secret_key}
        argv = [str(binary), "--port", host, "--region", region, "-q", *tls_flags, "posix", storage]
        # This run's log only, so a failure's tail is this run's.
        process = spawn(argv, log, bound=not detached, truncate=True, cwd=directory, env=environment)
        scheme = "https" if tls else "http"
        endpoint = f"{scheme}://{host}"
        return process, RunningS3(endpoint, access_key, secret_key, region, directory, ca_cert, process.pid)

    return serve_on_free_port("versitygw", start, _answers, log, timeout)


@contextlib.contextmanager
def running_s3(
    directory: Path | None = None,
    *,
    binary: Path | None = None,
    tls: bool = False,
    region: str = "us-east-1",
    start_timeout: float = 30.0,
    address: str = "127.0.0.1",
) -> Iterator[RunningS3]:
    """versitygw on a free port of ``address`` (loopback, or where real nodes' pods reach this machine)
    with fresh root credentials, stopped when the block ends.

    ``directory`` holds its storage and log (a temporary directory, removed afterwards, if not given).
    ``binary`` defaults to :func:`ensure_versitygw`'s. With ``tls``, HTTPS with a certificate for
    its address signed by a fresh CA (:attr:`RunningS3.ca_cert`). Raises :class:`ControlPlaneError`,
    with its log, if it does not start."""
    binary = binary or ensure_versitygw()
    with contextlib.ExitStack() as cleanup:
        if directory is None:
            directory = Path(cleanup.enter_context(tempfile.TemporaryDirectory(prefix="s3-")))
        process, server = _start_versitygw(
            binary, directory.resolve(), tls=tls, region=region, address=address, detached=False,
            timeout=start_timeout,
        )  # fmt: skip
        try:
            yield server
        finally:
            stop_group(process)


def start_detached_s3(directory: Path, address: str, region: str = "us-east-1") -> RunningS3:
    """A plain-HTTP versitygw on ``address`` that outlives this process (a sandbox's): whoever started
    it stops it, by its pid or by the marker its environment carries."""
    directory = directory.resolve()
    _, server = _start_versitygw(
        ensure_versitygw(), directory, tls=False, region=region, address=address, detached=True, timeout=30
    )
    return server
