"""A TypesenseCollection with ``spec.migration``: Typesense holds it as ``<name>-<n>`` behind an alias
``<name>``, and a change it cannot make in place is made by migration.

:func:`sync_versioned` makes the first version and the alias, changes the current version in place
where Typesense can (the same plan as any collection), and otherwise migrates: the next version is
made with the new schema, every document is exported from the current one and imported into it in
``batchSize`` batches (``action=upsert``: a copy started again after a crash repeats nothing), the
synonyms and overrides follow, the count is checked, and only then is the alias moved, in one PUT, so
that a search through it never finds nothing. A document that does not fit the new schema stops the
migration before the alias moves: the new version is dropped and Typesense's words are in Ready. The
old version is dropped ``dropOldAfterSeconds`` later.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from operator_core.clock import utcnow, wire_time
from operator_core.steps import Outcome
from typesense_operator.api.content import TypesenseCollectionSpec
from typesense_operator.api.reasons import ContentReason, EventReason
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
from typesense_operator.controller.content_scope import ContentScope, NodeApi, answer_words, refuse

__all__ = ["delete_versioned", "sync_versioned"]

_COPY_TIMEOUT_SECONDS = 120.0
"""One export or one import batch: the export holds every document of the collection."""
READY = "Ready"


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
    if (await api.call("GET", collection_path(target)))[0] == 200:
        await api.call("DELETE", collection_path(target))  # a copy cut short: start it again, whole
    code, answer = await api.call("POST", "/collections", collection_schema(spec, target))
    if code >= 300:
        return await _failed(scope, target, f"making {target}: {answer_words(answer, code)}", drop=False)
    code, exported = await api.call_raw(
        "GET", f"{collection_path(source)}/documents/export", timeout=_COPY_TIMEOUT_SECONDS
    )
    if code != 200:
        return await _failed(scope, target, f"exporting {source}: HTTP {code}")
    documents = [line for line in exported.splitlines() if line.strip()]
    for body in batches(documents, spec.migration.batch_size):
        code, answer = await api.call_raw("POST", import_path(target), body, timeout=_COPY_TIMEOUT_SECONDS)
        failures = import_failures(answer) if code == 200 else [f"HTTP {code}"]
        if failures:
            return await _failed(
                scope, target, f"a document of {source} does not fit the new schema: {failures[0]}"
            )
    for part in ("synonyms", "overrides"):
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
    code, answer = await api.call("PUT", alias_path(name), {"collection_name": target})
    if code >= 300:
        return await _failed(scope, target, f"moving alias {name}: {answer_words(answer, code)}")
    now = utcnow()
    drop_after = now + timedelta(seconds=spec.migration.drop_old_after_seconds)
    retiring = retiring_after_migration(retiring_of(scope.status.get("migration")), source, drop_after)
    scope.status["migration"] = {
        "source": source,
        "target": target,
        "documents": len(documents),
        "doneAt": wire_time(now),
        "sourceDroppedAfter": wire_time(drop_after),
        "retiring": _wire_retiring(retiring),
    }
    note = f"alias {name} moved from {source} to {target} ({len(documents)} documents copied); {why}"
    await book.event("Normal", EventReason.CONTENT_MIGRATED, note)
    return str(target)


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
