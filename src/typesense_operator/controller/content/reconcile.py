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

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from operator_core.reconciling import Context
from operator_core.steps import Finalizing, Outcome, Steps
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
    plan_in_set,
    plan_override,
    plan_synonym,
    synonym_path,
)
from typesense_operator.content.versions import (
    CURATION_SETS,
    SYNONYM_SETS,
    SetKind,
    default_set_name,
    set_item_path,
    set_path,
    speaks_sets,
)
from typesense_operator.controller.content.migration import delete_versioned, sync_versioned
from typesense_operator.controller.content.scope import (
    READY,
    ContentKind,
    ContentScope,
    NodeApi,
    NoNodeAnswers,
    answer_words,
    connect,
    deletion_api,
    find_cluster,
    no_answer,
    refuse,
    remove_from_typesense,
    report,
    scope_for,
    server_version,
)
from typesense_operator.controller.runtime import TypesenseRuntime

__all__ = ["CONTENT_KINDS", "finalizer", "reconciler", "remove_content"]


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
        in_set = _set_of(kind, scope.spec)
        if in_set is not None:
            set_kind, set_name, named = in_set
            if scope.uses_sets:
                return await _sync_in_set(scope, set_kind, set_name, check)
            if named:
                note = (
                    f"spec.{set_kind.spec_field}: Typesense {scope.version or 'before 30'} has no "
                    f"{set_kind.route} (they came with 30.0; its {kind.noun}s live under their collection)"
                )
                return await refuse(scope, ContentReason.NOT_IN_THIS_VERSION, note, check)
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
        return await no_answer(scope, error)
    return await _in_sync(scope, live if code == 200 else None)


async def _in_sync(scope: ContentScope, live: Any) -> Outcome:
    kind, name, book = scope.kind, scope.name, scope.book
    check = scope.context.runtime_of(TypesenseRuntime).settings.content_check_seconds
    scope.status["name"] = name
    if kind is COLLECTION and isinstance(live, dict):
        scope.status["documents"] = live.get("num_documents")
        scope.status["fields"] = len(live.get("fields") or [])
    await book.set(
        READY, "True", ContentReason.IN_SYNC, f"Typesense holds {kind.noun} {name} as the spec declares"
    )
    return scope.wait(check)


async def _served_at(context: Context, api: NodeApi, kind: ContentKind[Any], spec: Any, name: str) -> str:
    """Where Typesense holds the object: on 30 and later, a synonym or an override in its set."""
    assert kind.path is not None
    in_set = _set_of(kind, spec)
    if in_set is None or not speaks_sets(await server_version(context, api)):
        return kind.path(spec, name)
    set_kind, set_name, _ = in_set
    return set_item_path(set_kind, set_name, name)


def _set_of(kind: ContentKind[Any], spec: Any) -> tuple[SetKind, str, bool] | None:
    """The kind of set a synonym or an override is an item of on Typesense 30 and later, the set
    (the spec's, else the collection's own), and whether the spec named it; None for the other kinds."""
    if kind is SYNONYM:
        set_kind, named = SYNONYM_SETS, spec.synonym_set
    elif kind is OVERRIDE:
        set_kind, named = CURATION_SETS, spec.curation_set
    else:
        return None
    return set_kind, named or default_set_name(set_kind, spec.collection), named is not None


async def _sync_in_set(scope: ContentScope, set_kind: SetKind, set_name: str, check: float) -> Outcome:
    """Typesense 30 on: the rule as an item of its set, the set linked to its collection."""
    api, kind, spec, name = scope.api, scope.kind, scope.spec, scope.name
    assert api is not None
    assert kind.plan is not None
    try:
        code, collection = await api.call("GET", collection_path(spec.collection))
        if code != 200:
            return await refuse(
                scope, ContentReason.REJECTED, _refusal(kind, spec, name, collection, code), check
            )
        locks = scope.context.runtime_of(TypesenseRuntime).set_locks
        async with locks.setdefault((api.server[0], set_kind.route, set_name), asyncio.Lock()):
            code, live = await api.call("GET", set_item_path(set_kind, set_name, name))
            set_exists = code == 200 or (await api.call("GET", set_path(set_kind, set_name)))[0] == 200
            item_plan = kind.plan(spec, name, live if code == 200 else None)
            linked = [str(linked) for linked in collection.get(set_kind.route) or []]
            for send in plan_in_set(set_kind, set_name, name, item_plan, set_exists, linked, spec.collection):
                code, answer = await api.call(send.method, send.path, send.body)
                if code >= 300:
                    words = f"{send.method} {send.path}: {answer_words(answer, code)}"
                    return await refuse(scope, ContentReason.REJECTED, f"{kind.noun} {name}: {words}", check)
                await scope.book.event(
                    "Normal", EventReason.CONTENT_APPLIED, f"{kind.noun} {name}: {send.change}"
                )
    except NoNodeAnswers as error:
        return await no_answer(scope, error)
    scope.status["set"] = set_name
    return await _in_sync(scope, None)


def reconciler(kind: ContentKind[Any]) -> Callable[[dict[str, Any], Context], Any]:
    """The reconcile of one kind: the steps, the status once; returns the seconds until the next look."""
    return Steps(kind.resource, scope_for(kind), (find_cluster, connect, sync), report).reconcile


def finalizer(kind: ContentKind[Any]) -> Callable[[dict[str, Any], Context], Awaitable[float]]:
    """Remove the object from Typesense (deletionPolicy Delete), then let it go."""
    return Finalizing(scope_for(kind), [remove_content]).finalize


async def remove_content(scope: ContentScope) -> Outcome:
    """The object removed from Typesense. A cluster that is gone or going has nothing to remove from;
    one that is not QuorumReady is waited for, and said."""
    kind, spec, name, obj, context = scope.kind, scope.spec, scope.name, scope.obj, scope.context
    assert kind.path is not None
    what = f"{kind.noun} {name}"
    api = await deletion_api(scope, what)
    if not isinstance(api, NodeApi):
        return api

    async def remove() -> tuple[int, Any]:
        if kind is COLLECTION and spec.migration is not None:
            return await delete_versioned(api, name, (obj.get("status") or {}).get("migration")), None
        return await api.call("DELETE", await _served_at(context, api, kind, spec, name))

    return await remove_from_typesense(scope, [(what, remove)], f"{what} removed from Typesense")
