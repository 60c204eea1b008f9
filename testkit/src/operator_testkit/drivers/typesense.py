"""The Typesense operator in the test kit: a driver for the clusters it makes.

For end-to-end tests and benchmarks (its sandbox entry is :mod:`.typesense_sandbox`): it finds the
nodes by pod IP, writes through whichever node leads, reads back from every node, and keeps a steady
write load that records what was acknowledged; a roll is followed as the operator reports it (its
Progressing condition and NodeRestarted Events).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import re
import secrets
import shutil
import ssl
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx

from operator_core.kube import Kube
from operator_core.reconciling import first_of
from operator_testkit.assertions import condition
from operator_testkit.controlplane import ControlPlane
from operator_testkit.fixtures import wait_until
from operator_testkit.nodes.cluster import LocalCluster
from operator_testkit.nodes.configs import pod_logs_directory
from operator_testkit.nodes.faults import NodeFaults
from operator_testkit.nodes.images import NodeImage, typesense_image
from operator_testkit.nodes.log_mirror import PodLogMirror
from operator_testkit.operators import OperatorProcess, OperatorRegistry
from operator_testkit.pki import ServerCertificate
from typesense_operator.quorum.probe import RAFT_STAT_PATH, parse_last_log, parse_raft_peers, peer_address
from typesense_operator.resources.tls import serves_https

API = "ts.opentelekomcloud.com/v1alpha1"
PEERING_PORT = 8107
"""Where a node of a cluster made with the default spec serves braft's pages."""
ACKNOWLEDGED = "201"
"""What came of a write that the cluster acknowledged (:meth:`TypesenseCluster.try_write`)."""
RAFT_MEMBER = ("LEADER", "FOLLOWER")
"""The raft states of a node that serves the cluster's data (not a candidate, nor one that loads)."""
COLLECTION = {"name": "books", "fields": [{"name": "title", "type": "string"}]}
WARM_UP_WRITES = 5
"""Writes a load acknowledges before a fault is made (:meth:`Writer.warmed_up`): proof that the
cluster took writes through its leader, and enough of them to miss on a node that lost some."""


def ready_condition(cluster: dict[str, Any] | None) -> dict[str, Any]:
    return condition(cluster or {}, "Ready") or {}


async def admin_headers(kube: Kube, namespace: str, name: str) -> dict[str, str]:
    """The header that carries the cluster's admin key, read from the Secret the operator made."""
    secret = await kube.get("v1", "Secret", f"{name}-admin-key", namespace)
    assert secret is not None, f"no admin key Secret for {namespace}/{name}"
    return {"X-TYPESENSE-API-KEY": base64.b64decode(secret["data"]["typesense-api-key"]).decode()}


def _component(name: str, component: str) -> dict[str, str]:
    return {"app.kubernetes.io/instance": name, "app.kubernetes.io/component": component}


async def _cluster_pods(kube: Kube, namespace: str, name: str) -> list[dict[str, Any]]:
    """The cluster's nodes' pods: not its proxy's (spec.ingress) or its Jobs'; a pod the Go operator
    made carries no component label."""
    pods = await kube.list("v1", "Pod", namespace, labels={"app.kubernetes.io/instance": name})
    return [
        pod
        for pod in pods
        if (pod["metadata"].get("labels") or {}).get("app.kubernetes.io/component", "node") == "node"
    ]


def _addresses(pods: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """Each pod's IP by pod name: those that have one and are not being deleted."""
    return {
        p["metadata"]["name"]: p["status"]["podIP"]
        for p in pods
        if (p.get("status") or {}).get("podIP") and not p["metadata"].get("deletionTimestamp")
    }


def _server_names(pods: Sequence[Mapping[str, Any]], name: str, namespace: str) -> dict[str, str]:
    """Each pod that serves HTTPS (spec.tls), by pod IP: the name its certificate is checked for."""
    return {
        p["status"]["podIP"]: f"{p['metadata']['name']}.{name}-sts-svc.{namespace}.svc"
        for p in pods
        if (p.get("status") or {}).get("podIP") and serves_https(p)
    }


async def node_addresses(kube: Kube, namespace: str, name: str) -> dict[str, str]:
    """Each node's pod IP by pod name: the pods of the cluster that have one and are not being deleted."""
    return _addresses(await _cluster_pods(kube, namespace, name))


def tls_client(ca: bytes, server_name: Callable[[str], str | None], *, timeout: float) -> httpx.AsyncClient:
    """An HTTP client that verifies with ``ca`` each node that serves HTTPS, for the name
    ``server_name`` gives its pod IP (None: the node serves plain HTTP), as the operator does; URLs
    name the pod IP, and the name goes as the TLS server name (SNI and the certificate check).

    No kept-alive connections: one to a node whose pod was killed is never answered again, and httpx's
    TLS connection, closed by a timeout, was left open (ResourceWarnings, in a test of two nodes
    killed). A handshake per request costs a test nothing."""

    async def name_the_node(request: httpx.Request) -> None:
        name = server_name(request.url.host) if request.url.scheme == "https" else None
        if name is not None:
            request.extensions["sni_hostname"] = name

    return httpx.AsyncClient(
        trust_env=False,
        timeout=timeout,
        verify=ssl.create_default_context(cadata=ca.decode()),
        limits=httpx.Limits(max_keepalive_connections=0),
        event_hooks={"request": [name_the_node]},
    )


def certificate_names(cluster: str, namespace: str) -> list[str]:
    """Every name a cluster's nodes are reached by, as a certificate must hold them: the client Service's
    forms, and a wildcard under the headless Service for each pod (as a cert-manager Certificate asks)."""
    service = f"{cluster}-svc"
    return [
        service,
        f"{service}.{namespace}",
        f"{service}.{namespace}.svc",
        f"{service}.{namespace}.svc.cluster.local",
        f"*.{cluster}-sts-svc.{namespace}.svc",
    ]


def certificate_secret(
    name: str,
    namespace: str,
    certificate: ServerCertificate,
    ca: bytes,
    secret_type: str = "kubernetes.io/tls",  # noqa: S107 (a Secret type, not a password)
) -> dict[str, Any]:
    """A Secret as spec.tls.certificateSecret names one: tls.crt, tls.key and ca.crt."""
    data = {"tls.crt": certificate.cert, "tls.key": certificate.key, "ca.crt": ca}
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace},
        "type": secret_type,
        "data": {key: base64.b64encode(value).decode() for key, value in data.items()},
    }


@dataclass(frozen=True)
class Nodes:
    """The nodes of a cluster as they are now, by pod name, and its admin key: for checks that go to
    every node by name (what a backup holds, what a restore brought back)."""

    addresses: dict[str, str]
    headers: dict[str, str]
    server_names: dict[str, str] = field(default_factory=dict)
    """Each pod that serves HTTPS (spec.tls), by pod IP: the name its certificate is checked for."""

    @classmethod
    async def of(cls, kube: Kube, namespace: str, name: str) -> Nodes:
        pods = await _cluster_pods(kube, namespace, name)
        return cls(
            _addresses(pods), await admin_headers(kube, namespace, name), _server_names(pods, name, namespace)
        )

    def url(self, pod: str, path: str) -> str:
        ip = self.addresses[pod]
        return f"{'https' if ip in self.server_names else 'http'}://{ip}:8108{path}"

    def client(self, ca: bytes | None, timeout: float = 30) -> httpx.AsyncClient:
        """A client for these nodes: one that verifies those serving HTTPS with ``ca`` (:func:`tls_client`),
        or a plain one (None)."""
        if ca is None:
            return httpx.AsyncClient(trust_env=False, timeout=timeout)
        return tls_client(ca, self.server_names.get, timeout=timeout)

    async def leader(self, http: httpx.AsyncClient) -> str:
        """The pod that says it leads, once one does."""

        async def find() -> str | None:
            for pod in self.addresses:
                try:
                    answer = await http.get(self.url(pod, "/status"), headers=self.headers)
                except httpx.HTTPError:
                    continue
                if answer.json().get("state") == "LEADER":
                    return pod
            return None

        return str(await wait_until(find, timeout=60, interval=0.5, what="a leader"))

    async def on_every_node(
        self, http: httpx.AsyncClient, check: Callable[[httpx.AsyncClient, str], Awaitable[bool]], what: str
    ) -> None:
        """Until ``check`` holds on every node (a node that does not answer does not hold it yet)."""

        async def everywhere() -> bool:
            for pod in self.addresses:
                try:
                    if not await check(http, pod):
                        return False
                except httpx.HTTPError:
                    return False
            return True

        await wait_until(everywhere, timeout=90, interval=0.5, what=what)


@dataclass
class TypesenseCluster:
    """One TypesenseCluster in a test namespace, reached by pod IP."""

    kube: Kube
    namespace: str
    name: str = "cluster-1"
    http: httpx.AsyncClient = field(default_factory=lambda: httpx.AsyncClient(trust_env=False, timeout=3))
    headers: dict[str, str] = field(default_factory=dict)
    _leader: str | None = None
    """The node the last acknowledged write went to: writes go there while its pod exists and is not
    being deleted (as a Service would route them), until one is not acknowledged."""
    _server_names: dict[str, str] = field(default_factory=dict)
    """Each pod IP that serves HTTPS (spec.tls), as :meth:`pod_ips` last saw: its certificate's name."""
    _unanswered: set[asyncio.Future[Any]] = field(default_factory=set)
    """Questions to the nodes still running after their answer stopped mattering (:meth:`_leave_to_end`)."""

    async def use_tls(self, ca: bytes) -> None:
        """Verify the nodes that serve HTTPS with ``ca``, for their names under the headless Service
        (as the operator does); the nodes still in plain HTTP are asked in plain HTTP."""
        await self.http.aclose()
        self.http = tls_client(ca, self._server_names.get, timeout=3)

    def url(self, ip: str, path: str, port: int = 8108) -> str:
        """A node's API at ``path``, in the scheme the node serves."""
        return f"{'https' if ip in self._server_names else 'http'}://{ip}:{port}{path}"

    async def create(self, replicas: int = 3, **spec: Any) -> None:
        await self.kube.apply(
            {
                "apiVersion": API,
                "kind": "TypesenseCluster",
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": {"image": "typesense/typesense:27.1", "replicas": replicas, **spec},
            }
        )

    @property
    def one_member_per_node(self) -> list[dict[str, Any]]:
        """The ``topologySpreadConstraints`` that put each member on a node of its own, and let a
        replacement onto a node that has one already when a node is lost: a node tainted unreachable
        is no domain of the spread (``nodeTaintsPolicy: Honor``). A fault of a whole node then takes
        one member, never two."""
        members = {"app.kubernetes.io/instance": self.name, "app.kubernetes.io/component": "node"}
        return [
            {
                "maxSkew": 1,
                "topologyKey": "kubernetes.io/hostname",
                "whenUnsatisfiable": "DoNotSchedule",
                "nodeTaintsPolicy": "Honor",
                "labelSelector": {"matchLabels": members},
            }
        ]

    async def node_of(self, pod: str) -> str | None:
        """The Kubernetes node ``pod`` is bound to, None while it is not scheduled (or gone)."""
        found = await self.kube.get("v1", "Pod", pod, self.namespace)
        return ((found or {}).get("spec") or {}).get("nodeName")

    async def get(self) -> dict[str, Any]:
        found = await self.kube.get(API, "TypesenseCluster", self.name, self.namespace)
        assert found is not None
        return found

    async def wait_ready(self, timeout: float = 180) -> float:
        """Seconds until Ready=True/QuorumReady."""
        started = time.monotonic()

        async def ready() -> bool:
            return ready_condition(await self.get()).get("status") == "True"

        await wait_until(ready, timeout=timeout, interval=0.5, what=f"{self.name} Ready=True")
        if not self.headers:
            self.headers = await admin_headers(self.kube, self.namespace, self.name)
        return time.monotonic() - started

    async def events(self, reason: str) -> list[dict[str, Any]]:
        """Events with this reason in the namespace (the core/v1 view: it decodes those with no eventTime)."""
        return [e for e in await self.kube.list("v1", "Event", self.namespace) if e.get("reason") == reason]

    async def timeline(self, since: float) -> list[dict[str, Any]]:
        """The operator's Events about the cluster from ``since`` (``time.time()``) on, in seconds from
        it: where the time of a recovery or a roll went."""
        moments = []
        for event in await self.kube.list("v1", "Event", self.namespace):
            if event.get("involvedObject", {}).get("kind") != "TypesenseCluster" or not event.get(
                "eventTime"
            ):
                continue
            at = datetime.fromisoformat(event["eventTime"].replace("Z", "+00:00")).timestamp() - since
            if at >= 0:
                moments.append(
                    {"at": round(at, 1), "reason": event["reason"], "message": event["message"][:160]}
                )
        return sorted(moments, key=lambda moment: moment["at"])

    async def wait_not_ready(self, timeout: float = 60) -> None:
        """Until the operator has seen the fault (Ready is no longer True)."""

        async def not_ready() -> bool:
            return ready_condition(await self.get()).get("status") != "True"

        await wait_until(not_ready, timeout=timeout, interval=0.5, what=f"{self.name} to leave Ready=True")

    async def pod_ips(self) -> dict[str, str]:
        pods = await _cluster_pods(self.kube, self.namespace, self.name)
        for pod in pods:  # an address a pod in plain HTTP holds now is asked in plain HTTP
            self._server_names.pop((pod.get("status") or {}).get("podIP") or "", None)
        self._server_names.update(_server_names(pods, self.name, self.namespace))
        return _addresses(pods)

    async def proxy_ip(self) -> str | None:
        """The address of the cluster's nginx proxy (spec.ingress) once one pod of it is Ready and no
        other is left (a roll of the proxy has ended); None before."""
        pods = await self.kube.list(
            "v1",
            "Pod",
            self.namespace,
            labels=_component(self.name, "reverse-proxy"),
        )
        if len(pods) != 1 or pods[0]["metadata"].get("deletionTimestamp"):
            return None
        status = pods[0].get("status") or {}
        ready = any(c["type"] == "Ready" and c["status"] == "True" for c in status.get("conditions", []))
        return status.get("podIP") if ready else None

    async def states(self, ips: Mapping[str, str] | None = None) -> dict[str, str]:
        """Each node's raft state, asked of all at once: a hung node delays the answer by one timeout.
        ``ips``: the pods' addresses, when the caller has just read them (:meth:`pod_ips`)."""

        async def state(ip: str) -> str:
            try:
                answer = await self.http.get(self.url(ip, "/status"), headers=self.headers)
                return str(answer.json().get("state", "?"))
            except (httpx.HTTPError, ValueError):
                return "unreachable"

        ips = await self.pod_ips() if ips is None else ips
        return dict(zip(ips, await asyncio.gather(*(state(ip) for ip in ips.values())), strict=True))

    async def in_step(self) -> bool:
        """True when the raft is at rest: one LEADER, every pod's raft log ends at the same entry, and
        the leader's configuration is exactly the pods' addresses, with no change under way.

        A node that reports FOLLOWER may still miss entries a majority committed without it (the
        leader adds a node's new address only at its next nodes-file refresh): freeze the others then,
        and the one left answering rightly cannot be kept alone."""
        ips = await self.pod_ips()
        pages = await asyncio.gather(*(self.raft_stat(ip) for ip in ips.values()))
        if any(page is None for page in pages):
            return False
        leaders = [page for page in pages if page and re.search(rb"(?m)^state: LEADER\r?$", page)]
        ends = {parse_last_log(page) for page in pages if page}
        addresses = {peer_address(ip, PEERING_PORT) for ip in ips.values()}
        return (
            len(leaders) == 1
            and len(ends) == 1
            and b"changing_conf: NO" in leaders[0]
            and set(parse_raft_peers(leaders[0]) or ()) == addresses
        )

    async def raft_stat(self, ip: str) -> bytes | None:
        """A node's braft /raft_stat page; None when it does not answer."""
        try:
            answer = await self.http.get(f"http://{ip}:{PEERING_PORT}{RAFT_STAT_PATH}", timeout=2)
        except httpx.HTTPError:
            return None
        return answer.content if answer.status_code == 200 else None

    async def outside_configuration(self, pod: str, ips: Mapping[str, str]) -> frozenset[str]:
        """The pods (of ``ips``, each pod's address) whose address ``pod``'s raft configuration does not
        name; none when it is unknown (the pod does not answer, or its configuration names host names)."""
        page = await self.raft_stat(ips[pod]) if pod in ips else None
        peers = parse_raft_peers(page) if page else None
        if peers is None:
            return frozenset()
        return frozenset(name for name, ip in ips.items() if peer_address(ip, PEERING_PORT) not in peers)

    async def leader_ip(self) -> str | None:
        """The IP of the node that says it leads, from the first to say so: a hung node does not
        hold the answer up."""
        ips = list((await self.pod_ips()).values())

        async def leads(ip: str) -> str | None:
            try:
                answer = await self.http.get(self.url(ip, "/status"), headers=self.headers, timeout=1)
                return ip if answer.json().get("state") == "LEADER" else None
            except (httpx.HTTPError, ValueError):
                return None

        asking = [asyncio.ensure_future(leads(ip)) for ip in ips]
        for asked in asyncio.as_completed(asking):
            if (leader := await asked) is not None:
                self._leave_to_end(asking)
                return leader
        return None

    def _leave_to_end(self, questions: Iterable[asyncio.Future[Any]]) -> None:
        """Questions still asked are left to end by their own timeout, never cancelled: httpcore 1.0.9
        closes a connection whose TLS handshake fails, but not one whose handshake is cancelled (its
        ``start_tls`` catches Exception, and cancellation is a BaseException), and the socket left open
        failed a TLS test with a ResourceWarning when the garbage collector met it."""
        for question in questions:
            if not question.done():
                self._unanswered.add(question)
                question.add_done_callback(self._unanswered.discard)

    async def aclose(self) -> None:
        """Close the client once the questions left running have ended (each within its timeout)."""
        if self._unanswered:
            await asyncio.wait(self._unanswered)
        await self.http.aclose()

    async def create_collection(self) -> None:
        async def created() -> bool:
            leader = await self.leader_ip()
            if leader is None:
                return False
            answer = await self.http.post(
                self.url(leader, "/collections"),
                headers=self.headers,
                json=COLLECTION,
            )
            return answer.status_code in (201, 409)

        await wait_until(created, timeout=60, interval=1, what="the collection to be created")

    async def write(self, document_id: str) -> bool:
        """Write one document through whichever node leads now; True when it was acknowledged."""
        return await self.try_write(document_id) == ACKNOWLEDGED

    async def try_write(self, document_id: str, padding: int = 0) -> str:
        """Write one document through whichever node leads now; what came of it (ACKNOWLEDGED, or why not).

        A node whose pod is gone or being deleted takes no more writes, even while its process still
        answers: a client through the cluster's Service could not reach it either."""
        if self._leader is not None and self._leader not in (await self.pod_ips()).values():
            self._leader = None
        self._leader, leader = None, self._leader or await self.leader_ip()
        if leader is None:
            return "no leader"
        try:
            answer = await self.http.post(
                self.url(leader, "/collections/books/documents"),
                headers=self.headers,
                # padding: bytes more of title, for a writer that fills a disk
                json={"id": document_id, "title": f"document {document_id}" + " x" * (padding // 2)},
            )
        except httpx.HTTPError as error:
            return type(error).__name__
        if answer.status_code != 201:
            return f"{answer.status_code} {answer.text[:60]}"
        self._leader = leader
        return ACKNOWLEDGED

    async def missing_on_every_node(self, document_ids: list[str]) -> dict[str, list[str]]:
        """For each node, the acknowledged documents it does not have (all of them while it does not answer:
        a pod that has its address may not listen yet, its typesense-server still loading)."""
        missing: dict[str, list[str]] = {}
        for pod, ip in (await self.pod_ips()).items():
            lost = []
            for document_id in document_ids:
                try:
                    answer = await self.http.get(
                        self.url(ip, f"/collections/books/documents/{document_id}"),
                        headers=self.headers,
                    )
                except httpx.HTTPError:
                    lost = list(document_ids)
                    break
                if answer.status_code != 200:
                    lost.append(document_id)
            missing[pod] = lost
        return missing

    async def assert_nothing_lost(self, acknowledged: list[str], timeout: float = 90) -> None:
        """Every acknowledged write on every node, once followers have caught up."""
        deadline = time.monotonic() + timeout
        while True:
            missing = {
                pod: lost for pod, lost in (await self.missing_on_every_node(acknowledged)).items() if lost
            }
            if not missing:
                return
            assert time.monotonic() < deadline, (
                f"acknowledged writes missing after {timeout:.0f} s: {missing}"
            )
            await asyncio.sleep(2)


@dataclass
class CollectionWriter:
    """A client writing through a collection's name (an alias, for a migrated collection) ``rate`` times
    a second at ``address``: document ``number`` is ``document(number)``, upserted with
    ``dirty_values=coerce_or_reject`` as a client that lets Typesense turn its values into the fields'
    types; what Typesense acknowledged, by id."""

    cluster: TypesenseCluster
    address: str
    collection: str
    document: Callable[[int], dict[str, Any]]
    rate: float = 10.0
    acknowledged: list[str] = field(default_factory=list)
    _task: asyncio.Task[None] | None = None
    _stop: asyncio.Event = field(default_factory=asyncio.Event)

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        url = self.cluster.url(self.address, f"/collections/{self.collection}/documents")
        number = 0
        while not self._stop.is_set():
            number += 1
            document = self.document(number)
            try:
                answer = await self.cluster.http.post(
                    url,
                    params={"action": "upsert", "dirty_values": "coerce_or_reject"},
                    headers=self.cluster.headers,
                    json=document,
                )
                if answer.status_code in (200, 201):
                    self.acknowledged.append(str(document["id"]))
            except httpx.HTTPError:
                pass  # not acknowledged: the client would write it again
            await asyncio.sleep(1 / self.rate)

    async def stop(self) -> None:
        self._stop.set()
        if self._task is not None:
            await self._task

    async def missing_from(self, collection: str) -> list[str]:
        """The acknowledged ids that ``collection`` (exported whole) does not hold."""
        exported = await self.cluster.http.get(
            self.cluster.url(self.address, f"/collections/{collection}/documents/export"),
            headers=self.cluster.headers,
            timeout=300,
        )
        exported.raise_for_status()
        held = {json.loads(line)["id"] for line in exported.text.splitlines() if line.strip()}
        return [document_id for document_id in self.acknowledged if document_id not in held]


@dataclass
class Writer:
    """A steady write load in the background, recording what was acknowledged and when."""

    cluster: TypesenseCluster
    padding: int = 0
    """Bytes added to each document (a writer that fills a disk)."""
    acknowledged: list[str] = field(default_factory=list)
    outcomes: list[tuple[float, str]] = field(default_factory=list)
    """(when, what came of it) for every attempt, so that a failed recovery explains itself."""
    _task: asyncio.Task[None] | None = None
    _stop: asyncio.Event = field(default_factory=asyncio.Event)
    _acknowledged: asyncio.Event = field(default_factory=asyncio.Event)

    def start(self, prefix: str) -> None:
        """Write ``<prefix>-<token>-1``, ``-2``, ...: the token keeps two writers (or two scenarios on
        one collection) from writing the same ids, which the second would see refused with 409."""
        self._task = asyncio.create_task(self._run(f"{prefix}-{secrets.token_hex(3)}"))

    async def _run(self, prefix: str) -> None:
        number = 0
        while not self._stop.is_set():
            number += 1
            document_id = f"{prefix}-{number}"
            outcome = await self.cluster.try_write(document_id, self.padding)
            self.outcomes.append((time.monotonic(), outcome))
            if outcome == ACKNOWLEDGED:
                self.acknowledged.append(document_id)
                self._acknowledged.set()
            await asyncio.sleep(0.2)

    async def stop(self) -> None:
        self._stop.set()
        if self._task is not None:
            await self._task

    @property
    def acknowledged_at(self) -> list[float]:
        """When each acknowledged write was, in the order of :attr:`acknowledged`."""
        return [when for when, outcome in self.outcomes if outcome == ACKNOWLEDGED]

    async def warmed_up(self, count: int = WARM_UP_WRITES, timeout: float = 30) -> None:
        """Until ``count`` writes are acknowledged; fail if the cluster takes none within ``timeout``."""
        await wait_until(
            lambda: len(self.acknowledged) >= count,
            timeout=timeout,
            what=f"{count} acknowledged writes",
        )

    def longest_gap(self, since: float) -> float:
        """The longest time between two acknowledged writes from ``since`` on (the first counted from
        ``since``)."""
        moments = [since, *(t for t in self.acknowledged_at if t > since)]
        return max((later - earlier for earlier, later in itertools.pairwise(moments)), default=0.0)

    def failed(self, since: float) -> int:
        """Write attempts from ``since`` on that were not acknowledged."""
        return sum(1 for when, outcome in self.outcomes if when >= since and outcome != ACKNOWLEDGED)

    def first_ack_after(self, moment: float) -> float | None:
        return next((t - moment for t in self.acknowledged_at if t > moment), None)

    async def acknowledged_after(self, moment: float, timeout: float = 30) -> None:
        """Keep writing until a write after ``moment`` is acknowledged; fail with what the writes met if
        none is within ``timeout`` (a cluster that reports Ready but takes no write is a failure)."""
        try:
            async with asyncio.timeout(timeout):
                while True:
                    self._acknowledged.clear()
                    if self.first_ack_after(moment) is not None:
                        return
                    await self._acknowledged.wait()
        except TimeoutError:
            raise AssertionError(
                f"no write acknowledged within {timeout:.0f} s; the writes met: {self.story(moment)}"
            ) from None

    def story(self, since: float) -> str:
        """The attempts since ``since``, runs of the same outcome folded: "0.2-9.8 s: no leader (40)"."""
        runs: list[list[Any]] = []
        for when, outcome in self.outcomes:
            if when < since:
                continue
            if runs and runs[-1][2] == outcome:
                runs[-1][1], runs[-1][3] = when - since, runs[-1][3] + 1
            else:
                runs.append([when - since, when - since, outcome, 1])
        return "; ".join(f"{a:.1f}-{b:.1f} s: {outcome} ({n})" for a, b, outcome, n in runs)


@dataclass(frozen=True)
class Recovery:
    """How long a cluster took to come back from a fault, and what was written meanwhile."""

    seconds_to_ready: float
    seconds_to_first_write: float | None
    writes_after_fault: list[str]
    acknowledged: list[str] = field(default_factory=list)
    """Every write acknowledged from before the fault until Ready again."""
    writes: str = ""
    """What came of the writes from the fault on (:meth:`Writer.story`)."""
    fault_at: float = 0.0
    """Wall-clock time of the fault (``time.time()``), to place the operator's Events after it."""


async def delete_pods(cluster: TypesenseCluster, pods: list[str]) -> None:
    """Remove these pods at once (grace period 0), as a crash would; the StatefulSet re-creates them."""
    await asyncio.gather(
        *(cluster.kube.delete("v1", "Pod", pod, cluster.namespace, grace_period=0) for pod in pods)
    )


async def full_restart(cluster: TypesenseCluster, timeout: float = 180) -> Recovery:
    """Re-create every pod at once (new IPs), keep writing, and time the way back to Ready."""
    fault, fault_at = time.monotonic(), time.time()
    await delete_pods(cluster, list(await cluster.pod_ips()))
    after = Writer(cluster)
    after.start("after")
    await cluster.wait_not_ready()
    await cluster.wait_ready(timeout=timeout)
    ready_at = time.monotonic()
    ready = ready_at - fault
    await after.acknowledged_after(ready_at)  # the cluster takes writes again, not only reports Ready
    await after.stop()
    return Recovery(
        ready,
        after.first_ack_after(fault),
        list(after.acknowledged),
        list(after.acknowledged),
        after.story(fault),
        fault_at,
    )


@dataclass(frozen=True)
class UserDeletion:
    """``kubectl delete pods --all`` as a user runs it, and the way back, timed from its return."""

    command_seconds: float
    """How long the command took: it waits for every pod's graceful termination."""
    recovery: Recovery
    """Ready and the first accepted write, in seconds after the command returned."""


async def delete_every_pod_as_a_user(
    cluster: TypesenseCluster, kubectl: Callable[..., object], timeout: float = 180
) -> UserDeletion:
    """Run ``kubectl delete pods --all`` in the cluster's namespace under writes: graceful termination,
    then re-creation (new IPs) by the real StatefulSet controller; time the way back to Ready."""
    writer = Writer(cluster)
    writer.start("before")
    await writer.warmed_up()
    before = len(writer.acknowledged)
    fault, fault_at = time.monotonic(), time.time()
    await asyncio.to_thread(kubectl, "delete", "pods", "--all", "--namespace", cluster.namespace)
    returned = time.monotonic()
    await cluster.wait_not_ready()
    await cluster.wait_ready(timeout=timeout)
    ready_at = time.monotonic()
    await writer.acknowledged_after(ready_at)
    await writer.stop()
    recovery = Recovery(
        ready_at - returned,
        writer.first_ack_after(returned),
        writer.acknowledged[before:],
        list(writer.acknowledged),
        writer.story(fault),
        fault_at,
    )
    return UserDeletion(returned - fault, recovery)


@dataclass(frozen=True)
class LostMajority:
    """The pods of a two-of-three fault: the survivor, and the leader and follower taken down."""

    survivor: str
    down: tuple[str, ...]


async def lose_two_of_three(
    cluster: TypesenseCluster,
    take_down: Callable[[str], Awaitable[object]],
    timeout: float = 180,
) -> tuple[LostMajority, Recovery]:
    """Take down the leader and one follower under a steady write load, and time the way back to Ready.

    Nothing is brought back by hand: the operator alone must make the cluster whole again.
    """
    states = await cluster.states()
    leader = next(pod for pod, state in states.items() if state == "LEADER")
    down = (next(pod for pod in states if pod != leader), leader)
    survivor = next(pod for pod in states if pod not in down)
    writer = Writer(cluster)
    writer.start("before")
    await writer.warmed_up()
    before = len(writer.acknowledged)
    fault, fault_at = time.monotonic(), time.time()
    for pod in down:
        await take_down(pod)
    await cluster.wait_not_ready()
    await cluster.wait_ready(timeout=timeout)
    ready_at = time.monotonic()
    ready = ready_at - fault
    await writer.acknowledged_after(ready_at)  # the cluster takes writes again, not only reports Ready
    await writer.stop()
    # A write sent just before the fault may still be acknowledged in its first second.
    first = writer.first_ack_after(fault + 1)
    recovery = Recovery(
        ready,
        None if first is None else first + 1,
        writer.acknowledged[before:],
        list(writer.acknowledged),
        writer.story(fault),
        fault_at,
    )
    return LostMajority(survivor, down), recovery


async def seed_documents(cluster: TypesenseCluster, count: int, batch: int = 10_000) -> None:
    """Import ``count`` documents through the leader, then wait until every node holds them: a node
    restarted afterwards takes real time to load and catch up."""
    for start in range(0, count, batch):
        lines = "\n".join(
            f'{{"id": "seed-{n}", "title": "seeded document number {n}"}}'
            for n in range(start, min(start + batch, count))
        )
        leader = await cluster.leader_ip()
        assert leader is not None, "no leader to import through"
        answer = await cluster.http.post(
            cluster.url(leader, "/collections/books/documents/import?action=upsert"),
            headers=cluster.headers,
            content=lines,
            timeout=120,
        )
        failures = [line for line in answer.text.splitlines() if '"success":true' not in line]
        assert answer.status_code == 200, f"{answer.status_code}: {answer.text[:200]}"
        assert not failures, f"{len(failures)} documents refused: {failures[:3]}"

    async def everywhere() -> bool:
        for ip in (await cluster.pod_ips()).values():
            answer = await cluster.http.get(cluster.url(ip, "/collections/books"), headers=cluster.headers)
            if answer.status_code != 200 or answer.json().get("num_documents", 0) < count:
                return False
        return True

    await wait_until(everywhere, timeout=300, interval=2, what=f"{count} documents on every node")


@dataclass
class CatchUpWatch:
    """Every half second, how many nodes hold what the cluster committed: those that answer /status as
    LEADER, FOLLOWER or CANDIDATE within ``bound`` entries of the highest committed index any node
    reports (the operator's own bound). A node whose pod is gone, or that loads, hangs or lags, does not
    count. A candidate does: when the leader's pod goes, the others stand for election with all they
    hold, and a sample taken in that instant once counted one node of three (a clean-clone CI run)."""

    cluster: TypesenseCluster
    bound: int = 100
    interval: float = 0.5
    samples: list[tuple[float, int]] = field(default_factory=list)
    _task: asyncio.Task[None] | None = None
    _stop: asyncio.Event = field(default_factory=asyncio.Event)

    async def count(self) -> int:
        async def status(ip: str) -> tuple[str, int] | None:
            try:
                answer = await self.cluster.http.get(
                    self.cluster.url(ip, "/status"),
                    headers=self.cluster.headers,
                    timeout=2,
                )
                found = answer.json()
                return str(found.get("state")), int(found["committed_index"])
            except (httpx.HTTPError, ValueError, KeyError, TypeError):
                return None

        answers = await asyncio.gather(*(status(ip) for ip in (await self.cluster.pod_ips()).values()))
        indexes = [
            answer[1] for answer in answers if answer is not None and answer[0] in (*RAFT_MEMBER, "CANDIDATE")
        ]
        return sum(1 for index in indexes if max(indexes) - index <= self.bound)

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        while not self._stop.is_set():
            self.samples.append((time.monotonic(), await self.count()))
            await first_of(self._stop, timeout=self.interval)

    async def stop(self) -> None:
        """Stop after the look under way: never cancelled mid-request (see TypesenseCluster._leave_to_end)."""
        self._stop.set()
        if self._task is not None:
            await self._task

    @property
    def latest(self) -> int | None:
        return self.samples[-1][1] if self.samples else None

    def fewest(self, since: float) -> int:
        return min((n for when, n in self.samples if when >= since), default=0)


@dataclass(frozen=True)
class Roll:
    """A change that needs new pods, rolled under a steady write load, and what the writes met."""

    seconds: float
    """From the change until every pod runs the new revision, is Ready, and every node is caught up."""
    revision: str
    acknowledged: list[str]
    longest_write_gap: float
    """The longest time between two acknowledged writes, from the change on."""
    failed_writes: int
    fewest_caught_up: int
    """The fewest caught-up nodes (:class:`CatchUpWatch`) at any moment from the change on."""
    hung: str | None
    """The follower frozen just before the change, if any."""
    writes: str
    started_at: float
    """Wall-clock time of the change (``time.time()``), to place the operator's Events after it."""


async def roll_under_writes(
    cluster: TypesenseCluster,
    change: Callable[[], Awaitable[object]],
    *,
    freeze: Callable[[str], Awaitable[object]] | None = None,
    replicas: int = 3,
    timeout: float = 600,
) -> Roll:
    """Make ``change`` (a new pod template, by whatever means) under writes and wait for the roll to end.

    With ``freeze``, the lowest-numbered follower is hung with it first, as a node already unhealthy
    when a roll starts; nothing thaws it but its own restart.
    """
    writer = Writer(cluster)
    writer.start("roll")
    await writer.warmed_up()
    watch = CatchUpWatch(cluster)
    watch.start()
    try:
        await wait_until(lambda: watch.latest == replicas, timeout=60, what="every node caught up")
        sts_name = f"{cluster.name}-sts"
        before = await cluster.kube.get("apps/v1", "StatefulSet", sts_name, cluster.namespace)
        assert before is not None
        hung = None
        if freeze is not None:
            hung = min(pod for pod, state in (await cluster.states()).items() if state == "FOLLOWER")
            await freeze(hung)
        started, started_at = time.monotonic(), time.time()
        await change()

        async def new_revision() -> str | None:
            sts = await cluster.kube.get("apps/v1", "StatefulSet", sts_name, cluster.namespace)
            revision = ((sts or {}).get("status") or {}).get("updateRevision")
            return revision if revision != before["status"]["updateRevision"] else None

        revision = str(await wait_until(new_revision, timeout=60, what="the StatefulSet's new revision"))

        async def rolled() -> bool:
            pods = await cluster.kube.list(
                "v1", "Pod", cluster.namespace, labels={"app.kubernetes.io/instance": cluster.name}
            )
            current = [
                p
                for p in pods
                if not p["metadata"].get("deletionTimestamp")
                and p["metadata"].get("labels", {}).get("controller-revision-hash") == revision
                and (condition(p, "Ready") or {}).get("status") == "True"
            ]
            return len(current) == replicas and watch.latest == replicas

        await wait_until(rolled, timeout=timeout, interval=0.5, what=f"every node on revision {revision}")
        seconds = time.monotonic() - started
        await writer.acknowledged_after(time.monotonic())
    finally:
        await writer.stop()
        await watch.stop()
    return Roll(
        seconds,
        revision,
        list(writer.acknowledged),
        writer.longest_gap(started),
        writer.failed(started),
        watch.fewest(started),
        hung,
        writer.story(started),
        started_at,
    )


# ---------------------------------------------------------------- rolls, as the operator reports them


def progressing_condition(obj: dict[str, Any]) -> dict[str, Any]:
    return condition(obj, "Progressing") or {}


async def rolled_by_the_operator(cluster: TypesenseCluster, revision: str) -> None:
    """Until the operator says every node runs ``revision`` and the cluster is Ready."""

    async def up_to_date() -> bool:
        obj = await cluster.get()
        progressing = progressing_condition(obj)
        return (
            progressing.get("reason") == "UpToDate"
            and revision in progressing.get("message", "")
            and ready_condition(obj).get("status") == "True"
        )

    await wait_until(up_to_date, timeout=120, interval=1, what=f"the operator to report revision {revision}")


async def restarts_in_order(cluster: TypesenseCluster) -> list[str]:
    """The NodeRestarted Events' messages, oldest first; each names its pod."""
    events = sorted(await cluster.events("NodeRestarted"), key=lambda e: e["eventTime"])
    return [e["message"] for e in events]


def restarted_pod(message: str) -> str:
    found = re.search(r"\(pod ([a-z0-9-]+)\)", message)
    assert found, message
    return found.group(1)


def assert_each_node_once_and_the_leader_last(restarts: list[str]) -> None:
    assert len(restarts) == 3, restarts
    assert len({restarted_pod(message) for message in restarts}) == 3, restarts
    # Whoever leads when only it is left goes last (raft may have moved leadership meanwhile).
    assert "restarting leader" in restarts[-1], restarts
    assert not any("restarting leader" in message for message in restarts[:-1]), restarts


async def first_restart(cluster: TypesenseCluster) -> str:
    """The pod of the roll's first NodeRestarted Event, once there is one."""

    async def restarted() -> str | None:
        restarts = await restarts_in_order(cluster)
        return restarted_pod(restarts[0]) if restarts else None

    return str(await wait_until(restarted, timeout=60, interval=0.5, what="the roll's first restart"))


@dataclass(frozen=True)
class Rig:
    """What a Typesense benchmark runs on: three real nodes and their control plane, the
    typesense-operator as its own ServiceAccount (a process of this machine, so that its CPU and memory
    are measured), and an admin client."""

    nodes: LocalCluster
    operator: OperatorProcess
    kube: Kube

    @property
    def plane(self) -> ControlPlane:
        assert self.nodes.control_plane is not None
        return self.nodes.control_plane

    @property
    def faults(self) -> NodeFaults:
        return self.nodes.faults(self.kube)

    @property
    def address(self) -> str:
        """Where the nodes' pods reach this machine: a server for them (S3, say) listens there."""
        assert self.nodes.plan is not None
        return str(self.nodes.plan.api_address)


@contextlib.asynccontextmanager
async def typesense_rig(
    repository: Path,
    namespace: str,
    environment: dict[str, str] | None = None,
    keep_logs: Path | None = None,
    images: Sequence[NodeImage] = (),
) -> AsyncIterator[Rig]:
    """A :class:`Rig` with the repository's CRDs and RBAC, and ``namespace`` made; all of it stopped
    and removed at the end. ``environment``: the operator's settings besides this process's own.
    ``images``: loaded onto the nodes besides Typesense's. ``keep_logs``: a directory that receives
    the operator's, the nodes' daemons' and every container's logs, so that a failed run can be read
    afterwards: the containers' as they are written (:class:`PodLogMirror`, since a deleted pod's logs go
    with it), the others when the rig stops."""
    with tempfile.TemporaryDirectory(prefix="bench-") as scratch:
        directory = Path(scratch)
        nodes = LocalCluster(directory / "nodes", extra_images=[typesense_image(), *images])
        await asyncio.to_thread(nodes.start)
        assert nodes.plan is not None
        pod_logs = [pod_logs_directory(node) for node in nodes.plan.nodes]
        operators = OperatorRegistry(directory / "operators")
        try:
            plane = nodes.control_plane
            assert plane is not None
            crds = str(repository / "deploy" / "crds")
            await asyncio.to_thread(plane.kubectl, "apply", "--server-side", "-f", crds)
            rbac = repository / "charts" / "typesense-operator" / "files" / "rbac-rules.yaml"
            operator = operators.get("typesense-operator", plane, rbac, environment=environment)
            async with Kube.connect(plane.kubeconfig) as kube, contextlib.AsyncExitStack() as stack:
                if keep_logs is not None:
                    await stack.enter_async_context(PodLogMirror(directory, pod_logs, keep_logs).running())
                await kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
                yield Rig(nodes, operator, kube)
        finally:
            operators.stop_all()
            if keep_logs is not None:
                _copy_logs(directory, keep_logs, skipped=pod_logs)
            await asyncio.to_thread(nodes.stop)


def _copy_logs(directory: Path, destination: Path, skipped: Sequence[Path]) -> None:
    """Every ``*.log`` under ``directory`` but those under ``skipped`` (the containers', mirrored as
    they grew), at the same relative path under ``destination``."""
    for log in directory.rglob("*.log"):
        if any(log.is_relative_to(kept) for kept in skipped):
            continue
        target = destination / log.relative_to(directory)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(log, target)
