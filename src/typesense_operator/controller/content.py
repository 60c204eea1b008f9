"""TypesenseCollection, TypesenseAlias, TypesenseSynonym and TypesenseOverride: what lives inside a
cluster, put into Typesense through the cluster's own API and kept there.

One reconcile shape for the four kinds (:data:`CONTENT_KINDS` says what differs): the cluster is
found in the watch cache and must be QuorumReady (until then the object waits, saying so, and the
cluster's next change wakes it); the admin key and the node pods come from the caches too; what
Typesense holds is read, compared with the spec by the pure planner
(:mod:`typesense_operator.content.plan`) and, where it differs, one request puts it right. The
requests go to the node that led at the cluster's last look, else to any node that answers
(Typesense hands a follower's writes to its leader). A check where nothing differs writes nothing,
and every object is looked at again every :attr:`TypesenseSettings.content_check_seconds`: a change
made through Typesense's own API is put back within that time, with no request to the API server.

With ``deletionPolicy: Delete`` a finalizer removes the object from Typesense before it goes; a
cluster that is gone (or going) has nothing left to remove from.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from operator_core.apimodel import ApiModel
from operator_core.controller import FINALIZED
from operator_core.crdgen import CustomResource
from operator_core.reconciling import WAIT_FOR_CHANGE, Context
from operator_core.secrets import register_secret
from operator_core.steps import Outcome, Scope, Steps
from typesense_operator.api import TYPESENSE_CLUSTER
from typesense_operator.api.content import (
    TYPESENSE_ALIAS,
    TYPESENSE_COLLECTION,
    TYPESENSE_OVERRIDE,
    TYPESENSE_SYNONYM,
    TypesenseAliasSpec,
    TypesenseCollectionSpec,
    TypesenseOverrideSpec,
    TypesenseSynonymSpec,
)
from typesense_operator.api.reasons import ContentReason, EventReason
from typesense_operator.content.plan import (
    ContentPlan,
    InSync,
    Refused,
    Send,
    alias_path,
    collection_path,
    override_path,
    plan_alias,
    plan_collection,
    plan_override,
    plan_synonym,
    synonym_path,
)
from typesense_operator.controller.nodes import decoded_key, node_targets
from typesense_operator.controller.runtime import TypesenseRuntime
from typesense_operator.quorum.probe import API_KEY_HEADER, NodeAddressing, NodeTarget, Unreachable
from typesense_operator.resources import Cluster

__all__ = [
    "CONTENT_KINDS",
    "FINALIZER",
    "ContentKind",
    "finalize_content",
    "named_cluster",
    "removes_content",
]

READY = "Ready"
FINALIZER = "ts.opentelekomcloud.com/typesense-content"
"""Kept on an object whose deletion removes it from Typesense (deletionPolicy Delete)."""
_REQUEST_TIMEOUT_SECONDS = 10.0
"""One request to Typesense: a PATCH of a collection's fields indexes every document again."""
_RETRY_SECONDS = 5.0
"""The next look when no node answered."""
_WAIT_FOR_CLUSTER_SECONDS = 15.0
"""How often a deletion looks again at a cluster that is not QuorumReady."""

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


def _named(spec: Any, object_name: str) -> str:
    return str(spec.name or object_name)


def _by_id(spec: Any, object_name: str) -> str:
    return str(spec.id or object_name)


COLLECTION = ContentKind[TypesenseCollectionSpec](
    TYPESENSE_COLLECTION, TypesenseCollectionSpec, "collection", _named,
    lambda spec, name: collection_path(name), plan_collection,
)  # fmt: skip
ALIAS = ContentKind[TypesenseAliasSpec](
    TYPESENSE_ALIAS, TypesenseAliasSpec, "alias", _named, lambda spec, name: alias_path(name), plan_alias
)
SYNONYM = ContentKind[TypesenseSynonymSpec](
    TYPESENSE_SYNONYM, TypesenseSynonymSpec, "synonym", _by_id,
    lambda spec, rule: synonym_path(spec.collection, rule), plan_synonym,
)  # fmt: skip
OVERRIDE = ContentKind[TypesenseOverrideSpec](
    TYPESENSE_OVERRIDE, TypesenseOverrideSpec, "override", _by_id,
    lambda spec, rule: override_path(spec.collection, rule), plan_override,
)  # fmt: skip
CONTENT_KINDS: tuple[ContentKind[Any], ...] = (COLLECTION, ALIAS, SYNONYM, OVERRIDE)


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

    async def call(self, method: str, path: str, body: Mapping[str, Any] | None = None) -> tuple[int, Any]:
        """(status code, JSON answer) from the first node that answers; :class:`NoNodeAnswers` else."""
        headers = {API_KEY_HEADER: self.key, "Content-Type": "application/json"}
        data = json.dumps(body).encode() if body is not None else None
        missed = []
        for target in self.targets:
            try:
                code, answer = await self.addressing.send(
                    method, target, path, headers, _REQUEST_TIMEOUT_SECONDS, data
                )
            except Unreachable as error:
                missed.append(f"{target.pod}: {error}")
                continue
            try:
                return code, json.loads(answer) if answer else None
            except ValueError:
                return code, {"message": answer.decode(errors="replace")[:300]}
        raise NoNodeAnswers("; ".join(missed) or "no node pod exists")


def message_of(answer: Any) -> str:
    return str(answer.get("message")) if isinstance(answer, dict) and answer.get("message") else str(answer)


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
    return NodeApi(context.runtime_of(TypesenseRuntime).addressing, targets, key)


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
    settled: bool = False

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
    return Outcome.CONTINUE


async def sync(scope: ContentScope) -> Outcome:
    """Read what Typesense holds, put it right where it differs from the spec, and say so."""
    assert scope.api is not None
    kind, name, book = scope.kind, scope.name, scope.book
    assert kind.path is not None
    assert kind.plan is not None
    check = scope.context.runtime_of(TypesenseRuntime).settings.content_check_seconds
    path = kind.path(scope.spec, name)
    try:
        code, live = await scope.api.call("GET", path)
        if code not in (200, 404):
            return await _rejected(scope, f"reading {path}: {message_of(live)} (HTTP {code})", check)
        plan = kind.plan(scope.spec, name, live if code == 200 else None)
        if isinstance(plan, Refused):
            note = plan.message
            await book.set(
                READY, "False", plan.reason, note, warn=EventReason.CONTENT_REFUSED, warn_on_new_message=True
            )
            return scope.wait(check)
        if isinstance(plan, Send):
            code, answer = await scope.api.call(plan.method, plan.path, plan.body)
            if code >= 300:
                return await _rejected(
                    scope, f"{kind.noun} {name}: {message_of(answer)} (HTTP {code})", check
                )
            await book.event("Normal", EventReason.CONTENT_APPLIED, f"{kind.noun} {name} {plan.change}")
            if kind is COLLECTION:
                code, live = await scope.api.call("GET", path)
        else:
            assert isinstance(plan, InSync)
    except NoNodeAnswers as error:
        note = f"no node of the cluster answered: {error}"
        await book.set(READY, "False", ContentReason.NODES_UNREACHABLE, note)
        return scope.wait(_RETRY_SECONDS)
    scope.status["name"] = name
    if kind is COLLECTION and code == 200 and isinstance(live, dict):
        scope.status["documents"] = live.get("num_documents")
        scope.status["fields"] = len(live.get("fields") or [])
    await book.set(
        READY, "True", ContentReason.IN_SYNC, f"Typesense holds {kind.noun} {name} as the spec declares"
    )
    return scope.wait(check)


async def _rejected(scope: ContentScope, note: str, check: float) -> Outcome:
    await scope.book.set(
        READY,
        "False",
        ContentReason.REJECTED,
        note,
        warn=EventReason.CONTENT_REFUSED,
        warn_on_new_message=True,
    )
    return scope.wait(check)


async def report(scope: ContentScope, completed: bool) -> None:
    if scope.settled:
        scope.status["observedGeneration"] = scope.obj["metadata"].get("generation")


def reconciler(kind: ContentKind[Any]) -> Callable[[dict[str, Any], Context], Any]:
    """The reconcile of one kind: the steps, the status once; returns the seconds until the next look."""
    return Steps(kind.resource, scope_for(kind), (find_cluster, connect, sync), report).reconcile


def finalizer(kind: ContentKind[Any]) -> Callable[[dict[str, Any], Context], Any]:
    async def finalize(obj: dict[str, Any], context: Context) -> float:
        return await finalize_content(kind, obj, context)

    return finalize


async def finalize_content(kind: ContentKind[Any], obj: dict[str, Any], context: Context) -> float:
    """Remove the object from Typesense (deletionPolicy Delete), then let it go. A cluster that is gone
    or going has nothing to remove from; one that is not QuorumReady is waited for, and said."""
    assert kind.path is not None
    spec = kind.spec_model.model_validate(obj.get("spec") or {})
    name = kind.name(spec, obj["metadata"]["name"])
    namespace = obj["metadata"]["namespace"]
    found = await context.kube.get(
        TYPESENSE_CLUSTER.api_version, TYPESENSE_CLUSTER.kind, spec.cluster.name, namespace
    )
    if found is None or found["metadata"].get("deletionTimestamp"):
        return FINALIZED

    def say(event_type: Any, reason: EventReason, note: str) -> None:
        context.recorder.emit_soon(obj, event_type, reason, note)

    if (found.get("status") or {}).get("phase") != "QuorumReady":
        say(
            "Warning",
            EventReason.CONTENT_WAITING,
            f"{kind.noun} {name} is removed once the cluster is QuorumReady",
        )
        return _WAIT_FOR_CLUSTER_SECONDS
    api = await cluster_api(context, Cluster.from_object(found), found)
    if isinstance(api, str):
        say("Warning", EventReason.CONTENT_NOT_DELETED, f"{kind.noun} {name} is left in Typesense: {api}")
        return FINALIZED
    try:
        code, answer = await api.call("DELETE", kind.path(spec, name))
    except NoNodeAnswers:
        return _RETRY_SECONDS
    if code in (200, 404):
        say("Normal", EventReason.CONTENT_DELETED, f"{kind.noun} {name} removed from Typesense")
        return FINALIZED
    say(
        "Warning",
        EventReason.CONTENT_NOT_DELETED,
        f"{kind.noun} {name}: {message_of(answer)} (HTTP {code}); retrying",
    )
    return context.runtime_of(TypesenseRuntime).settings.content_check_seconds
