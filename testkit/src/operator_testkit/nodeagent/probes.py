"""Probes, as the kubelet runs them: thresholds (pure) and the three probe actions.

:class:`ProbeSpec` reads a probe with the API's defaults; :class:`ProbeTracker`
turns single results into the probe's state with ``successThreshold`` and
``failureThreshold``: a readiness probe starts failed, a liveness or startup
probe starts passed, and the state flips only after that many results in a row.
:func:`probe_once` runs one ``httpGet`` (2xx and 3xx pass), ``tcpSocket``
(a connection opens) or ``exec`` (exit code 0, through a callback the pod
worker gives) within ``timeoutSeconds``. Probes only ever go to loopback addresses.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

__all__ = ["ExecProbe", "ProbeSpec", "ProbeTracker", "probe_once", "resolve_port"]

Manifest = Mapping[str, Any]
ExecProbe = Callable[[Sequence[str], float], Awaitable[int]]


@dataclass(frozen=True)
class ProbeSpec:
    """A probe's timing and thresholds with the API defaults filled in."""

    initial_delay: float = 0.0
    period: float = 10.0
    timeout: float = 1.0
    success_threshold: int = 1
    failure_threshold: int = 3

    @classmethod
    def of(cls, probe: Manifest) -> ProbeSpec:
        return cls(
            initial_delay=float(probe.get("initialDelaySeconds") or 0),
            period=float(probe.get("periodSeconds") or 10),
            timeout=float(probe.get("timeoutSeconds") or 1),
            success_threshold=int(probe.get("successThreshold") or 1),
            failure_threshold=int(probe.get("failureThreshold") or 3),
        )


@dataclass
class ProbeTracker:
    """The state of one probe of one container run; :meth:`observe` feeds it a result."""

    spec: ProbeSpec
    passing: bool
    successes: int = 0
    failures: int = 0

    def observe(self, ok: bool) -> bool:
        """Record one result; returns whether the probe now counts as passing."""
        if ok:
            self.successes, self.failures = self.successes + 1, 0
            if self.successes >= self.spec.success_threshold:
                self.passing = True
        else:
            self.successes, self.failures = 0, self.failures + 1
            if self.failures >= self.spec.failure_threshold:
                self.passing = False
        return self.passing


def resolve_port(port: int | str, container: Manifest) -> int | None:
    """A probe's port: a number, or the name of one of the container's ports."""
    if isinstance(port, int):
        return port
    if port.isdigit():
        return int(port)
    for declared in container.get("ports") or []:
        if declared.get("name") == port:
            return int(declared["containerPort"])
    return None


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


async def probe_once(
    probe: Manifest,
    *,
    container: Manifest,
    pod_ip: str,
    http: httpx.AsyncClient,
    run_exec: ExecProbe,
) -> bool:
    """Run the probe's action once; True when it passes."""
    timeout = ProbeSpec.of(probe).timeout
    try:
        if "exec" in probe:
            return await run_exec(list(probe["exec"].get("command") or []), timeout) == 0
        action = probe.get("httpGet") or probe.get("tcpSocket")
        if action is None:
            return True  # grpc probes are not run yet; count them as passing
        host = action.get("host") or pod_ip
        port = resolve_port(action["port"], container)
        if port is None or not _loopback(host):
            return False  # never send a probe anywhere but loopback
        if "tcpSocket" in probe:
            _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()
            return True
        scheme = str(action.get("scheme", "HTTP")).lower()
        path = action.get("path") or "/"
        headers = {h["name"]: h["value"] for h in action.get("httpHeaders") or []}
        headers.setdefault("User-Agent", "kube-probe/1.35")
        answer = await http.get(f"{scheme}://{host}:{port}{path}", headers=headers, timeout=timeout)
        return 200 <= answer.status_code < 400
    except (OSError, TimeoutError, httpx.HTTPError):
        return False
