"""A real OCI registry (the CNCF distribution registry) on a free loopback port, for a test's charts
and artifacts.

:func:`running_registry` writes a small config (filesystem storage in its directory, plain HTTP,
or HTTPS with a certificate from :mod:`operator_testkit.pki`), starts ``registry serve``, waits until
``GET /v2/`` answers, and stops it on the way out, also when the block raises. The registry runs in
its own process group and is killed by the kernel if this process dies first, as control-plane
components are.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import ssl
import subprocess
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import oras.client
import yaml

from operator_testkit.clusterstack_tools import ensure_clusterstack_tools
from operator_testkit.controlplane import free_port
from operator_testkit.pki import create_pki
from operator_testkit.servers import serve_on_free_port, spawn, stop_group, trusting

__all__ = ["RunningRegistry", "running_registry", "start_detached_registry"]


@dataclass(frozen=True)
class RunningRegistry:
    """One running registry."""

    host: str
    """``127.0.0.1:PORT``: what image references and ``oci://`` URLs name."""
    url: str
    """``http://127.0.0.1:PORT`` (or ``https://``): the base of the Registry API (``/v2/...``)."""
    directory: Path
    """Its config file, storage (``data/``), log and, with TLS, its certificates (``pki/``)."""
    ca_cert: Path | None
    """With TLS, the CA that signed the registry's certificate (for ``--ca-file``, ``SSL_CERT_FILE``)."""
    pid: int
    authenticated: bool = False
    """It asks for credentials (its config has an ``auth`` section)."""

    @property
    def oci(self) -> str:
        """``oci://127.0.0.1:PORT``, the prefix of helm's chart references."""
        return f"oci://{self.host}"

    @property
    def log(self) -> Path:
        return self.directory / "registry.log"

    @property
    def storage(self) -> Path:
        return self.directory / "data"

    @property
    def plain_http(self) -> bool:
        return self.ca_cert is None

    def ssl_context(self) -> ssl.SSLContext | bool:
        """What an HTTP client passes as ``verify``: this registry's CA with TLS, else True."""
        return trusting(self.ca_cert)

    def oras_client(self) -> oras.client.OrasClient:
        """An oras-py client of this registry, trusting its CA (another client than the operator's, so
        that what the tests push is what other tools push)."""
        return oras.client.OrasClient(
            hostname=self.host, insecure=self.plain_http, tls_verify=str(self.ca_cert or True)
        )


def _write_config(
    directory: Path, host: str, tls: tuple[Path, Path] | None, auth: Mapping[str, Any] | None = None
) -> Path:
    http: dict[str, object] = {
        "addr": host,
        # A fixed secret per registry: without one it makes up a random one and warns.
        "secret": secrets.token_hex(16),
        "headers": {"X-Content-Type-Options": ["nosniff"]},
    }
    if tls is not None:
        http["tls"] = {"certificate": str(tls[0]), "key": str(tls[1])}
    config = {
        "version": 0.1,
        "log": {"level": "info", "formatter": "text", "accesslog": {"disabled": False}},
        "storage": {"filesystem": {"rootdirectory": str(directory / "data")}, "delete": {"enabled": True}},
        "http": http,
    }
    if auth is not None:
        config["auth"] = dict(auth)
    path = directory / "config.yml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def _answers(registry: RunningRegistry) -> bool:
    """``GET /v2/`` answers: 200, or 401 from one that asks for credentials."""
    try:
        response = httpx.get(f"{registry.url}/v2/", verify=registry.ssl_context(), timeout=2, trust_env=False)
    except httpx.HTTPError:
        return False
    return response.status_code == 200 or (registry.authenticated and response.status_code == 401)


def _start(
    binary: Path,
    directory: Path,
    tls: tuple[Path, Path] | None,
    ca_cert: Path | None,
    *,
    detached: bool = False,
    auth: Mapping[str, Any] | None = None,
    address: str = "127.0.0.1",
) -> tuple[subprocess.Popen[bytes], RunningRegistry]:
    host = f"{address}:{free_port()}"
    config = _write_config(directory, host, tls, auth)
    log = directory / "registry.log"
    environment = {
        **os.environ,
        # Its OpenTelemetry exporter would otherwise try an OTLP collector on localhost:4318.
        "OTEL_TRACES_EXPORTER": "none",
    }
    # This run's log only, so a failure's tail is this run's.
    argv = [str(binary), "serve", str(config)]
    process = spawn(argv, log, bound=not detached, truncate=True, cwd=directory, env=environment)
    scheme = "http" if tls is None else "https"
    return process, RunningRegistry(
        host=host,
        url=f"{scheme}://{host}",
        directory=directory,
        ca_cert=ca_cert,
        pid=process.pid,
        authenticated=auth is not None,
    )


@contextlib.contextmanager
def running_registry(
    directory: Path | None = None,
    *,
    binary: Path | None = None,
    tls: bool = False,
    auth: Mapping[str, Any] | None = None,
    start_timeout: float = 30.0,
    address: str = "127.0.0.1",
) -> Iterator[RunningRegistry]:
    """A registry on a free port of ``address`` (loopback, or where real nodes' pods reach this
    machine), stopped when the block ends.

    ``auth`` is its config's ``auth`` section (:mod:`operator_testkit.registry_auth` writes the htpasswd
    and token ones); a registry started again on the same ``directory`` serves what was pushed before.

    ``directory`` holds its config, storage and log (a temporary directory, removed afterwards, if
    not given). ``binary`` defaults to the cached build of :func:`ensure_clusterstack_tools`. With
    ``tls``, it serves HTTPS with a certificate for 127.0.0.1 and localhost, signed by a fresh CA
    (:attr:`RunningRegistry.ca_cert`); otherwise plain HTTP (helm needs ``--plain-http``).
    Raises :class:`ControlPlaneError`, with the registry's log, if it does not start.
    """
    binary = binary or ensure_clusterstack_tools().registry
    with contextlib.ExitStack() as cleanup:
        if directory is None:
            directory = Path(cleanup.enter_context(tempfile.TemporaryDirectory(prefix="registry-")))
        directory = directory.resolve()
        directory.mkdir(parents=True, exist_ok=True)
        certificate: tuple[Path, Path] | None = None
        ca_cert: Path | None = None
        if tls:
            pki = create_pki(directory / "pki", service_ip="127.0.0.1", addresses=(address,))
            certificate, ca_cert = (pki.serving_cert, pki.serving_key), pki.ca_cert
        process, registry = serve_on_free_port(
            "the registry",
            lambda: _start(binary, directory, certificate, ca_cert, auth=auth, address=address),
            _answers,
            directory / "registry.log",
            start_timeout,
        )
        try:
            yield registry
        finally:
            stop_group(process)


def start_detached_registry(
    directory: Path, binary: Path, address: str = "127.0.0.1", start_timeout: float = 30.0
) -> RunningRegistry:
    """A plain-HTTP registry on ``address`` that outlives this process (a sandbox's, on the address
    where real nodes' pods reach this machine): whoever started it stops it, by its pid or by the
    marker its environment carries (:data:`operator_testkit.sandbox.MARKER`)."""
    directory = directory.resolve()
    directory.mkdir(parents=True, exist_ok=True)
    _, registry = serve_on_free_port(
        "the registry",
        lambda: _start(binary, directory, None, None, detached=True, address=address),
        _answers,
        directory / "registry.log",
        start_timeout,
    )
    return registry
