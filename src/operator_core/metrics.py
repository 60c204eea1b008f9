"""What every operator serves at ``/metrics``, in Prometheus' text format.

The core's own metrics are defined here, once, so that the three operators are
watched the same way: reconciles by kind and result, a reconcile-duration
histogram, the API requests of the operator's client by verb, leadership and
the watch caches' state. An operator's own metrics (a Typesense cluster's
quorum, a Monocle Job's runs) are defined in its ``controller`` room with
:data:`REGISTRY`. The process collector adds ``process_cpu_seconds_total`` and
``process_resident_memory_bytes``.

:func:`request_verb` is pure: the Kubernetes verb of one HTTP request, as the
API server's audit log would name it. :func:`serve_probes` is the thin HTTP
adapter (aiohttp) that :mod:`operator_core.runner` starts before anything else, so that a standby
replica answers too:

- ``/metrics``;
- ``/healthz``: 200 while the process answers, with a JSON body of what the operator shows
  (:meth:`operator_core.controller.Operator.health`: reconciles counted, when each kind's first pass
  ended, each watch cache's objects and whether it is synced and served); the liveness probe reads
  only the status;
- ``/readyz``: 200 for a standby that reads its Lease, and for a leader whose watch caches are
  synced (the process's :class:`ReplicaState`, which its operator holds); 503 with the reason otherwise.

Label values are kinds, verbs, results and object names: never a Secret value.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from aiohttp import web
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client import REGISTRY as _DEFAULT_REGISTRY

from operator_core import errors

__all__ = [
    "API_REQUESTS",
    "CACHES_SYNCED",
    "LEADER",
    "RECONCILES",
    "RECONCILE_SECONDS",
    "REGISTRY",
    "ReplicaState",
    "count_request",
    "request_verb",
    "serve_probes",
    "timed_reconcile",
]

REGISTRY: CollectorRegistry = _DEFAULT_REGISTRY
"""The one registry a process serves (with the process collector: CPU seconds, resident memory)."""

RECONCILES = Counter(
    "operator_reconciles_total",
    "Reconciles run, by custom resource kind and result (success, error, invalid_spec).",
    ["kind", "result"],
    registry=REGISTRY,
)
RECONCILE_SECONDS = Histogram(
    "operator_reconcile_duration_seconds",
    "Time one reconcile took, by custom resource kind (waiting for the reconcile gate excluded).",
    ["kind"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0),
    registry=REGISTRY,
)
API_REQUESTS = Counter(
    "operator_api_requests_total",
    "Requests of the operator's API client to the API server, by verb (get, list, watch, create, "
    "patch, update, delete) and the answer's status code class (2xx, 4xx, 5xx).",
    ["verb", "code"],
    registry=REGISTRY,
)
LEADER = Gauge(
    "operator_leader",
    "1 while this replica holds the leader Lease (or runs without leader election), else 0.",
    registry=REGISTRY,
)
CACHES_SYNCED = Gauge(
    "operator_watch_caches_synced",
    "1 once every watch cache of this replica has listed its kind, else 0.",
    registry=REGISTRY,
)


@contextmanager
def timed_reconcile(kind: str) -> Iterator[None]:
    """Count one reconcile of ``kind`` and time it; an exception counts as ``error`` (InvalidSpec as
    ``invalid_spec``) and goes on."""
    started = time.perf_counter()
    result = "error"
    try:
        yield
        result = "success"
    except errors.InvalidSpec:
        result = "invalid_spec"
        raise
    finally:
        RECONCILE_SECONDS.labels(kind).observe(time.perf_counter() - started)
        RECONCILES.labels(kind, result).inc()


_WRITE_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


def request_verb(method: str, path: str, params: Mapping[str, Any]) -> str:
    """The Kubernetes verb of a request: ``watch``, ``list`` (a collection), ``get`` (one object or a
    subresource, or a discovery path), or the write verbs (pure).

    ``/api/v1/namespaces/ns/pods`` is a list, ``.../pods/p`` a get, ``.../pods/p/status`` a get;
    ``/api/v1/namespaces/ns`` is a get of a namespace; ``DELETE`` of a collection is
    ``deletecollection``.
    """
    segments = [part for part in path.split("?", 1)[0].split("/") if part]
    if segments[:1] == ["api"]:
        resource = segments[2:]
    elif segments[:1] == ["apis"]:
        resource = segments[3:]
    else:
        resource = []  # /version, /openapi, /healthz: not a resource
    if len(resource) >= 2 and resource[0] == "namespaces" and len(resource) != 2:
        resource = resource[2:]
    collection = len(resource) == 1
    upper = method.upper()
    if upper == "GET":
        if str(params.get("watch", "")).lower() in ("1", "true"):
            return "watch"
        return "list" if collection else "get"
    if upper == "DELETE" and collection:
        return "deletecollection"
    return _WRITE_VERBS.get(upper, upper.lower())


def count_request(method: str, path: str, params: Mapping[str, Any], status: int) -> None:
    """Count one answered request of the operator's client."""
    API_REQUESTS.labels(request_verb(method, path, params), f"{status // 100}xx").inc()


class ReplicaState:
    """Whether this replica leads, whether its watch caches are synced, and whether a standby reaches
    the Lease: /readyz and two gauges."""

    def __init__(self) -> None:
        self._leading = False
        self._synced = False
        self._lease_reachable = True

    def leading(self, value: bool) -> None:
        self._leading = value
        LEADER.set(1 if value else 0)
        if not value:
            self.caches_synced(False)

    def caches_synced(self, value: bool) -> None:
        self._synced = value
        CACHES_SYNCED.set(1 if value else 0)

    def lease_reachable(self, value: bool) -> None:
        self._lease_reachable = value

    def not_ready_because(self) -> str | None:
        """None when ready: a leader once its caches are synced (it acts on them), a standby while it
        reads the Lease (it could take over); else why not."""
        if self._leading:
            return None if self._synced else "the watch caches are not synced yet"
        return None if self._lease_reachable else "a standby that cannot read its Lease cannot take over"

    def ready(self) -> bool:
        return self.not_ready_because() is None


async def _metrics(_: web.Request) -> web.Response:
    body = generate_latest(REGISTRY)
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})


def _alive(health: Callable[[], dict[str, Any]] | None) -> Callable[[web.Request], Awaitable[web.Response]]:
    async def answer(_: web.Request) -> web.Response:
        return web.json_response({"status": "ok", **(health() if health is not None else {})})

    return answer


def _ready(replica: ReplicaState) -> Callable[[web.Request], Awaitable[web.Response]]:
    async def answer(_: web.Request) -> web.Response:
        reason = replica.not_ready_because()
        if reason is None:
            return web.Response(text="ok\n")
        return web.Response(status=503, text=f"{reason}\n")

    return answer


async def serve_probes(
    host: str, port: int, replica: ReplicaState, *, health: Callable[[], dict[str, Any]] | None = None
) -> web.AppRunner:
    """Serve ``/healthz`` (with what ``health`` shows), ``/readyz`` (what ``replica`` says) and
    ``/metrics`` on ``host:port`` until the runner is cleaned up."""
    app = web.Application()
    app.router.add_get("/metrics", _metrics)
    app.router.add_get("/healthz", _alive(health))
    app.router.add_get("/readyz", _ready(replica))
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    return runner
