"""The HTTP adapter of the quorum reconciler: ask every node for /status and /health.

Each request has a timeout, and at most ``concurrency`` nodes are probed at
once, so a hung node costs one timeout and a large cluster cannot flood the
operator. Nodes are reached either directly at their pod IP (the operator
runs in the cluster, or pod IPs are routable) or through the API server's pod
proxy (the operator runs elsewhere). Answers become :class:`NodeProbe`
values for the pure decision in :mod:`.decide`; nothing here decides.

Only a missing answer (refused, reset, timed out, no address) makes a node
unreachable. Any other exception is a bug or an answer nobody can read: it is
logged with its traceback and raised as :class:`ProbeFailed`, so the reconcile
backs off instead of taking a node that may be healthy for silent (which could
fence it).
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
import re
import ssl
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Protocol

import aiohttp

from operator_core import errors
from operator_core.kube import Kube
from typesense_operator.quorum.model import NodeProbe

__all__ = [
    "ApiServerProxy",
    "CertificateRefused",
    "DirectToPod",
    "NodeAddressing",
    "NodeTarget",
    "NodeTls",
    "ProbeFailed",
    "parse_last_log",
    "parse_raft_peers",
    "probe_nodes",
]

API_KEY_HEADER = "X-TYPESENSE-API-KEY"

_MOST_CONTEXTS = 32
_logger = logging.getLogger(__name__)


class ProbeFailed(errors.OperatorError):
    """A probe failed with something other than a missing answer; the reconcile backs off."""


@dataclass(frozen=True)
class NodeTarget:
    """One Typesense pod to probe."""

    index: int
    pod: str
    namespace: str
    pod_ip: str | None
    port: int
    kubelet_ready: bool = False
    """The pod's Ready condition, passed through to the probe for the decision to weigh."""
    peering_port: int | None = None
    """Where braft serves ``/raft_stat`` (the node's last log entry); None: not asked."""
    held_back: str | None = None
    """The Typesense container's waiting reason, when its kubelet holds it back (passed through)."""
    running_since: datetime | None = None
    """When the Typesense container started, as its kubelet reports (passed through)."""
    unready_since: datetime | None = None
    """Since when its kubelet has reported the pod not Ready, while it does (passed through)."""
    tls: NodeTls | None = None
    """How to verify the node's API over TLS, when it serves HTTPS (its peering port never does)."""


@dataclass(frozen=True)
class NodeTls:
    """What a client checks of a node that serves its API over TLS."""

    server_name: str
    """The name the certificate must hold (``<pod>.<headless Service>.<namespace>.svc``)."""
    ca: bytes
    """The CA certificates to trust, in PEM; empty: the system's (a publicly trusted certificate)."""


class Unreachable(Exception):
    """The node gave no HTTP answer at all (refused, timed out, no address)."""


class CertificateRefused(Unreachable):
    """The node answered TLS with a certificate the client does not trust for its name: unreachable for
    any decision (nothing it says can be believed), said apart in the logs."""


class NodeAddressing(Protocol):
    async def get(
        self, target: NodeTarget, path: str, headers: Mapping[str, str], timeout: float
    ) -> tuple[int, bytes]:
        """(status code, body) of GET ``path`` on the node; raises :class:`Unreachable`."""
        ...

    async def post(
        self, target: NodeTarget, path: str, headers: Mapping[str, str], timeout: float
    ) -> tuple[int, bytes]:
        """(status code, body) of POST ``path`` (no body) on the node; raises :class:`Unreachable`."""
        ...

    async def send(
        self,
        method: str,
        target: NodeTarget,
        path: str,
        headers: Mapping[str, str],
        timeout: float,
        body: bytes | None = None,
    ) -> tuple[int, bytes]:
        """(status code, body) of ``method`` ``path`` with ``body``; raises :class:`Unreachable`."""
        ...

    async def served_certificate(self, target: NodeTarget, timeout: float) -> str | None:
        """The serial of the certificate the node serves now (a handshake of its own: a kept-alive
        connection would show the one served when it was opened); None: unknown or not served."""
        ...


class _ByMethod:
    """GET and POST, both through the one ``send`` an addressing implements."""

    async def send(
        self,
        method: str,
        target: NodeTarget,
        path: str,
        headers: Mapping[str, str],
        timeout: float,
        body: bytes | None = None,
    ) -> tuple[int, bytes]:
        raise NotImplementedError

    async def get(
        self, target: NodeTarget, path: str, headers: Mapping[str, str], timeout: float
    ) -> tuple[int, bytes]:
        return await self.send("GET", target, path, headers, timeout)

    async def post(
        self, target: NodeTarget, path: str, headers: Mapping[str, str], timeout: float
    ) -> tuple[int, bytes]:
        return await self.send("POST", target, path, headers, timeout)

    async def served_certificate(self, target: NodeTarget, timeout: float) -> str | None:
        return None  # only a TLS connection of our own sees the certificate (not the API server's proxy)


class DirectToPod(_ByMethod):
    """Straight to ``http://<pod IP>:<port>``, or ``https://`` verified for the node's name when it
    serves TLS, over one aiohttp session (the operator's HTTP client for everything: no second library),
    made on first use inside the running loop."""

    def __init__(self) -> None:
        self._session: aiohttp.ClientSession | None = None
        self._contexts: dict[bytes, ssl.SSLContext] = {}

    def _context(self, ca: bytes) -> ssl.SSLContext:
        """A verifying client context per CA bundle (a handful at most: one per cluster's CA)."""
        if ca not in self._contexts:
            if len(self._contexts) >= _MOST_CONTEXTS:
                self._contexts.clear()  # CAs rotated many times over: start afresh
            self._contexts[ca] = ssl.create_default_context(cadata=ca.decode() if ca else None)
        return self._contexts[ca]

    async def served_certificate(self, target: NodeTarget, timeout: float) -> str | None:
        if target.tls is None or not target.pod_ip:
            return None
        try:
            _, writer = await asyncio.wait_for(
                asyncio.open_connection(
                    target.pod_ip,
                    target.port,
                    ssl=self._context(target.tls.ca),
                    server_hostname=target.tls.server_name,
                ),
                timeout,
            )
        except (OSError, TimeoutError):  # ssl.SSLError is an OSError: a refused certificate is unknown
            return None
        served = writer.get_extra_info("ssl_object").getpeercert()
        # Closed at once, with no TLS goodbye: a node need not answer one, and the probe must not wait.
        writer.transport.abort()
        return str(served["serialNumber"]).lower() if served and "serialNumber" in served else None

    async def send(
        self,
        method: str,
        target: NodeTarget,
        path: str,
        headers: Mapping[str, str],
        timeout: float,
        body: bytes | None = None,
    ) -> tuple[int, bytes]:
        if not target.pod_ip:
            raise Unreachable(f"pod {target.pod} has no IP yet")
        if self._session is None:
            # No proxy or credentials from the environment (trust_env stays off): a node is on the pod
            # network, and the admin key goes to it alone.
            self._session = aiohttp.ClientSession()
        tls = target.tls
        scheme = "http" if tls is None else "https"
        try:
            async with self._session.request(
                method,
                f"{scheme}://{target.pod_ip}:{target.port}{path}",
                headers=dict(headers),
                data=body,
                timeout=aiohttp.ClientTimeout(total=timeout),
                ssl=self._context(tls.ca) if tls is not None else True,
                server_hostname=tls.server_name if tls is not None else None,
            ) as answer:
                return answer.status, await answer.read()
        except aiohttp.ClientConnectorCertificateError as error:
            # Not "unreachable": the node answers with a certificate that must not be trusted.
            raise CertificateRefused(
                f"pod {target.pod}'s certificate is not trusted for {tls.server_name if tls else ''}: "
                f"{error.certificate_error}"
            ) from error
        except aiohttp.ClientConnectionError as error:  # refused, reset, closed before an answer
            raise Unreachable(str(error) or type(error).__name__) from error
        except TimeoutError as error:
            raise Unreachable(f"no answer within {timeout:g} s") from error

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()


class ApiServerProxy(_ByMethod):
    """Through ``/api/v1/namespaces/<ns>/pods/<pod>:<port>/proxy``, with the operator's own credentials."""

    def __init__(self, kube: Kube) -> None:
        self._kube = kube

    async def send(
        self,
        method: str,
        target: NodeTarget,
        path: str,
        headers: Mapping[str, str],
        timeout: float,
        body: bytes | None = None,
    ) -> tuple[int, bytes]:
        try:
            code, answer = await self._kube.proxy(
                method,
                target.namespace,
                target.pod,
                target.port,
                path,
                headers=headers,
                timeout=timeout,
                body=body,
                scheme="http" if target.tls is None else "https",
            )
        except errors.Unavailable as error:  # no answer from the API server, or a time-out
            raise Unreachable(str(error)) from error
        if code in (502, 503) and b"error trying to reach service" in answer:
            raise Unreachable(f"the API server could not reach pod {target.pod}")
        return code, answer


RAFT_STAT_PATH = "/raft_stat?console=1"
"""braft's status page as text. brpc answers its built-in pages with HTML to every client but curl,
unless ``console=1`` is asked; typesense-server 0.24.1 does so, and aiohttp is not curl."""
# A line of the text page, or a <br>-separated line of the HTML one (should a proxy drop the query).
_LAST_LOG = re.compile(rb"(?:^|<br>)last_log_id: \(index=(\d+),term=(\d+)\)", re.MULTILINE)


# braft writes each peer as ip:port:index; Typesense's index is the node's API port.
_PEERS = re.compile(rb"(?:^|<br>)peers:((?: [^\s<]+)*)", re.MULTILINE)


def parse_last_log(raft_stat: bytes) -> tuple[int, int] | None:
    """(term, index) of the last entry in the node's raft log, from braft's ``/raft_stat`` page."""
    found = _LAST_LOG.search(raft_stat)
    return (int(found.group(2)), int(found.group(1))) if found else None


def peer_address(ip: str, port: int | str) -> str | None:
    """``ip:port`` in one canonical form (IPv6 in brackets), so that braft's peers and pod IPs compare;
    None when ``ip`` is not an IP address (a host name says nothing about which pod it is)."""
    try:
        parsed = ipaddress.ip_address(ip.strip("[]"))
    except ValueError:
        return None
    return f"[{parsed}]:{port}" if parsed.version == 6 else f"{parsed}:{port}"


def parse_raft_peers(raft_stat: bytes) -> tuple[str, ...] | None:
    """The canonical ``ip:peering_port`` of each peer in the node's raft configuration; None when the
    page names none, or names one that is not an IP address (then nothing is compared)."""
    found = _PEERS.search(raft_stat)
    if found is None:
        return None
    peers = []
    for peer in found.group(1).decode(errors="replace").split():
        host_and_port = peer.rsplit(":", 1)[0]  # without braft's index (Typesense's API port)
        host, _, port = host_and_port.rpartition(":")
        address = peer_address(host, port) if port.isdigit() else None
        if address is None:
            return None
        peers.append(address)
    return tuple(peers) or None


def _metric(answer: tuple[int, dict[str, Any]] | None, name: str) -> int | None:
    """A counter of /metrics.json (Typesense writes its numbers as strings), or None."""
    if answer is None or answer[0] != 200:
        return None
    value = answer[1].get(name)
    return int(value) if isinstance(value, (int, str)) and str(value).isdigit() else None


def _json(body: bytes) -> dict[str, Any]:
    try:
        parsed = json.loads(body)
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


async def _probe_one(
    addressing: NodeAddressing, target: NodeTarget, api_key: str, timeout: float
) -> NodeProbe:
    async def get(port_target: NodeTarget, path: str, headers: Mapping[str, str]) -> tuple[int, bytes] | None:
        """The answer, or None when there was none; anything else is not "unreachable"."""
        try:
            return await addressing.get(port_target, path, headers, timeout)
        except Unreachable:
            return None
        except Exception as error:
            _logger.exception("probing %s of pod %s failed unexpectedly", path, target.pod)
            raise ProbeFailed(
                f"probing {path} of pod {target.pod} failed unexpectedly ({type(error).__name__}); "
                "no quorum decision is taken on a failed probe"
            ) from error

    async def ask(path: str, headers: Mapping[str, str]) -> tuple[int, dict[str, Any]] | None:
        answer = await get(target, path, headers)
        return None if answer is None else (answer[0], _json(answer[1]))

    async def raft_stat() -> bytes:
        if target.peering_port is None:
            return b""
        # braft's own port: always plain (Typesense has no TLS for raft).
        answer = await get(replace(target, port=target.peering_port, tls=None), RAFT_STAT_PATH, {})
        return answer[1] if answer is not None and answer[0] == 200 else b""

    async def served_serial() -> str | None:
        return await addressing.served_certificate(target, timeout) if target.tls is not None else None

    status, health, raft, metrics, serial = await asyncio.gather(
        ask("/status", {API_KEY_HEADER: api_key}),
        ask("/health", {}),
        raft_stat(),
        ask("/metrics.json", {API_KEY_HEADER: api_key}),
        served_serial(),
    )
    state = committed = None
    if status is not None and status[0] == 200:
        state = status[1].get("state")
        committed_value = status[1].get("committed_index")
        committed = int(committed_value) if isinstance(committed_value, int) else None
    health_ok = resource_error = None
    if health is not None:
        health_ok = health[0] == 200 and health[1].get("ok") is True
        resource_error = health[1].get("resource_error")
    return NodeProbe(
        index=target.index,
        reachable=status is not None or health is not None,
        state=state,
        committed_index=committed,
        health_ok=health_ok,
        resource_error=resource_error,
        kubelet_ready=target.kubelet_ready,
        held_back=target.held_back,
        running_since=target.running_since,
        unready_since=target.unready_since,
        disk_used_bytes=_metric(metrics, "system_disk_used_bytes"),
        disk_total_bytes=_metric(metrics, "system_disk_total_bytes"),
        last_log=parse_last_log(raft),
        raft_peers=parse_raft_peers(raft),
        address=peer_address(target.pod_ip, target.peering_port)
        if target.pod_ip and target.peering_port
        else None,
        certificate_serial=serial,
        status_silent=status is None and health is not None,
    )


async def probe_nodes(
    addressing: NodeAddressing,
    targets: Sequence[NodeTarget],
    api_key: str,
    *,
    timeout: float = 2.0,
    concurrency: int = 8,
) -> list[NodeProbe]:
    """Probe every target, at most ``concurrency`` at once, each request bounded by ``timeout``."""
    gate = asyncio.Semaphore(concurrency)

    async def bounded(target: NodeTarget) -> NodeProbe:
        async with gate:
            return await _probe_one(addressing, target, api_key, timeout)

    return list(await asyncio.gather(*(bounded(t) for t in targets)))
