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
import ctypes
import os
import secrets
import signal
import ssl
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import yaml

from operator_testkit.clusterstack_tools import ensure_clusterstack_tools
from operator_testkit.controlplane import free_port
from operator_testkit.errors import ControlPlaneError
from operator_testkit.pki import create_pki

__all__ = ["RunningRegistry", "running_registry", "start_detached_registry"]

_PR_SET_PDEATHSIG = 1
_STOP_GRACE_SECONDS = 10.0
_PORT_ATTEMPTS = 3


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
        return ssl.create_default_context(cafile=str(self.ca_cert)) if self.ca_cert else True


def _die_with_parent() -> None:
    """Run in the child before exec: SIGKILL this process when the parent goes away."""
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


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


def _log_tail(log: Path, lines: int = 30) -> str:
    if not log.exists():
        return "(no log)"
    return "".join(log.read_text(errors="replace").splitlines(keepends=True)[-lines:])


def _stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM the registry's process group, wait, then SIGKILL whatever is left; reap it."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=_STOP_GRACE_SECONDS)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


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
) -> tuple[subprocess.Popen[bytes], RunningRegistry]:
    host = f"127.0.0.1:{free_port()}"
    config = _write_config(directory, host, tls, auth)
    log = directory / "registry.log"
    environment = {
        **os.environ,
        # Its OpenTelemetry exporter would otherwise try an OTLP collector on localhost:4318.
        "OTEL_TRACES_EXPORTER": "none",
    }
    with log.open("wb") as output:  # this run's log only, so a failure's tail is this run's
        process = subprocess.Popen(
            [str(binary), "serve", str(config)],
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            cwd=directory,
            env=environment,
            start_new_session=True,
            preexec_fn=None if detached else _die_with_parent,
        )
    scheme = "http" if tls is None else "https"
    return process, RunningRegistry(
        host=host,
        url=f"{scheme}://{host}",
        directory=directory,
        ca_cert=ca_cert,
        pid=process.pid,
        authenticated=auth is not None,
    )


def _wait_until_answering(
    process: subprocess.Popen[bytes], registry: RunningRegistry, timeout: float
) -> bool:
    """True once ``GET /v2/`` answers 200; False if the port was taken; raises on any other failure."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            tail = _log_tail(registry.log)
            if "address already in use" in tail:
                return False
            raise ControlPlaneError(
                f"the registry exited with code {process.returncode} while starting; "
                f"last lines of {registry.log}:\n{tail}"
            )
        if _answers(registry):
            return True
        time.sleep(0.1)
    raise ControlPlaneError(
        f"the registry did not answer GET {registry.url}/v2/ within {timeout:.0f} s; "
        f"last lines of {registry.log}:\n{_log_tail(registry.log)}"
    )


@contextlib.contextmanager
def running_registry(
    directory: Path | None = None,
    *,
    binary: Path | None = None,
    tls: bool = False,
    auth: Mapping[str, Any] | None = None,
    start_timeout: float = 30.0,
) -> Iterator[RunningRegistry]:
    """A registry on a free 127.0.0.1 port, stopped when the block ends.

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
            pki = create_pki(directory / "pki", service_ip="127.0.0.1")
            certificate, ca_cert = (pki.serving_cert, pki.serving_key), pki.ca_cert
        for _ in range(_PORT_ATTEMPTS):
            process, registry = _start(binary, directory, certificate, ca_cert, auth=auth)
            try:
                if _wait_until_answering(process, registry, start_timeout):
                    break
            except BaseException:
                _stop(process)
                raise
            _stop(process)  # its port was taken between choosing and binding it: try another
        else:
            raise ControlPlaneError(
                f"the registry found no free port in {_PORT_ATTEMPTS} attempts; "
                f"last lines of {directory / 'registry.log'}:\n{_log_tail(directory / 'registry.log')}"
            )
        try:
            yield registry
        finally:
            _stop(process)


def start_detached_registry(directory: Path, binary: Path, start_timeout: float = 30.0) -> RunningRegistry:
    """A plain-HTTP registry that outlives this process (a sandbox's): whoever started it stops it, by
    its pid or by the marker its environment carries (:data:`operator_testkit.sandbox.MARKER`)."""
    directory = directory.resolve()
    directory.mkdir(parents=True, exist_ok=True)
    for _ in range(_PORT_ATTEMPTS):
        process, registry = _start(binary, directory, None, None, detached=True)
        try:
            if _wait_until_answering(process, registry, start_timeout):
                return registry
        except BaseException:
            _stop(process)
            raise
        _stop(process)
    raise ControlPlaneError(f"the registry found no free port in {_PORT_ATTEMPTS} attempts")
