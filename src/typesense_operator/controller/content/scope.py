"""What the content kinds (collections, aliases, synonyms, overrides, API keys) share: how a kind
differs (:class:`ContentKind`), the cluster's API on its nodes (:class:`NodeApi`, the last leader
first, with the admin key), the scope of one reconcile, and its first steps: the cluster found in the
watch cache and QuorumReady (:func:`find_cluster`; until then the object waits for its next change),
the key and the node pods from the caches (:func:`connect`). The kinds' own steps are in
:mod:`.content`, :mod:`.migration` and :mod:`.apikeys`.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from operator_core.apimodel import ApiModel
from operator_core.crdgen import CustomResource
from operator_core.reconciling import WAIT_FOR_CHANGE, Context
from operator_core.secrets import register_secret
from operator_core.steps import Outcome, Scope
from typesense_operator.api import TYPESENSE_CLUSTER
from typesense_operator.api.reasons import ContentReason, EventReason
from typesense_operator.content.plan import ContentPlan
from typesense_operator.content.versions import ServerVersion, speaks_sets
from typesense_operator.controller.cluster.nodes import decoded_key, node_targets
from typesense_operator.controller.runtime import TypesenseRuntime
from typesense_operator.quorum.probe import API_KEY_HEADER, NodeAddressing, NodeTarget, Unreachable
from typesense_operator.resources import Cluster

__all__ = [
    "FINALIZER",
    "NO_ANSWER_RETRY_SECONDS",
    "READY",
    "ContentKind",
    "ContentScope",
    "NoNodeAnswers",
    "NodeApi",
    "Removal",
    "answer_words",
    "cluster_api",
    "connect",
    "deletion_api",
    "find_cluster",
    "message_of",
    "named_cluster",
    "no_answer",
    "refuse",
    "remove_from_typesense",
    "removes_content",
    "report",
    "scope_for",
    "server_version",
]

READY = "Ready"
FINALIZER = "ts.opentelekomcloud.com/typesense-content"
"""Kept on an object whose deletion removes it from Typesense (deletionPolicy Delete)."""

NO_ANSWER_RETRY_SECONDS = 5.0
"""The next look when no node answered."""

_REQUEST_TIMEOUT_SECONDS = 10.0
"""One request to Typesense: a PATCH of a collection's fields indexes every document again."""

SpecT = TypeVar("SpecT", bound=ApiModel)


@dataclass(frozen=True)
class ContentKind(Generic[SpecT]):
    """What differs between the four kinds: their spec, their name and path in Typesense, their plan."""

    resource: CustomResource
    spec_model: type[SpecT]
    noun: str
    """How an Event names it: "collection", "alias", "synonym", "override"."""
    name: Callable[[SpecT, str], str]
    """Its name (or id) in Typesense, from the spec and the object's name."""
    path: Callable[[SpecT, str], str] | None = None
    """Where Typesense serves it, given its name (an API key's id is only known once it is made)."""
    plan: Callable[[SpecT, str, Mapping[str, Any] | None], ContentPlan] | None = None


def named_cluster(obj: dict[str, Any]) -> list[tuple[str, str]]:
    """The cluster a content object names: its changes (QuorumReady at last, made again) wake it."""
    name = ((obj.get("spec") or {}).get("cluster") or {}).get("name")
    return [(TYPESENSE_CLUSTER.kind, name)] if name else []


def removes_content(obj: dict[str, Any]) -> bool:
    """Whether deleting the object removes it from Typesense: deletionPolicy Delete."""
    return (obj.get("spec") or {}).get("deletionPolicy") == "Delete"


class NoNodeAnswers(Exception):
    """No node of the cluster answered a request."""


@dataclass(frozen=True)
class NodeApi:
    """Typesense's API on a cluster's nodes, the last leader first, with the admin key."""

    addressing: NodeAddressing
    targets: list[NodeTarget]
    key: str
    server: tuple[str, str] = ("", "")
    """The cluster's uid and image: what its server's version is remembered by (a roll to another image
    is another key)."""

    async def call(self, method: str, path: str, body: Mapping[str, Any] | None = None) -> tuple[int, Any]:
        """(status code, JSON answer) from the first node that answers; :class:`NoNodeAnswers` else."""
        data = json.dumps(body).encode() if body is not None else None
        code, answer = await self.call_raw(method, path, data, "application/json")
        try:
            return code, json.loads(answer) if answer else None
        except ValueError:
            return code, {"message": answer.decode(errors="replace")[:300]}

    async def call_raw(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        content_type: str = "text/plain",
        timeout: float = _REQUEST_TIMEOUT_SECONDS,
    ) -> tuple[int, bytes]:
        """(status code, answer) from the first node that answers (a JSONL export or import)."""
        headers = {API_KEY_HEADER: self.key, "Content-Type": content_type}
        missed = []
        for target in self.targets:
            try:
                return await self.addressing.send(method, target, path, headers, timeout, body)
            except Unreachable as error:
                missed.append(f"{target.pod}: {error}")
        raise NoNodeAnswers("; ".join(missed) or "no node pod exists")


def message_of(answer: Any) -> str:
    return str(answer.get("message")) if isinstance(answer, dict) and answer.get("message") else str(answer)


def answer_words(answer: Any, code: int) -> str:
    """Typesense's refusal in its own words, and its HTTP status."""
    return f"{message_of(answer)} (HTTP {code})"


WAIT_FOR_CLUSTER_SECONDS = 15.0
"""How often a deletion looks again at a cluster that is not QuorumReady."""


async def deletion_api(scope: ContentScope, what: str) -> NodeApi | Outcome:
    """The cluster's API for removing ``what`` (the deleted object's content) from Typesense, or the
    finalizing step's outcome without it: let go when the cluster is gone or going (nothing to remove
    from) or its admin key is missing (said), a wait while it is not QuorumReady (said)."""
    context, obj = scope.context, scope.obj
    found = await context.kube.get(
        TYPESENSE_CLUSTER.api_version,
        TYPESENSE_CLUSTER.kind,
        scope.spec.cluster.name,
        obj["metadata"]["namespace"],
    )
    if found is None or found["metadata"].get("deletionTimestamp"):
        return scope.let_go()
    if (found.get("status") or {}).get("phase") != "QuorumReady":
        note = f"{what} is removed once the cluster is QuorumReady"
        context.recorder.emit_soon(obj, "Warning", EventReason.CONTENT_WAITING, note)
        return scope.retry_in(WAIT_FOR_CLUSTER_SECONDS)
    api = await cluster_api(context, Cluster.from_object(found), found)
    if isinstance(api, str):
        context.recorder.emit_soon(
            obj, "Warning", EventReason.CONTENT_NOT_DELETED, f"{what} is left in Typesense: {api}"
        )
        return scope.let_go()
    return api


Removal = tuple[str, Callable[[], Awaitable[tuple[int, Any]]]]
"""What a finalizer removes from Typesense: its words (``collection books``) and the request that removes
it, answering Typesense's status and body."""


async def remove_from_typesense(scope: ContentScope, removals: Sequence[Removal], removed: str) -> Outcome:
    """Each removal in turn; a 200 or a 404 is gone. Then ``removed`` is said (a Normal Event) and the
    finalizer may go. A refusal is said as a Warning and tried again at the next content check; no node
    answering is tried again soon, and says nothing (a cluster that comes back answers it)."""
    context, obj = scope.context, scope.obj
    try:
        for what, remove in removals:
            code, answer = await remove()
            if code not in (200, 404):
                note = f"{what}: {answer_words(answer, code)}; retrying"
                context.recorder.emit_soon(obj, "Warning", EventReason.CONTENT_NOT_DELETED, note)
                return scope.retry_in(context.runtime_of(TypesenseRuntime).settings.content_check_seconds)
    except NoNodeAnswers:
        return scope.retry_in(NO_ANSWER_RETRY_SECONDS)
    context.recorder.emit_soon(obj, "Normal", EventReason.CONTENT_DELETED, removed)
    return scope.let_go()


async def refuse(scope: ContentScope, reason: str, note: str, look_again: float) -> Outcome:
    """Ready False with ``reason`` (a Warning Event once per new message); look again in ``look_again``."""
    await scope.book.set(
        READY, "False", reason, note, warn=EventReason.CONTENT_REFUSED, warn_on_new_message=True
    )
    return scope.wait(look_again)


async def cluster_api(context: Context, cluster: Cluster, cluster_obj: Mapping[str, Any]) -> NodeApi | str:
    """The cluster's API (the last leader first), or why there is none (the admin key missing)."""
    kube = context.kube
    key = decoded_key(await kube.get("v1", "Secret", cluster.admin_key_secret_name, cluster.namespace))
    if not key:
        return f"the cluster's admin key (Secret {cluster.admin_key_secret_name}) is not there"
    register_secret(key)
    targets, _ = await node_targets(kube, cluster)
    leaders = {
        node.get("pod")
        for node in (cluster_obj.get("status") or {}).get("nodes") or []
        if node.get("state") == "LEADER"
    }
    targets.sort(key=lambda target: (target.pod not in leaders, target.index))
    server = (str(cluster_obj["metadata"].get("uid") or ""), cluster.spec.image)
    return NodeApi(context.runtime_of(TypesenseRuntime).addressing, targets, key, server)


async def server_version(context: Context, api: NodeApi) -> ServerVersion | None:
    """The version the cluster's server reports (``GET /debug``), asked once per cluster and image; None
    when it says none that can be read (a nightly build), which is taken as an API before 30."""
    versions = context.runtime_of(TypesenseRuntime).server_versions
    if api.server in versions:
        return versions[api.server]
    code, answer = await api.call("GET", "/debug")
    if code != 200 or not isinstance(answer, dict):
        return None
    version = ServerVersion.parse(str(answer.get("version") or ""))
    versions[api.server] = version
    return version


@dataclass(kw_only=True)
class ContentScope(Scope):
    """One reconcile of one content object: its spec, its name in Typesense, and what was found."""

    kind: ContentKind[Any]
    spec: Any
    name: str
    context: Context
    cluster: Cluster | None = None
    cluster_obj: dict[str, Any] | None = None
    api: NodeApi | None = None
    version: ServerVersion | None = None
    """What the cluster's server runs (:func:`server_version`)."""
    settled: bool = False

    @property
    def uses_sets(self) -> bool:
        """Whether the cluster keeps synonyms and overrides in sets (Typesense 30 on)."""
        return speaks_sets(self.version)

    def wait(self, seconds: float) -> Outcome:
        self.next_look, self.settled = seconds, True
        return Outcome.STOP


def scope_for(kind: ContentKind[Any]) -> Callable[[dict[str, Any], Context], ContentScope]:
    def made(obj: dict[str, Any], context: Context) -> ContentScope:
        spec = kind.spec_model.model_validate(obj.get("spec") or {})
        return ContentScope(
            **Scope.parts(obj, context),
            kind=kind,
            spec=spec,
            name=kind.name(spec, obj["metadata"]["name"]),
            context=context,
            status=dict(obj.get("status") or {}),
        )

    return made


async def find_cluster(scope: ContentScope) -> Outcome:
    """The cluster must exist and be QuorumReady; until then the object waits for its next change."""
    cluster_name, namespace = scope.spec.cluster.name, scope.obj["metadata"]["namespace"]
    found = await scope.kube.get(
        TYPESENSE_CLUSTER.api_version, TYPESENSE_CLUSTER.kind, cluster_name, namespace
    )
    if found is None:
        note = f"TypesenseCluster {cluster_name} does not exist in namespace {namespace}"
        await scope.book.set(
            READY, "False", ContentReason.CLUSTER_NOT_FOUND, note, warn=EventReason.CLUSTER_NOT_FOUND
        )
        return scope.wait(WAIT_FOR_CHANGE)
    phase = (found.get("status") or {}).get("phase")
    if phase != "QuorumReady" or found["metadata"].get("deletionTimestamp"):
        state = "being deleted" if found["metadata"].get("deletionTimestamp") else f"{phase or 'new'}"
        note = (
            f"waiting for TypesenseCluster {cluster_name} to be QuorumReady (it is {state}); "
            f"the {scope.kind.noun} goes in as soon as it is"
        )
        await scope.book.set(READY, "False", ContentReason.CLUSTER_NOT_READY, note)
        return scope.wait(WAIT_FOR_CHANGE)
    scope.cluster, scope.cluster_obj = Cluster.from_object(found), found
    scope.status["clusterUid"] = found["metadata"].get("uid")
    return Outcome.CONTINUE


async def connect(scope: ContentScope) -> Outcome:
    assert scope.cluster is not None
    assert scope.cluster_obj is not None
    api = await cluster_api(scope.context, scope.cluster, scope.cluster_obj)
    if isinstance(api, str):
        await scope.book.set(
            READY, "False", ContentReason.ADMIN_KEY_MISSING, api, warn=EventReason.CONTENT_REFUSED
        )
        return scope.wait(WAIT_FOR_CHANGE)
    scope.api = api
    try:
        scope.version = await server_version(scope.context, api)
    except NoNodeAnswers as error:
        return await no_answer(scope, error)
    return Outcome.CONTINUE


async def no_answer(scope: ContentScope, error: NoNodeAnswers) -> Outcome:
    """Ready False (no node answered, and what each said), and a look again soon."""
    note = f"no node of the cluster answered: {error}"
    await scope.book.set(READY, "False", ContentReason.NODES_UNREACHABLE, note)
    return scope.wait(NO_ANSWER_RETRY_SECONDS)


async def report(scope: ContentScope, completed: bool) -> None:
    if scope.settled:
        scope.status["observedGeneration"] = scope.obj["metadata"].get("generation")
