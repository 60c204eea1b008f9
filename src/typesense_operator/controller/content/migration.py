"""A TypesenseCollection with ``spec.migration``: Typesense holds it as ``<name>-<n>`` behind an alias
``<name>``, and a change it cannot make in place is made by migration.

:func:`sync_versioned` makes the first version and the alias, changes the current version in place
where Typesense can (the same plan as any collection), and otherwise migrates: the next version is
made with the new schema, every document is exported from the current one and imported into it in
``batchSize`` batches (``action=upsert``: a copy started again after a crash repeats nothing;
``dirty_values=coerce_or_reject``: a value Typesense can turn into the new type is turned), the
synonyms and overrides follow, the count is checked, what clients wrote to the old version during
the copy is carried over (:mod:`typesense_operator.content.catch_up`), and only then is the alias
moved, in one PUT, so that a search through it never finds nothing; a second catch-up, 2 s later,
carries the writes that were under way through the alias as it moved. A document that does not fit
the new schema stops the migration before the alias moves: the new version is dropped and
Typesense's words are in Ready. Each old version is dropped ``dropOldAfterSeconds`` after its own
migration (``status.migration.retiring``).
"""

from __future__ import annotations

import asyncio
import json
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import quote

from operator_core.clock import utcnow, wire_time
from operator_core.steps import Outcome
from typesense_operator.api.content import TypesenseCollectionSpec
from typesense_operator.api.reasons import ContentReason, EventReason
from typesense_operator.content.catch_up import catch_up, documents_by_id
from typesense_operator.content.plan import (
    InSync,
    Refused,
    Send,
    alias_path,
    batches,
    collection_path,
    collection_schema,
    import_failures,
    import_path,
    plan_collection,
    retiring_after_migration,
    retiring_of,
    version_of,
    versioned_name,
)
from typesense_operator.content.versions import set_links
from typesense_operator.controller.content.scope import ContentScope, NodeApi, answer_words, refuse

__all__ = ["delete_versioned", "sync_versioned"]

_COPY_TIMEOUT_SECONDS = 120.0
"""One export or one import batch: the export holds every document of the collection."""
READY = "Ready"
CATCH_UP_SETTLE_SECONDS = 2.0
"""How long after the alias moved the second catch-up waits: a write that resolved the alias just
before it moved lands in the old collection within a request's time."""


async def sync_versioned(scope: ContentScope, check: float) -> Outcome:
    """Make, change in place, or migrate a collection with ``spec.migration`` (``scope``: its
    ContentScope, its API connected)."""
    spec: TypesenseCollectionSpec = scope.spec
    api, name, book = scope.api, scope.name, scope.book
    assert api is not None
    code, alias = await api.call("GET", alias_path(name))
    current = alias.get("collection_name") if code == 200 and isinstance(alias, dict) else None
    if current is None:
        current = versioned_name(name, 1)
        if (await api.call("GET", collection_path(current)))[0] == 404:
            code, answer = await api.call("POST", "/collections", collection_schema(spec, current))
            if code >= 300:
                return await refuse(
                    scope,
                    ContentReason.REJECTED,
                    f"collection {current}: {answer_words(answer, code)}",
                    check,
                )
        code, answer = await api.call("PUT", alias_path(name), {"collection_name": current})
        if code >= 300:
            return await refuse(
                scope, ContentReason.REJECTED, f"alias {name}: {answer_words(answer, code)}", check
            )
        await book.event(
            "Normal", EventReason.CONTENT_APPLIED, f"collection {current} made, and alias {name} names it"
        )
    await _drop_source_when_due(scope)
    code, live = await api.call("GET", collection_path(current))
    plan = plan_collection(spec, current, live if code == 200 else None)
    if isinstance(plan, Send):
        code, answer = await api.call(plan.method, plan.path, plan.body)
        if code >= 300:
            return await refuse(
                scope, ContentReason.REJECTED, f"collection {current}: {answer_words(answer, code)}", check
            )
        await book.event("Normal", EventReason.CONTENT_APPLIED, f"collection {current} {plan.change}")
    elif isinstance(plan, Refused):
        migrated = await _migrate(scope, current, plan.message)
        if migrated is None:
            return scope.wait(check)
        current = migrated
    else:
        assert isinstance(plan, InSync)
    code, live = await api.call("GET", collection_path(current))
    scope.status.update(name=current, alias=name)
    if code == 200 and isinstance(live, dict):
        scope.status.update(documents=live.get("num_documents"), fields=len(live.get("fields") or []))
    note = f"Typesense holds collection {current}, named by alias {name}, as the spec declares"
    await book.set(READY, "True", ContentReason.IN_SYNC, note)
    return scope.wait(check)


async def _migrate(scope: ContentScope, source: str, why: str) -> str | None:
    """Copy ``source`` into the next version with the spec's schema and move the alias; the target's
    name, or None when the migration failed (said in Ready, the alias untouched)."""
    spec: TypesenseCollectionSpec = scope.spec
    api, name, book = scope.api, scope.name, scope.book
    assert api is not None
    assert spec.migration is not None
    target = versioned_name(name, version_of(source, name) + 1)
    await book.set(READY, "False", ContentReason.MIGRATING, f"migrating {source} to {target}: {why}")
    await scope.write_progress(scope.kind.resource)  # seen while it runs, not only once it is over
    if (await api.call("GET", collection_path(target)))[0] == 200:
        await api.call("DELETE", collection_path(target))  # a copy cut short: start it again, whole
    schema = collection_schema(spec, target)
    if scope.uses_sets:
        # Typesense 30 on: the synonyms and overrides are items of sets, which the new version links
        # as the old one does (the content objects' own links go to whatever the alias names).
        code, held = await api.call("GET", collection_path(source))
        schema |= set_links(held if code == 200 and isinstance(held, dict) else {})
    code, answer = await api.call("POST", "/collections", schema)
    if code >= 300:
        return await _failed(scope, target, f"making {target}: {answer_words(answer, code)}", drop=False)
    code, exported = await _export_raw(api, source)
    if code != 200:
        return await _failed(scope, target, f"exporting {source}: HTTP {code}")
    documents = [line for line in exported.splitlines() if line.strip()]
    failure = await _import(api, target, documents, spec.migration.batch_size)
    if failure is not None:
        return await _failed(scope, target, f"a document of {source} does not fit the new schema: {failure}")
    for part in () if scope.uses_sets else ("synonyms", "overrides"):
        code, listed = await api.call("GET", f"{collection_path(source)}/{part}")
        for rule in (listed or {}).get(part) or [] if code == 200 else []:
            kept = {key: value for key, value in rule.items() if key != "id"}
            await api.call("PUT", f"{collection_path(target)}/{part}/{rule['id']}", kept)
    code, held = await api.call("GET", collection_path(target))
    if code != 200 or int(held.get("num_documents") or 0) < len(documents):
        count = held.get("num_documents") if isinstance(held, dict) else None
        return await _failed(
            scope, target, f"{target} holds {count} documents of the {len(documents)} copied"
        )
    # What clients wrote to the old collection during the copy, before the alias moves; then, once it
    # has moved, what writes already under way through it still put there.
    new_base = await _export(api, target)
    if new_base is None:
        return await _failed(scope, target, f"exporting {target}: no answer")
    caught = await _catch_up(
        api, source, target, documents_by_id(exported), new_base, spec.migration.batch_size
    )
    if isinstance(caught, str):
        return await _failed(scope, target, caught)
    carried, old_base, new_base = caught
    code, answer = await api.call("PUT", alias_path(name), {"collection_name": target})
    if code >= 300:
        return await _failed(scope, target, f"moving alias {name}: {answer_words(answer, code)}")
    await asyncio.sleep(CATCH_UP_SETTLE_SECONDS)
    late = await _catch_up(api, source, target, old_base, new_base, spec.migration.batch_size)
    if isinstance(late, str):
        await book.event(
            "Warning", EventReason.CONTENT_REFUSED, f"after alias {name} moved to {target}: {late}"
        )
    else:
        carried += late[0]
    now = utcnow()
    drop_after = now + timedelta(seconds=spec.migration.drop_old_after_seconds)
    retiring = retiring_after_migration(retiring_of(scope.status.get("migration")), source, drop_after)
    scope.status["migration"] = {
        "source": source,
        "target": target,
        "documents": len(documents),
        "caughtUp": carried,
        "doneAt": wire_time(now),
        "sourceDroppedAfter": wire_time(drop_after),
        "retiring": _wire_retiring(retiring),
    }
    note = (
        f"alias {name} moved from {source} to {target} ({len(documents)} documents copied, "
        f"{carried} written meanwhile carried over); {why}"
    )
    await book.event("Normal", EventReason.CONTENT_MIGRATED, note)
    return str(target)


Exported = dict[str, dict[str, Any]]


async def _export_raw(api: NodeApi, collection: str) -> tuple[int, bytes]:
    """A collection's JSONL export (from the leader, which the API asks first), and its status code."""
    return await api.call_raw(
        "GET", f"{collection_path(collection)}/documents/export", timeout=_COPY_TIMEOUT_SECONDS
    )


async def _export(api: NodeApi, collection: str) -> Exported | None:
    """A collection's documents by id, or None."""
    code, exported = await _export_raw(api, collection)
    return documents_by_id(exported) if code == 200 else None


async def _import(api: NodeApi, collection: str, documents: list[bytes], batch_size: int) -> str | None:
    """Upsert JSONL ``documents`` in batches; the first failure, in words, or None."""
    for body in batches(documents, batch_size):
        code, answer = await api.call_raw(
            "POST", import_path(collection), body, timeout=_COPY_TIMEOUT_SECONDS
        )
        failures = import_failures(answer) if code == 200 else [f"HTTP {code}"]
        if failures:
            return failures[0]
    return None


async def _catch_up(
    api: NodeApi, source: str, target: str, old_base: Exported, new_base: Exported, batch_size: int
) -> tuple[int, Exported, Exported] | str:
    """Carry into ``target`` what ``source`` received since the bases (:func:`catch_up`): how many
    documents, and both collections as they are now (the next catch-up's bases); or why it could not."""
    old_now, new_now = await _export(api, source), await _export(api, target)
    if old_now is None or new_now is None:
        return f"exporting {source} and {target} to carry the writes made meanwhile: no answer"
    carry = catch_up(old_base, old_now, new_base, new_now)
    if not len(carry):
        return 0, old_now, new_now
    lines = [json.dumps(document).encode() for document in carry.upserts]
    failure = await _import(api, target, lines, batch_size)
    if failure is not None:
        return f"a document written to {source} during the copy does not fit the new schema: {failure}"
    for document_id in carry.deletes:
        await api.call("DELETE", f"{collection_path(target)}/documents/{quote(document_id, safe='')}")
    new_after = await _export(api, target)
    if new_after is None:
        return f"exporting {target} after carrying the writes made meanwhile: no answer"
    return len(carry), old_now, new_after


async def _drop_source_when_due(scope: ContentScope) -> None:
    """Drop each earlier version whose grace is over (each its own: several migrations may follow one
    another within a grace); look again when the next one is due."""
    migration = dict(scope.status.get("migration") or {})
    retiring, now = retiring_of(migration), utcnow()
    if not retiring:
        return
    assert scope.api is not None
    kept = []
    for name, drop_after in retiring:
        if now < drop_after:
            kept.append((name, drop_after))
            scope.next_look = min(scope.next_look, max((drop_after - now).total_seconds(), 1.0))
            continue
        code, _ = await scope.api.call("DELETE", collection_path(name))
        if code not in (200, 404):
            kept.append((name, drop_after))  # looked at again at the next reconcile
            continue
        await scope.book.event(
            "Normal", EventReason.CONTENT_DELETED, f"collection {name} dropped: its grace is over"
        )
    if kept == retiring:
        return
    migration["retiring"] = _wire_retiring(kept)
    if all(name != migration.get("source") for name, _ in kept):
        migration["sourceDroppedAfter"] = None
    scope.status["migration"] = migration


def _wire_retiring(retiring: list[tuple[str, datetime]]) -> list[dict[str, str]]:
    return [{"name": name, "dropAfter": wire_time(drop_after)} for name, drop_after in retiring]


async def _failed(scope: ContentScope, target: str, note: str, *, drop: bool = True) -> str | None:
    """Say why the migration failed (the target dropped, unless it was never made); None."""
    if drop and scope.api is not None:
        await scope.api.call("DELETE", collection_path(target))
    await scope.book.set(
        READY, "False", ContentReason.MIGRATION_FAILED, f"{note}; the alias still names the old collection",
        warn=EventReason.CONTENT_REFUSED, warn_on_new_message=True,
    )  # fmt: skip
    return None


async def delete_versioned(api: NodeApi, name: str, migration: dict[str, Any] | None) -> int:
    """Drop the alias and every version it named (the current one, and every earlier one still in its
    grace); the last status code."""
    code, alias = await api.call("GET", alias_path(name))
    names = [alias.get("collection_name")] if code == 200 and isinstance(alias, dict) else []
    names.extend(retired for retired, _ in retiring_of(migration))
    for collection in [*names, None]:
        path = alias_path(name) if collection is None else collection_path(str(collection))
        code, _ = await api.call("DELETE", path)
        if code not in (200, 404):
            return int(code)
    return 200
