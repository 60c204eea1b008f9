"""Benchmark: how the Typesense operator scales with the number of clusters, beside the Go operator if given.

Runs a real local control plane and the typesense-operator process (as its own
ServiceAccount), with no nodes: there are no Nodes, so every Typesense pod
stays Pending and no cluster ever becomes Ready. It measures:

- seconds from creating a TypesenseCluster to all of its children existing, p50 and p95: for
  ``--sequential`` clusters created one at a time (``--sequential-gap`` apart), then for ``--burst``
  clusters created at once;
  measured by metadata-only watches of the children's kinds (until the last child was seen; the
  delivery of a watch event, a few milliseconds, is in that figure) and, as ``audited``, from the API
  server's audit log: until it completed the first write of the last child (the same clock as the
  create's);
- one idle window (``--idle-seconds``) with N clusters for each N of ``--sizes``, opened once the
  operator has written nothing for 10 s (or after 90 s of waiting for that): the operator's API
  requests by verb (from the API server's audit log, by the operator's user name, each request
  counted once), its CPU seconds (utime + stime from /proc/<pid>/stat over the window), its RSS,
  and the API server's CPU seconds over the same window;
- a cold start: the largest size's clusters are created while no operator runs, on a fresh control
  plane, then the operator starts; seconds until every cluster is reconciled (all children exist
  and the operator has written a status: observedGeneration for ours, a condition for the Go one),
  the requests and writes that took, CPU seconds, and peak RSS (VmHWM);
- a restart over those clusters once reconciled (an upgrade, a crash): the operator stopped and started
  again; seconds until it has reconciled every cluster once (ours reports the moment on its
  /healthz; the Go one has no such signal), and the requests, writes, CPU and peak RSS of the first
  minute.

The population grows: the sequential clusters, then the burst on top of them, then (larger sizes)
clusters created at once; an idle window runs whenever the population equals a size. The largest
size is reached by the cold start (on its own control plane), unless ``--skip-cold-start``.

With ``--go-operator PATH`` (the manager of github.com/akyriako/typesense-operator, and its CRDs in
``--go-crds DIR``) the same scenarios run again for it on fresh control planes, after ours has
stopped. Both operators serve the same CRD (typesenseclusters.ts.opentelekomcloud.com), so they
never share a control plane. The Go manager runs out of cluster with its own ServiceAccount bound
to cluster-admin, leader election off, metrics off, its health probe on a free 127.0.0.1 port,
and info-level logs. The result has both sides and the ratios ours/go.

``--ready`` adds one scenario for ours only: ``--ready-clusters`` clusters made Ready by real
typesense-server pods on three real nodes, then an idle window. The Go operator is not run in it
yet (out of cluster it would probe the nodes through the API server's pod proxy, which reaches real
nodes' pods; a side-by-side run is still to be done).

Usage: python bench/scale.py [--sizes 20,100,1000] [--idle-seconds 60] [--skip-cold-start | --only-cold-start]
       [--go-operator PATH [--go-crds DIR]] [--ready] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import os
import shutil
import ssl
import statistics
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

import httpx

from operator_testkit.assertions import WRITE_VERBS
from operator_testkit.controlplane import ControlPlane
from operator_testkit.drivers.go_typesense import GO_OPERATOR_USER, go_operator_process
from operator_testkit.nodes.cluster import LocalCluster
from operator_testkit.nodes.images import typesense_image
from operator_testkit.operators import OperatorProcess, service_account_kubeconfig

ROOT = Path(__file__).resolve().parent.parent
API = "ts.opentelekomcloud.com/v1alpha1"
CLUSTERS = "/apis/ts.opentelekomcloud.com/v1alpha1/namespaces/{namespace}/typesenseclusters"
NAMESPACE = "bench"
OUR_USER = "system:serviceaccount:typesense-system:typesense-operator"
GO_USER = GO_OPERATOR_USER
SECRETS = "/api/v1/namespaces/{namespace}/secrets"
CONFIGMAPS = "/api/v1/namespaces/{namespace}/configmaps"
SERVICES = "/api/v1/namespaces/{namespace}/services"
STATEFULSETS = "/apis/apps/v1/namespaces/{namespace}/statefulsets"
PODS = "/api/v1/namespaces/{namespace}/pods"
# (collection path, child name): what both operators make for a cluster; ours adds a PDB.
GO_CHILDREN = (
    (SECRETS, "{name}-admin-key"),
    (CONFIGMAPS, "{name}-nodeslist"),
    (SERVICES, "{name}-sts-svc"),
    (SERVICES, "{name}-svc"),
    (STATEFULSETS, "{name}-sts"),
)
# Ours make the same five on creation: the PodDisruptionBudget comes with the first ready node, which
# no cluster here gets (no node runs its pods).
OUR_CHILDREN = GO_CHILDREN
METADATA_ONLY = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cluster(name: str, namespace: str, replicas: int) -> dict[str, Any]:
    """A TypesenseCluster both CRDs accept (the Go one requires storage)."""
    return {
        "apiVersion": API,
        "kind": "TypesenseCluster",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "image": "typesense/typesense:27.1",
            "replicas": replicas,
            "storage": {"size": "100Mi", "storageClassName": "standard"},
        },
    }


# -- the operator process and what /proc says of it


def proc_status_mib(pid: int, field: str) -> float:
    """A VmRSS / VmHWM line of /proc/<pid>/status, in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    return 0.0


def cpu_seconds(pid: int) -> float:
    """utime + stime of the process so far (all its threads)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


class Operator(Protocol):
    @property
    def pid(self) -> int: ...

    def start(self, timeout: float = 60.0) -> None: ...

    def stop(self) -> int | None: ...

    def log(self) -> str: ...

    def health(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class Side:
    """One operator under test: who it is to the API server, its CRDs, its children, how to run it."""

    name: str
    user: str
    crds: Path
    children: tuple[tuple[str, str], ...]
    reconciled: Callable[[Mapping[str, Any]], bool]
    launch: Callable[[ControlPlane, Path], Operator]


def our_side() -> Side:
    def launch(plane: ControlPlane, home: Path) -> Operator:
        rbac = ROOT / "charts" / "typesense-operator" / "files" / "rbac-rules.yaml"
        kubeconfig = service_account_kubeconfig(plane, rbac, home / "operator.kubeconfig")
        return OperatorProcess("typesense-operator", kubeconfig, home / "operator.log")

    def reconciled(obj: Mapping[str, Any]) -> bool:
        status = obj.get("status") or {}
        return bool(status.get("observedGeneration") == obj["metadata"]["generation"])

    return Side("python", OUR_USER, ROOT / "deploy" / "crds", OUR_CHILDREN, reconciled, launch)


def go_side(binary: Path, crds: Path) -> Side:
    def launch(plane: ControlPlane, home: Path) -> Operator:
        return go_operator_process(plane, binary, home)

    def reconciled(obj: Mapping[str, Any]) -> bool:
        return bool((obj.get("status") or {}).get("conditions"))

    return Side("go", GO_USER, crds, GO_CHILDREN, reconciled, launch)


class BenchControlPlane(ControlPlane):
    """The test kit's control plane, with the controller manager's and the scheduler's client limits raised.

    At their defaults (20 and 50 requests a second) the StatefulSet controller takes about ten minutes
    to make the 3,000 pods and claims of 1,000 clusters, and no operator is idle meanwhile.
    """

    def _spawn(self, name: str, argv: list[str]) -> subprocess.Popen[bytes]:
        if name in ("kube-controller-manager", "kube-scheduler"):
            argv = [*argv, "--kube-api-qps=500", "--kube-api-burst=1000"]
        return super()._spawn(name, argv)


# -- the API server, as admin (the bench's own reads are not the operator's)


class Admin:
    """A bare HTTP client with the control plane's admin certificate: creates, GETs, metadata lists."""

    def __init__(self, plane: ControlPlane) -> None:
        assert plane.pki is not None
        context = ssl.create_default_context(cafile=str(plane.pki.ca_cert))
        context.load_cert_chain(str(plane.pki.admin_cert), str(plane.pki.admin_key))
        self.http = httpx.AsyncClient(
            base_url=plane.api_url,
            verify=context,
            trust_env=False,
            timeout=120,
            limits=httpx.Limits(max_connections=100, max_keepalive_connections=100),
        )

    async def close(self) -> None:
        await self.http.aclose()

    async def create(self, path: str, body: Mapping[str, Any]) -> None:
        answer = await self.http.post(path, json=body)
        if answer.status_code != 201:
            raise RuntimeError(f"POST {path}: {answer.status_code} {answer.text[:500]}")

    async def get(self, path: str) -> dict[str, Any]:
        answer = await self.http.get(path)
        answer.raise_for_status()
        return dict(answer.json())

    async def exists(self, path: str) -> bool:
        answer = await self.http.get(path)
        if answer.status_code == 404:
            return False
        answer.raise_for_status()
        return True

    async def items(self, path: str) -> list[dict[str, Any]]:
        answer = await self.http.get(path)
        answer.raise_for_status()
        return list(answer.json()["items"] or [])

    async def names(self, path: str) -> set[str]:
        answer = await self.http.get(path, headers={"Accept": METADATA_ONLY})
        answer.raise_for_status()
        return {item["metadata"]["name"] for item in answer.json()["items"] or []}


WATCH_METADATA_ONLY = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"


class Sightings:
    """When each child was first seen, and each cluster first seen reconciled, by watches of one namespace.

    The children's kinds are watched metadata-only, the clusters whole (their status says whether they
    are reconciled); each watch lists first, so what already exists counts as seen when listed.

    A watch sees a write a few milliseconds after the API server made it. Polling did not: under the
    load of a creation a round of GETs took 15 to 35 ms, a quantum as large as the differences measured,
    and its requests loaded the API server it was timing (more of them for a side with more children).
    Polled every second during a cold start, lists of every child kind and of the 1,000 clusters took
    a tenth to a fifth of the machine's two cores from the operator being timed.
    """

    def __init__(self, admin: Admin, side: Side, namespace: str) -> None:
        self.admin = admin
        self.side = side
        self._children = [(path.format(namespace=namespace), pattern) for path, pattern in side.children]
        self._clusters = CLUSTERS.format(namespace=namespace)
        self._paths = sorted({path for path, _ in self._children})
        self._first_seen: dict[tuple[str, str], float] = {}
        """(collection path, name): when first seen; for a cluster, when first seen reconciled."""
        self._touched: set[tuple[str, str]] = set()
        """What was first seen since a waiter last looked."""
        self._arrived = asyncio.Event()
        self._watches: list[asyncio.Task[None]] = []

    async def __aenter__(self) -> Sightings:
        loop = asyncio.get_running_loop()
        watched = [(path, False) for path in self._paths] + [(self._clusters, True)]
        opened = {path: loop.create_future() for path, _ in watched}
        self._watches = [
            asyncio.create_task(self._watch(path, whole, opened[path])) for path, whole in watched
        ]
        try:
            # A watch that fails before it opens fails the run here, not as a timeout later.
            await asyncio.wait_for(asyncio.gather(*opened.values()), timeout=30)
        except BaseException:
            await self.__aexit__()
            raise
        return self

    async def __aexit__(self, *_: object) -> None:
        for watch in self._watches:
            watch.cancel()
        await asyncio.gather(*self._watches, return_exceptions=True)

    def _saw(self, path: str, obj: Mapping[str, Any]) -> None:
        if path == self._clusters and not self.side.reconciled(obj):
            return
        key = (path, obj["metadata"]["name"])
        if key not in self._first_seen:
            self._first_seen[key] = time.monotonic()
            self._touched.add(key)
            self._arrived.set()

    async def _watch(self, path: str, whole: bool, opened: asyncio.Future[None]) -> None:
        listing, watching = ("application/json",) * 2 if whole else (METADATA_ONLY, WATCH_METADATA_ONLY)
        try:
            listed = await self.admin.http.get(path, headers={"Accept": listing})
            listed.raise_for_status()
            page = listed.json()
            for item in page.get("items") or []:
                self._saw(path, item)
            version = page["metadata"]["resourceVersion"]
            while True:  # the server ends a watch after its timeout: the next one goes on from there
                parameters = {"watch": "true", "resourceVersion": version, "timeoutSeconds": "1800"}
                async with self.admin.http.stream(
                    "GET", path, params=parameters, headers={"Accept": watching}, timeout=None
                ) as response:
                    response.raise_for_status()
                    if not opened.done():
                        opened.set_result(None)
                    async for line in response.aiter_lines():
                        if not line:
                            continue
                        event = json.loads(line)
                        if event["type"] == "ERROR":
                            raise RuntimeError(f"watching {path}: {event['object'].get('message')}")
                        version = event["object"]["metadata"]["resourceVersion"]
                        self._saw(path, event["object"])
        except Exception as error:
            if not opened.done():
                opened.set_exception(error)
            self._arrived.set()  # the waiter looks, and raises this
            raise

    async def all_seen(self, clusters: Collection[str], *, timeout: float) -> dict[str, float]:
        """Wait until every child of ``clusters`` was seen, or ``timeout``; for each cluster whose children
        were all seen, the monotonic time the last of them was."""
        return await self._until(clusters, reconciled=False, timeout=timeout)

    async def all_done(self, clusters: Collection[str], *, timeout: float) -> dict[str, float]:
        """As :meth:`all_seen`, and each cluster reconciled too (for ours, a status of its generation; for
        the Go one, a condition)."""
        return await self._until(clusters, reconciled=True, timeout=timeout)

    async def _until(
        self, clusters: Collection[str], *, reconciled: bool, timeout: float
    ) -> dict[str, float]:
        pending = {
            name: [(path, pattern.format(name=name)) for path, pattern in self._children]
            + ([(self._clusters, name)] if reconciled else [])
            for name in clusters
        }
        owner = {key: name for name, keys in pending.items() for key in keys}
        complete: dict[str, float] = {}
        looking_at: Collection[str] = list(pending)  # first every cluster, then those just touched
        self._touched.clear()
        deadline = time.monotonic() + timeout
        while True:
            for watch in self._watches:  # a watch that broke says why, rather than a timeout later
                if watch.done() and not watch.cancelled() and (error := watch.exception()) is not None:
                    raise error
            self._arrived.clear()
            for name in looking_at:
                keys = pending.get(name)
                if keys is not None and all(key in self._first_seen for key in keys):
                    complete[name] = max(self._first_seen[key] for key in keys)
                    del pending[name]
            left = deadline - time.monotonic()
            if not pending or left <= 0:
                return complete
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._arrived.wait(), timeout=left)
            looking_at = {owner[key] for key in self._touched if key in owner}
            self._touched.clear()


async def create_clusters(
    admin: Admin, names: Iterable[str], replicas: int, *, concurrency: int = 16
) -> dict[str, float]:
    """Create the clusters, ``concurrency`` at a time; the monotonic time just before each POST."""
    gate = asyncio.Semaphore(concurrency)
    started: dict[str, float] = {}

    async def one(name: str) -> None:
        async with gate:
            started[name] = time.monotonic()
            await admin.create(CLUSTERS.format(namespace=NAMESPACE), cluster(name, NAMESPACE, replicas))

    await asyncio.gather(*(one(name) for name in names))
    return started


# -- the audit log


class AuditTail:
    """One user's requests in the API server's audit log, read on from where the last read stopped.

    A long-running request (watch, pod log, proxy) has two audit events (ResponseStarted,
    ResponseComplete): each request counts once, at its first event.
    """

    def __init__(self, path: Path, user: str) -> None:
        self.path = path
        self.user = user
        self._needle = f'"username":"{user}"'.encode()
        self._offset = 0
        self._seen: set[str] = set()

    def new_requests(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        with self.path.open("rb") as log:
            log.seek(self._offset)
            data = log.read()
        end = data.rfind(b"\n") + 1
        self._offset += end
        found = []
        for line in data[:end].splitlines():
            if self._needle not in line:
                continue
            event = json.loads(line)
            if event["user"]["username"] != self.user or event["auditID"] in self._seen:
                continue
            self._seen.add(event["auditID"])
            found.append(event)
        return found


def resource_of(event: Mapping[str, Any]) -> str:
    ref = event.get("objectRef") or {}
    if "resource" not in ref:
        return str(event.get("requestURI", "?")).split("?", 1)[0]
    return "/".join(part for part in (ref["resource"], ref.get("subresource")) if part)


def summary(requests: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "total": len(requests),
        "writes": sum(1 for e in requests if e["verb"] in WRITE_VERBS),
        "errors": sum(1 for e in requests if (e.get("responseStatus") or {}).get("code", 0) >= 400),
        "by_verb": dict(Counter(e["verb"] for e in requests).most_common()),
        "by_resource": dict(Counter(f"{e['verb']} {resource_of(e)}" for e in requests).most_common()),
    }


# -- the scenarios


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def spread(values: list[float]) -> dict[str, float]:
    return {
        "p50": round(statistics.median(values), 3),
        "p95": round(percentile(values, 0.95), 3),
        "max": round(max(values), 3),
    }


def names(start: int, stop: int) -> list[str]:
    return [f"c{i:04d}" for i in range(start, stop)]


@dataclass
class Run:
    """One side on one control plane: its operator running, the admin client and the audit tail."""

    side: Side
    plane: ControlPlane
    admin: Admin
    operator: Operator
    audit: AuditTail
    settings: argparse.Namespace

    @classmethod
    def of(
        cls, side: Side, plane: ControlPlane, admin: Admin, operator: Operator, settings: argparse.Namespace
    ) -> Run:
        return cls(side, plane, admin, operator, AuditTail(plane.audit_log, side.user), settings)

    def apiserver_pid(self) -> int:
        return next(c.pid for c in self.plane.state().components if c.name == "kube-apiserver")


@dataclass(frozen=True)
class Timed:
    """Seconds from creating a cluster to all of its children existing, measured two ways."""

    watched: float
    """Until the bench's watches of the children's kinds had seen every one of them (the delivery of a
    watch event is part of the figure: a few milliseconds)."""
    audited: float | None
    """Until the API server finished the first write of the last child, by its audit log (no poll
    in the figure; the same clock as the create's, this machine's); None if not found there."""


def children_written_at(requests: Iterable[Mapping[str, Any]], side: Side, cluster_name: str) -> float | None:
    """When the API server completed the first successful write of the last of the cluster's children."""
    wanted = {(path.rsplit("/", 1)[1], pattern.format(name=cluster_name)) for path, pattern in side.children}
    first: dict[tuple[str, str], float] = {}
    for event in requests:
        ref = event.get("objectRef") or {}
        key = (ref.get("resource"), ref.get("name"))
        code = (event.get("responseStatus") or {}).get("code")
        if (
            key not in wanted
            or ref.get("subresource")
            or event["verb"] not in WRITE_VERBS
            or code not in (200, 201)
        ):
            continue
        at = datetime.fromisoformat(event["stageTimestamp"]).timestamp()
        first[key] = min(first.get(key, at), at)
    return max(first.values()) if len(first) == len(wanted) else None


async def audited_seconds(run: Run, started: Mapping[str, float]) -> dict[str, float]:
    """For each cluster in ``started`` (its wall-clock create time), the audited seconds to its children;
    reads the operator's audit tail on (waiting a little for the log to hold every write)."""
    requests: list[dict[str, Any]] = []
    found: dict[str, float] = {}
    for _ in range(20):
        requests.extend(run.audit.new_requests())
        for name, at in started.items():
            written = children_written_at(requests, run.side, name)
            if written is not None:
                found[name] = written - at
        if len(found) == len(started):
            break
        await asyncio.sleep(0.1)
    return found


async def time_sequential(run: Run, sightings: Sightings, name: str, timeout: float = 60) -> Timed | None:
    """Seconds from creating the cluster to all its children existing.

    None when they are not all there after ``timeout``: the operator missed the new cluster.
    """
    run.audit.new_requests()  # what came before is not this cluster's
    started, started_at = time.monotonic(), time.time()
    await run.admin.create(
        CLUSTERS.format(namespace=NAMESPACE), cluster(name, NAMESPACE, run.settings.replicas)
    )
    seen = await sightings.all_seen([name], timeout=timeout)
    if name not in seen:
        return None
    audited = await audited_seconds(run, {name: started_at})
    return Timed(seen[name] - started, audited.get(name))


async def pods_made(run: Run, wanted: int, *, timeout: float, still: float = 10) -> int:
    """Wait until the StatefulSets' pods all exist (the controller manager makes them after the operator
    is done), their number has not grown for ``still`` seconds, or ``timeout``; how many exist.

    The Go operator deletes Pending pods (as unscheduled) while the StatefulSets make them again:
    their number then stays below ``wanted``, and only stops growing.
    """
    deadline = time.monotonic() + timeout
    most, grew = 0, time.monotonic()
    while True:
        count = len(await run.admin.names(PODS.format(namespace=NAMESPACE)))
        now = time.monotonic()
        if count > most:
            most, grew = count, now
        if count >= wanted or now - grew >= still or now > deadline:
            return count
        await asyncio.sleep(2)


QUIET_SECONDS = 10.0
"""An idle window starts once the operator has written nothing for this long: the scheduler marks
thousands of new pods unschedulable for a while after they exist, and each mark is a status change
the operator reports, which is work, not idling."""
QUIET_TIMEOUT_SECONDS = 90.0
"""The longest wait for that quiet (an operator that writes all the time never gets it)."""


async def writes_stopped(run: Run, *, quiet: float, timeout: float) -> float | None:
    """Wait until the operator made no write for ``quiet`` seconds (reading its audit log); the seconds
    that took, or None when ``timeout`` came first. Leaves the audit tail at the end of that wait."""
    started = last_write = time.monotonic()
    while time.monotonic() - last_write < quiet:
        if time.monotonic() - started > timeout:
            return None
        await asyncio.sleep(1.0)
        if any(e["verb"] in WRITE_VERBS for e in run.audit.new_requests()):
            last_write = time.monotonic()
    return round(time.monotonic() - started, 1)


async def idle(run: Run, population: int) -> dict[str, Any]:
    """Wait until all clusters are reconciled and all their pods made, let things settle, then watch one
    idle window."""
    everything = names(0, population)
    async with Sightings(run.admin, run.side, NAMESPACE) as sightings:
        finished = await sightings.all_done(everything, timeout=120 + population)
    pods = await pods_made(run, population * run.settings.replicas, timeout=120 + population / 2)
    await asyncio.sleep(run.settings.settle_seconds)
    settled = await writes_stopped(run, quiet=QUIET_SECONDS, timeout=QUIET_TIMEOUT_SECONDS)
    apiserver = run.apiserver_pid()
    cpu_before, apiserver_before = cpu_seconds(run.operator.pid), cpu_seconds(apiserver)
    await asyncio.sleep(run.settings.idle_seconds)
    cpu, apiserver_cpu = cpu_seconds(run.operator.pid), cpu_seconds(apiserver)
    return {
        "clusters": population,
        "unreconciled_before": population - len(finished),
        "seconds_until_writes_stopped": settled,
        "pods": pods,
        "seconds": run.settings.idle_seconds,
        "requests": summary(run.audit.new_requests()),
        "cpu_seconds": round(cpu - cpu_before, 2),
        "rss_mib": round(proc_status_mib(run.operator.pid, "VmRSS"), 1),
        "apiserver_cpu_seconds": round(apiserver_cpu - apiserver_before, 2),
    }


async def cold_start(run: Run, clusters: int) -> dict[str, Any]:
    """Start the operator (already built, not running) with ``clusters`` clusters it has never seen."""
    everything = names(0, clusters)
    await create_clusters(run.admin, everything, run.settings.replicas)
    async with Sightings(run.admin, run.side, NAMESPACE) as sightings:
        run.audit.new_requests()
        apiserver = run.apiserver_pid()
        apiserver_before = cpu_seconds(apiserver)
        started = time.monotonic()
        await asyncio.to_thread(run.operator.start)
        finished = await sightings.all_done(everything, timeout=300 + 2 * clusters)
    seconds = sorted(t - started for t in finished.values())
    apiserver_cpu = cpu_seconds(apiserver) - apiserver_before
    requests = run.audit.new_requests()
    return {
        "clusters": clusters,
        "seconds_to_all_reconciled": round(seconds[-1], 1) if len(seconds) == clusters else None,
        "seconds_to_half_reconciled": round(seconds[clusters // 2], 1)
        if len(seconds) > clusters // 2
        else None,
        "unreconciled_at_timeout": clusters - len(seconds),
        "requests": summary(requests),
        "cpu_seconds": round(cpu_seconds(run.operator.pid), 2),
        "peak_rss_mib": round(proc_status_mib(run.operator.pid, "VmHWM"), 1),
        "rss_mib": round(proc_status_mib(run.operator.pid, "VmRSS"), 1),
        "apiserver_cpu_seconds": round(apiserver_cpu, 2),
    }


RESTART_WINDOW_SECONDS = 60.0
"""The window after a restart whose requests are counted, for both sides (the Go one has no first pass)."""


async def first_pass_done(operator: Operator, kind: str, timeout: float) -> float | None:
    """Wall time at which our operator had reconciled every ``kind`` it found at its start (its /healthz
    says); None on timeout."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(httpx.HTTPError, ValueError):
            done_at = (await asyncio.to_thread(operator.health))["reconciles"]["first_pass_done_at"].get(kind)
            if done_at is not None:
                return float(done_at)
        await asyncio.sleep(1.0)
    return None


async def restart(run: Run, clusters: int) -> dict[str, Any]:
    """Stop the operator and start it again over ``clusters`` reconciled clusters (an upgrade, a crash):
    seconds until it has looked at every cluster once (ours says when; the Go one does not), and the
    requests, writes, CPU and peak RSS of the first :data:`RESTART_WINDOW_SECONDS` (or of that look,
    if longer)."""
    await asyncio.to_thread(run.operator.stop)
    run.audit.new_requests()
    apiserver = run.apiserver_pid()
    apiserver_before = cpu_seconds(apiserver)
    started, started_wall = time.monotonic(), time.time()
    await asyncio.to_thread(run.operator.start)
    done_at = (
        await first_pass_done(run.operator, "TypesenseCluster", timeout=300 + clusters / 5)
        if run.side.name == "python"
        else None  # the Go operator's health endpoint says only "ok"
    )
    await asyncio.sleep(max(0.0, started + RESTART_WINDOW_SECONDS - time.monotonic()))
    return {
        "clusters": clusters,
        "seconds_to_first_pass": round(done_at - started_wall, 1) if done_at is not None else None,
        "window_seconds": round(time.monotonic() - started, 1),
        "requests": summary(run.audit.new_requests()),
        "cpu_seconds": round(cpu_seconds(run.operator.pid), 2),
        "peak_rss_mib": round(proc_status_mib(run.operator.pid, "VmHWM"), 1),
        "rss_mib": round(proc_status_mib(run.operator.pid, "VmRSS"), 1),
        "apiserver_cpu_seconds": round(cpu_seconds(apiserver) - apiserver_before, 2),
    }


async def established(admin: Admin, crd: str, timeout: float = 30) -> None:
    path = f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd}"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        conditions = (await admin.get(path)).get("status", {}).get("conditions") or []
        if any(c["type"] == "Established" and c["status"] == "True" for c in conditions):
            return
        await asyncio.sleep(0.2)
    raise TimeoutError(f"CRD {crd} not Established within {timeout} s")


async def cache_ready(admin: Admin, path: str, timeout: float = 30) -> None:
    """Until the API server's watch cache serves ``path``: a new CRD's answers 429 for a moment."""
    deadline = time.monotonic() + timeout
    while (await admin.http.get(path, params={"resourceVersion": "0"})).status_code != 200:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} not served from the watch cache within {timeout} s")
        await asyncio.sleep(0.2)


@contextlib.asynccontextmanager
async def plane_for(side: Side, directory: Path, **plane_options: Any) -> Any:
    """A fresh control plane in ``directory`` (made here), the side's CRDs, the bench namespace, an admin."""
    with BenchControlPlane(directory / "cp", **plane_options) as plane:
        async with crds_and_admin(side, plane) as admin:
            yield plane, admin


@contextlib.asynccontextmanager
async def crds_and_admin(side: Side, plane: ControlPlane | None) -> Any:
    """The side's CRDs and the bench namespace on ``plane``, and an admin client of it."""
    assert plane is not None
    await asyncio.to_thread(plane.kubectl, "apply", "--server-side", "-f", str(side.crds))
    admin = Admin(plane)
    try:
        await established(admin, "typesenseclusters.ts.opentelekomcloud.com")
        await admin.create(
            "/api/v1/namespaces",
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
        )
        await cache_ready(admin, CLUSTERS.format(namespace=NAMESPACE))
        yield admin
    finally:
        await admin.close()


def keep_log(settings: argparse.Namespace, source: Path, name: str) -> None:
    if settings.keep_logs is not None and source.exists():
        settings.keep_logs.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, settings.keep_logs / name)


async def sequential(
    run: Run, sightings: Sightings, idle_here: Collection[int], idle_results: dict[str, Any]
) -> dict[str, Any]:
    """``--sequential`` clusters created one at a time (an idle window whenever their number is a size).

    Each create waits ``--sequential-gap`` after the previous cluster's children: the controller
    manager makes its claims and pods, the pods are refused, the operator reports them, and only then
    does the next cluster come. Created back to back, each cluster met the previous one's aftermath on
    two busy cores, and the figure measured that contention (which the burst measures on purpose)
    more than the time to one cluster's children.
    """
    durations: list[float] = []
    audited: list[float] = []
    missed = 0
    for i in range(run.settings.sequential):
        if i:
            await asyncio.sleep(run.settings.sequential_gap)
        timed = await time_sequential(run, sightings, names(i, i + 1)[0])
        if timed is None:
            missed += 1
        else:
            durations.append(timed.watched)
            audited.extend([timed.audited] if timed.audited is not None else [])
        if i + 1 in idle_here:
            idle_results[str(i + 1)] = await idle(run, i + 1)
    return {
        "clusters": run.settings.sequential,
        "first": round(durations[0], 3) if durations else None,
        **(spread(durations) if durations else {}),
        "audited": spread(audited) if audited else None,
        "no_children_within_60_s": missed,
    }


async def at_once(run: Run, sightings: Sightings, burst: Collection[str]) -> dict[str, Any]:
    """The ``burst`` clusters created together."""
    run.audit.new_requests()
    started = await create_clusters(run.admin, burst, run.settings.replicas, concurrency=len(burst))
    finished = await sightings.all_seen(burst, timeout=120)
    # The same clock as the audit log's: the create's monotonic time moved to wall-clock.
    offset = time.time() - time.monotonic()
    by_audit = await audited_seconds(run, {c: started[c] + offset for c in burst if c in finished})
    return {
        "clusters": len(burst),
        **spread([finished[c] - started[c] for c in burst if c in finished] or [0.0]),
        "audited": spread(list(by_audit.values())) if by_audit else None,
        "no_children_within_120_s": len(burst) - len(finished),
    }


async def growing_scenarios(side: Side, settings: argparse.Namespace, home: Path) -> dict[str, Any]:
    """Sequential creations, the burst, larger sizes; idle windows whenever the population is a size."""
    result: dict[str, Any] = {"create_to_children_seconds": {}, "idle": {}}
    idle_here = set(settings.sizes) - ({settings.cold_start_size} if settings.cold_start_size else set())
    async with plane_for(side, home) as (plane, admin):
        operator = side.launch(plane, home)
        run = Run.of(side, plane, admin, operator, settings)
        await asyncio.to_thread(operator.start)
        try:
            await asyncio.sleep(3)  # the operator's watches are up before the clock starts
            async with Sightings(admin, side, NAMESPACE) as sightings:
                result["create_to_children_seconds"]["sequential"] = await sequential(
                    run, sightings, idle_here, result["idle"]
                )
                population = settings.sequential
                if settings.burst:
                    burst = names(population, population + settings.burst)
                    result["create_to_children_seconds"]["burst"] = await at_once(run, sightings, burst)
                    population += settings.burst
            if population in idle_here and str(population) not in result["idle"]:
                result["idle"][str(population)] = await idle(run, population)
            for size in sorted(s for s in idle_here if s > population):
                await create_clusters(run.admin, names(population, size), settings.replicas)
                population = size
                result["idle"][str(size)] = await idle(run, size)
        finally:
            operator.stop()
            keep_log(settings, home / "operator.log", f"{side.name}-growing-operator.log")
    return result


async def cold_start_scenario(side: Side, settings: argparse.Namespace, home: Path) -> dict[str, Any]:
    """A fresh plane, the largest size's clusters created with no operator, then the operator's start."""
    size = settings.cold_start_size
    async with plane_for(side, home) as (plane, admin):
        operator = side.launch(plane, home)
        run = Run.of(side, plane, admin, operator, settings)
        try:
            result = {"cold_start": await cold_start(run, size)}
            if size in settings.sizes and not result["cold_start"]["unreconciled_at_timeout"]:
                result["idle"] = {str(size): await idle(run, size)}
                result["restart"] = await restart(run, size)
        finally:
            operator.stop()
            keep_log(settings, home / "operator.log", f"{side.name}-cold-start-operator.log")
    return result


async def ready_scenario(side: Side, settings: argparse.Namespace, home: Path) -> dict[str, Any]:
    """Clusters made Ready by the real typesense-server on three real nodes, then an idle window."""
    count = settings.ready_clusters
    nodes = LocalCluster(home / "nodes", extra_images=[typesense_image()], plane_class=BenchControlPlane)
    await asyncio.to_thread(nodes.start)
    try:
        async with crds_and_admin(side, nodes.control_plane) as admin:
            plane = nodes.control_plane
            assert plane is not None
            operator = side.launch(plane, home)
            run = Run.of(side, plane, admin, operator, settings)
            try:
                await asyncio.to_thread(operator.start)
                await asyncio.sleep(3)
                everything = names(0, count)
                started = time.monotonic()
                await create_clusters(admin, everything, settings.replicas)
                ready: set[str] = set()
                while len(ready) < count and time.monotonic() - started < 600:
                    await asyncio.sleep(2)
                    ready = {
                        i["metadata"]["name"]
                        for i in await admin.items(CLUSTERS.format(namespace=NAMESPACE))
                        if any(
                            c["type"] == "Ready" and c["status"] == "True"
                            for c in (i.get("status") or {}).get("conditions") or []
                        )
                    }
                # A benchmark reports what it saw: clusters still not Ready are named, not an error that
                # would throw away every figure measured before (seen: 1 of 20 late on a busy machine).
                seconds = time.monotonic() - started
                not_ready = sorted(set(everything) - ready)
                window = await idle(run, count)
            finally:
                operator.stop()
                keep_log(settings, home / "operator.log", f"{side.name}-ready-operator.log")
    finally:
        await asyncio.to_thread(nodes.stop)
    return {
        "clusters": count,
        "replicas": settings.replicas,
        "seconds_to_all_ready": None if not_ready else round(seconds, 1),
        "not_ready_after_600_s": not_ready,
        "idle": window,
    }


async def one_side(side: Side, settings: argparse.Namespace, scratch: Path) -> dict[str, Any]:
    result: dict[str, Any] = {"idle": {}}
    if not settings.only_cold_start:
        result = await growing_scenarios(side, settings, scratch / f"{side.name}-growing")
    if settings.cold_start_size:
        cold = await cold_start_scenario(side, settings, scratch / f"{side.name}-cold")
        result["cold_start"] = cold["cold_start"]
        if "restart" in cold:
            result["restart"] = cold["restart"]
        result["idle"].update(cold.get("idle", {}))
    result["idle"] = dict(sorted(result["idle"].items(), key=lambda item: int(item[0])))
    if settings.ready and side.name == "python":
        result["ready"] = await ready_scenario(side, settings, scratch / f"{side.name}-ready")
    return result


# -- the comparison

NOT_COMPARED = frozenset(
    {
        "clusters",
        "seconds",
        "poll_seconds",
        "replicas",
        "by_verb",
        "by_resource",
        "errors",
        "no_children_within_60_s",
        "no_children_within_120_s",
        "unreconciled_before",
        "seconds_until_writes_stopped",
        "unreconciled_at_timeout",
        "pods",
        "window_seconds",
    }
)


def ratios(ours: Mapping[str, Any], theirs: Mapping[str, Any]) -> dict[str, Any]:
    """ours / theirs for every number both sides have at the same place (None when theirs is 0)."""
    out: dict[str, Any] = {}
    for key, value in ours.items():
        other = theirs.get(key)
        if key in NOT_COMPARED or other is None:
            continue
        if isinstance(value, Mapping) and isinstance(other, Mapping):
            nested = ratios(value, other)
            if nested:
                out[key] = nested
        elif (
            isinstance(value, int | float) and isinstance(other, int | float) and not isinstance(value, bool)
        ):
            out[key] = round(value / other, 3) if other else None
    return out


async def run(settings: argparse.Namespace) -> dict[str, Any]:
    began = time.monotonic()
    sides = [our_side()]
    if settings.go_operator is not None:
        sides.append(
            go_side(
                settings.go_operator.resolve(), (settings.go_crds or settings.go_operator.parent).resolve()
            )
        )
    result: dict[str, Any] = {
        "benchmark": "scale",
        "machine": {"cpus": os.cpu_count(), "memory_gib": memory_gib()},
        "python_operator": source_state(),
        "settings": {
            "sizes": settings.sizes,
            "sequential": settings.sequential,
            "burst": settings.burst,
            "replicas": settings.replicas,
            "idle_seconds": settings.idle_seconds,
            "settle_seconds": settings.settle_seconds,
            "sequential_gap_seconds": settings.sequential_gap,
            "idle_opens_after_quiet_seconds": QUIET_SECONDS,
            "cold_start_clusters": settings.cold_start_size,
            "pods": "Pending: the control plane has no Node",
            "control_plane": "controller manager and scheduler: --kube-api-qps=500 --kube-api-burst=1000",
        },
    }
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as scratch:
        for side in sides:
            result[side.name] = await one_side(side, settings, Path(scratch))
    if settings.go_operator is not None:
        binary = settings.go_operator.resolve()
        result["go_operator"] = {
            "binary": str(binary),
            "sha256": hashlib.sha256(binary.read_bytes()).hexdigest(),
            "flags": "--leader-elect=false --metrics-bind-address=0 "
            "--health-probe-bind-address=127.0.0.1:<free port> --zap-log-level=info",
            "identity": f"{GO_USER} (bound to cluster-admin)",
        }
        result["ratios_ours_over_go"] = ratios(result["python"], result["go"])
    result["wall_seconds"] = round(time.monotonic() - began, 1)
    return result


def memory_gib() -> float:
    total_kib = int(Path("/proc/meminfo").read_text().split()[1])  # MemTotal comes first
    return round(total_kib / 1024**2, 1)


def source_state() -> dict[str, Any]:
    """The commit our operator ran from, and whether src/ had uncommitted changes."""

    def git(*arguments: str) -> str:
        return subprocess.run(
            ["git", "-C", str(ROOT), *arguments], capture_output=True, text=True, check=False
        ).stdout.strip()

    return {
        "commit": git("rev-parse", "HEAD"),
        "src_modified": bool(git("status", "--porcelain", "--", "src")),
    }


def sizes(text: str) -> list[int]:
    return sorted({int(part) for part in text.split(",") if part.strip()})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sizes", type=sizes, default=[20, 100, 1000], help="idle windows at these populations"
    )
    parser.add_argument("--sequential", type=int, default=20, help="clusters created one at a time")
    parser.add_argument(
        "--sequential-gap",
        type=float,
        default=1.0,
        help="seconds between the children of one sequential cluster and the next create",
    )
    parser.add_argument("--burst", type=int, default=80, help="clusters created at once, after those")
    parser.add_argument("--replicas", type=int, default=3, help="spec.replicas of every cluster")
    parser.add_argument("--idle-seconds", type=float, default=60)
    parser.add_argument("--settle-seconds", type=float, default=15, help="wait before an idle window")
    parser.add_argument("--skip-cold-start", action="store_true")
    parser.add_argument("--only-cold-start", action="store_true", help="the cold start (and its idle) only")
    parser.add_argument("--go-operator", type=Path, help="the Go manager binary, to run the same scenarios")
    parser.add_argument("--go-crds", type=Path, help="its CRD yaml(s); default: the binary's directory")
    parser.add_argument(
        "--ready", action="store_true", help="also 20 Ready clusters (ours only, on three real nodes)"
    )
    parser.add_argument("--ready-clusters", type=int, default=20)
    parser.add_argument("--keep-logs", type=Path, help="copy the operators' logs into this directory")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "scale.json")
    settings = parser.parse_args()
    grown = settings.sequential + settings.burst
    for size in settings.sizes:
        if settings.sequential < size < grown or size < 1:
            parser.error(f"size {size}: a size is at most --sequential, --sequential + --burst, or more")
    settings.cold_start_size = None if settings.skip_cold_start else max(settings.sizes)
    if settings.only_cold_start and settings.skip_cold_start:
        parser.error("--only-cold-start and --skip-cold-start exclude each other")
    result = asyncio.run(run(settings))
    settings.out.parent.mkdir(parents=True, exist_ok=True)
    settings.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
