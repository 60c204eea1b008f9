"""The kubelet's HTTPS endpoint, as far as ``kubectl logs`` needs it: ``/containerLogs``.

``kubectl logs`` asks the API server, which connects to the pod's node at the
address and port the Node status advertises and asks for
``GET /containerLogs/{namespace}/{pod}/{container}``. :class:`KubeletServer`
listens on each node's loopback address, on a free port (so several agents can
share this machine; :mod:`.nodes` advertises it), with a self-signed certificate:
the local API server runs without ``--kubelet-certificate-authority``, so it
does not verify the kubelet, as on many test clusters.

Supported query parameters: ``tailLines``, ``limitBytes``, ``previous`` (the run
before the last restart) and ``follow`` (new output is streamed until the run
ends or the client goes away). ``timestamps`` and ``sinceSeconds`` are ignored.

Logs are read from the agent's files (``STATE/logs/{ns}_{pod}_{uid}/{container}/{restart}.log``);
:func:`choose_log` and :func:`tail` are pure. Nothing here authenticates the
caller: the endpoint only listens on loopback.
"""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import logging
import socket
import ssl
from collections.abc import Callable, Sequence
from pathlib import Path

from aiohttp import web
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

__all__ = ["KubeletServer", "choose_log", "self_signed", "tail"]

log = logging.getLogger(__name__)

FOLLOW_POLL_SECONDS = 0.3
# Which log directory belongs to a pod right now: the agent knows its live pods' directories.
LogDirectory = Callable[[str, str], Path | None]


def choose_log(files: Sequence[Path], previous: bool) -> Path | None:
    """The newest run's log (``N.log`` with the highest N), or the one before it (pure)."""
    runs = sorted((f for f in files if f.stem.isdigit()), key=lambda f: int(f.stem))
    wanted = -2 if previous else -1
    return runs[wanted] if len(runs) >= abs(wanted) else None


def tail(data: bytes, lines: int | None) -> bytes:
    """The last ``lines`` lines of ``data`` (all of it for None; a final partial line counts) (pure)."""
    if lines is None:
        return data
    if lines <= 0:
        return b""
    parts = data.splitlines(keepends=True)
    return b"".join(parts[-lines:])


def self_signed(directory: Path, addresses: Sequence[str]) -> ssl.SSLContext:
    """A server TLS context with a fresh self-signed certificate for ``addresses``."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "operator-suite node agent kubelet")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=365))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(a)) for a in addresses]),
            critical=False,
        )
        .sign(key, hashes.SHA256())
    )
    directory.mkdir(parents=True, exist_ok=True)
    cert_path, key_path = directory / "kubelet.crt", directory / "kubelet.key"
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_path.touch(mode=0o600)
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert_path, key_path)
    return context


def _int(text: str | None) -> int | None:
    return int(text) if text is not None and text.lstrip("-").isdigit() else None


class KubeletServer:
    """Serves container logs on every node address; :meth:`start` returns the port of each."""

    def __init__(self, state_dir: Path, live_log_dir: LogDirectory) -> None:
        self._state_dir = state_dir
        self._live_log_dir = live_log_dir
        self._runner: web.AppRunner | None = None

    def log_directory(self, namespace: str, pod: str) -> Path | None:
        """The live pod's log directory, else the newest one left by a pod of that name."""
        live = self._live_log_dir(namespace, pod)
        if live is not None:
            return live
        # Pod and namespace names have no "_", so this matches this pod's directories only.
        found = sorted(
            (self._state_dir / "logs").glob(f"{namespace}_{pod}_*"), key=lambda p: p.stat().st_mtime
        )
        return found[-1] if found else None

    async def start(self, addresses: Sequence[str]) -> dict[str, int]:
        context = await asyncio.to_thread(self_signed, self._state_dir / "kubelet", addresses)
        app = web.Application()
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/containerLogs/{namespace}/{pod}/{container}", self._logs)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        ports = {}
        for address in addresses:
            listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind((address, 0))
            site = web.SockSite(self._runner, listener, ssl_context=context)
            await site.start()
            ports[address] = int(listener.getsockname()[1])
        return ports

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _healthz(self, request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def _logs(self, request: web.Request) -> web.StreamResponse:
        namespace, pod = request.match_info["namespace"], request.match_info["pod"]
        container = request.match_info["container"]
        query = request.query
        directory = self.log_directory(namespace, pod)
        files = list((directory / container).glob("*.log")) if directory else []
        path = choose_log(files, previous=query.get("previous") == "true")
        if path is None:
            what = "previous terminated container" if query.get("previous") == "true" else "container"
            raise web.HTTPNotFound(text=f'{what} "{container}" in pod "{pod}" has no logs')
        data = await asyncio.to_thread(path.read_bytes)
        body = tail(data, _int(query.get("tailLines")))
        limit = _int(query.get("limitBytes"))
        if limit is not None:
            body = body[:limit]
        if query.get("follow") != "true":
            return web.Response(body=body, content_type="text/plain")
        response = web.StreamResponse(headers={"Content-Type": "text/plain"})
        await response.prepare(request)
        await response.write(body)
        await self._follow(request, response, path, len(data))
        return response

    async def _follow(
        self, request: web.Request, response: web.StreamResponse, path: Path, offset: int
    ) -> None:
        """Stream what is appended to ``path`` until the run or the pod ends, or the client leaves."""
        namespace, pod = request.match_info["namespace"], request.match_info["pod"]
        while True:
            await asyncio.sleep(FOLLOW_POLL_SECONDS)
            transport = request.transport
            if transport is None or transport.is_closing():
                return
            with path.open("rb") as handle:
                handle.seek(offset)
                more = handle.read()
            if more:
                offset += len(more)
                await response.write(more)
            newest = choose_log(list(path.parent.glob("*.log")), previous=False)
            if newest != path or self._live_log_dir(namespace, pod) != path.parent.parent:
                return
