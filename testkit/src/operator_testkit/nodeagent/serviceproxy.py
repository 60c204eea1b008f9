"""A small service proxy: each ClusterIP:port forwards TCP to the Service's ready pods, as kube-proxy does.

Services get loopback ClusterIPs on the local control planes (see
:mod:`operator_testkit.controlplane`), so the agent can simply listen on
each ClusterIP:port and forward every connection to one of the Service's ready
endpoints (pod IP and ``targetPort``, a named target port resolved against the
pod's container ports), round robin, trying the next one when a pod refuses.
Anything on this machine (tests, operators, pods through their hosts files)
reaches a Service by its ClusterIP without knowing about the agent.

The API server's own Service, ``default/kubernetes``, has no selector: the API
server lists its own address as the endpoint, and refuses loopback ones. Here
it forwards to the API server the agent talks to, so that a pod's in-cluster
client (``KUBERNETES_SERVICE_HOST``) reaches it through its Service, as in a
real cluster; the serving certificate names the Service's ClusterIP.

:func:`service_backends` is pure; :class:`ServiceProxy` opens and closes the
listeners as Services come and go. Only loopback addresses are ever listened on
or connected to. A listener that cannot bind (another agent on the same control
plane serves it already) is retried at the next update.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import ipaddress
import itertools
import logging
import urllib.parse
from collections.abc import Iterable, Mapping
from typing import Any

from operator_core.conditions import reports_true

__all__ = ["Backend", "Listener", "ServiceProxy", "api_server_backend", "service_backends"]

log = logging.getLogger(__name__)

CONNECT_TIMEOUT = 2.0
Manifest = Mapping[str, Any]
Listener = tuple[str, int]  # ClusterIP, port
Backend = tuple[str, int]  # pod IP, target port


def _loopback(address: object) -> bool:
    try:
        return ipaddress.ip_address(str(address)).is_loopback
    except ValueError:
        return False


def _serving(pod: Manifest, ready_only: bool) -> bool:
    status = pod.get("status") or {}
    if pod["metadata"].get("deletionTimestamp") or status.get("phase") in ("Succeeded", "Failed"):
        return False
    if not _loopback(status.get("podIP")):
        return False
    return reports_true(pod) or not ready_only


def _target_port(pod: Manifest, target: int | str) -> int | None:
    if isinstance(target, int):
        return target
    if target.isdigit():
        return int(target)
    for container in (pod.get("spec") or {}).get("containers") or []:
        for port in container.get("ports") or []:
            if port.get("name") == target:
                return int(port["containerPort"])
    return None


def api_server_backend(server: str | None) -> Backend | None:
    """The API server's loopback address and port, from its URL (``https://127.0.0.1:6443``); None for
    any other address, which is never forwarded to (pure)."""
    if not server:
        return None
    parsed = urllib.parse.urlsplit(server)
    if not _loopback(parsed.hostname) or parsed.hostname is None:
        return None
    return parsed.hostname, parsed.port or 443


def service_backends(
    services: Iterable[Manifest], pods: Iterable[Manifest], api_server: Backend | None = None
) -> dict[Listener, list[Backend]]:
    """Every TCP ClusterIP:port on loopback, with its ready endpoints, in a stable order (pure); the
    ``default/kubernetes`` Service's port forwards to ``api_server``."""
    by_namespace: dict[str, list[Manifest]] = {}
    for pod in pods:
        by_namespace.setdefault(pod["metadata"]["namespace"], []).append(pod)
    table: dict[Listener, list[Backend]] = {}
    for service in services:
        metadata, spec = service.get("metadata", {}), service.get("spec", {})
        cluster_ip = spec.get("clusterIP")
        selector = spec.get("selector") or {}
        if (metadata.get("namespace"), metadata.get("name")) == ("default", "kubernetes"):
            if api_server is not None and _loopback(cluster_ip):
                for port in spec.get("ports") or []:
                    table[(str(cluster_ip), int(port["port"]))] = [api_server]
            continue
        if not cluster_ip or cluster_ip == "None" or not _loopback(cluster_ip) or not selector:
            continue
        chosen = [
            pod
            for pod in by_namespace.get(metadata["namespace"], [])
            if all((pod["metadata"].get("labels") or {}).get(k) == v for k, v in selector.items())
            and _serving(pod, ready_only=not spec.get("publishNotReadyAddresses"))
        ]
        for port in spec.get("ports") or []:
            if port.get("protocol", "TCP") != "TCP":
                continue
            backends = []
            for pod in chosen:
                target = _target_port(pod, port.get("targetPort", port["port"]))
                if target is not None:
                    backends.append((str(pod["status"]["podIP"]), target))
            table[(str(cluster_ip), int(port["port"]))] = sorted(backends)
    return table


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()  # a half-close travels on, as through a real proxy
    except (ConnectionError, OSError):
        writer.close()


class ServiceProxy:
    """Listeners on ClusterIP:port; :meth:`update` gives them the current backends."""

    def __init__(self) -> None:
        self._servers: dict[Listener, asyncio.Server] = {}
        self._backends: dict[Listener, list[Backend]] = {}
        self._turn = itertools.count()
        self._refused: set[Listener] = set()
        self._connections: set[asyncio.Task[None]] = set()

    @property
    def listening(self) -> list[Listener]:
        return sorted(self._servers)

    async def update(self, table: Mapping[Listener, list[Backend]]) -> None:
        self._backends = dict(table)
        for listener in [key for key in self._servers if key not in table]:
            self._servers.pop(listener).close()
        for listener in table:
            if listener in self._servers:
                continue
            host, port = listener
            try:
                self._servers[listener] = await asyncio.start_server(
                    functools.partial(self._accept, listener), host, port, reuse_address=True
                )
            except OSError as error:
                if listener not in self._refused:  # say it once, retry quietly
                    log.info("service proxy cannot listen on %s:%d yet: %s", host, port, error)
                    self._refused.add(listener)
                continue
            self._refused.discard(listener)
            log.info("service proxy listening on %s:%d", host, port)

    async def _accept(
        self, listener: Listener, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._connections.add(task)
        try:
            await self._forward(listener, reader, writer)
        except asyncio.CancelledError:
            # stop() cancels open connections; re-raised, asyncio's stream callback would log it as
            # an error of its own.
            pass
        finally:
            writer.close()
            if task is not None:
                self._connections.discard(task)

    async def _forward(
        self, listener: Listener, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        backends = self._backends.get(listener) or []
        if not backends:
            return  # no ready endpoint: the connection is closed, as kube-proxy rejects it
        start = next(self._turn)
        for step in range(len(backends)):
            host, port = backends[(start + step) % len(backends)]
            if not _loopback(host):
                continue
            try:
                upstream_reader, upstream_writer = await asyncio.wait_for(
                    asyncio.open_connection(host, port), CONNECT_TIMEOUT
                )
            except (OSError, TimeoutError):
                continue
            try:
                await asyncio.gather(_pipe(reader, upstream_writer), _pipe(upstream_reader, writer))
            finally:
                upstream_writer.close()
            return

    async def stop(self) -> None:
        for server in self._servers.values():
            server.close()
        self._servers.clear()
        for task in list(self._connections):
            task.cancel()
        with contextlib.suppress(Exception):
            await asyncio.gather(*self._connections, return_exceptions=True)
