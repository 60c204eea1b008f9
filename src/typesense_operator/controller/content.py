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

from collections.abc import Callable
from typing import Any

from operator_core.controller import FINALIZED
from operator_core.reconciling import Context
from operator_core.steps import Outcome, Steps
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
from typesense_operator.controller.content_scope import (
    READY,
    ContentKind,
    ContentScope,
    NodeApi,
    NoNodeAnswers,
    answer_words,
    connect,
    deletion_api,
    find_cluster,
    refuse,
    report,
    scope_for,
)
from typesense_operator.controller.migration import delete_versioned, sync_versioned
from typesense_operator.controller.runtime import TypesenseRuntime

__all__ = ["CONTENT_KINDS", "finalize_content", "finalizer", "reconciler"]

_RETRY_SECONDS = 5.0
"""The next look when no node answered."""


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


def _refusal(kind: ContentKind[Any], spec: Any, name: str, answer: Any, code: int) -> str:
    """Typesense's refusal of a write, naming what in Typesense it concerns: a synonym's or an
    override's missing collection (Typesense says only "Not Found"), besides Typesense's own words."""
    words = answer_words(answer, code)
    if code == 404 and kind in (SYNONYM, OVERRIDE):
        return f"{kind.noun} {name}: its collection {spec.collection} does not exist in Typesense ({words})"
    return f"{kind.noun} {name}: {words}"


async def sync(scope: ContentScope) -> Outcome:
    """Read what Typesense holds, put it right where it differs from the spec, and say so."""
    assert scope.api is not None
    kind, name, book = scope.kind, scope.name, scope.book
    assert kind.path is not None
    assert kind.plan is not None
    check = scope.context.runtime_of(TypesenseRuntime).settings.content_check_seconds
    path = kind.path(scope.spec, name)
    try:
        if kind is COLLECTION and scope.spec.migration is not None:
            return await sync_versioned(scope, check)
        code, live = await scope.api.call("GET", path)
        if code not in (200, 404):
            return await refuse(
                scope, ContentReason.REJECTED, f"reading {path}: {answer_words(live, code)}", check
            )
        plan = kind.plan(scope.spec, name, live if code == 200 else None)
        if isinstance(plan, Refused):
            return await refuse(scope, plan.reason, plan.message, check)
        if isinstance(plan, Send):
            code, answer = await scope.api.call(plan.method, plan.path, plan.body)
            if code >= 300:
                return await refuse(
                    scope, ContentReason.REJECTED, _refusal(kind, scope.spec, name, answer, code), check
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
    api = await deletion_api(context, obj, spec.cluster.name, f"{kind.noun} {name}")
    if not isinstance(api, NodeApi):
        return api

    def say(event_type: Any, reason: EventReason, note: str) -> None:
        context.recorder.emit_soon(obj, event_type, reason, note)

    try:
        if kind is COLLECTION and spec.migration is not None:
            code = await delete_versioned(api, name, (obj.get("status") or {}).get("migration"))
            answer: Any = None
        else:
            code, answer = await api.call("DELETE", kind.path(spec, name))
    except NoNodeAnswers:
        return _RETRY_SECONDS
    if code in (200, 404):
        say("Normal", EventReason.CONTENT_DELETED, f"{kind.noun} {name} removed from Typesense")
        return FINALIZED
    say(
        "Warning",
        EventReason.CONTENT_NOT_DELETED,
        f"{kind.noun} {name}: {answer_words(answer, code)}; retrying",
    )
    return context.runtime_of(TypesenseRuntime).settings.content_check_seconds
