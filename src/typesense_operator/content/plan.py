"""What to send Typesense so that it holds what a content object declares: pure functions of the spec
and of what Typesense answered (its own JSON), table-tested in tests/unit/test_typesense_content_plan.py.

Each ``plan_*`` returns :class:`InSync`, a :class:`Send` (one request that makes Typesense hold the
spec, and what it changes, for the Event), or a :class:`Refused` (a change Typesense cannot make in
place: nothing is sent). A collection's fields are compared with Typesense's defaults filled in, so
that a property taken out of the spec goes back to its default; only the fields Typesense made by
itself (from an ``auto`` field, or under an object field) are left alone when the spec does not name
them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import quote

from operator_core.clock import parse_wire_time
from typesense_operator.api.content import (
    CollectionField,
    TypesenseAliasSpec,
    TypesenseCollectionSpec,
    TypesenseOverrideSpec,
    TypesenseSynonymSpec,
)
from typesense_operator.content.versions import SetKind, set_item_path, set_path

__all__ = [
    "InSync",
    "Refused",
    "Send",
    "alias_path",
    "batches",
    "collection_path",
    "collection_schema",
    "import_failures",
    "import_path",
    "override_path",
    "plan_alias",
    "plan_collection",
    "plan_in_set",
    "plan_override",
    "plan_synonym",
    "retiring_after_migration",
    "retiring_of",
    "synonym_path",
    "version_of",
    "versioned_name",
]


@dataclass(frozen=True)
class InSync:
    """Typesense holds what the spec declares."""


@dataclass(frozen=True)
class Send:
    """One request that makes Typesense hold the spec."""

    method: str
    path: str
    body: dict[str, Any]
    change: str
    """What it changes, in words, for the Event: "created", "adds field x; drops y"."""


@dataclass(frozen=True)
class Refused:
    """A change Typesense cannot make in place: nothing is sent."""

    reason: str
    message: str


ContentPlan = InSync | Send | Refused


def _segment(name: str) -> str:
    return quote(name, safe="")


def collection_path(name: str) -> str:
    return f"/collections/{_segment(name)}"


def alias_path(name: str) -> str:
    return f"/aliases/{_segment(name)}"


def synonym_path(collection: str, rule: str) -> str:
    return f"{collection_path(collection)}/synonyms/{_segment(rule)}"


def override_path(collection: str, rule: str) -> str:
    return f"{collection_path(collection)}/overrides/{_segment(rule)}"


# ---------------------------------------------------------------- collections

# A field's properties as Typesense 0.24.1 fills them in when the schema leaves them out. ``sort`` is
# left out: its default depends on the type (on for numbers), and Typesense reports what it chose.
_FIELD_DEFAULTS: Mapping[str, Any] = {
    "facet": False,
    "index": True,
    "optional": False,
    "infix": False,
    "locale": "",
}
_FIELD_PROPERTIES = (*_FIELD_DEFAULTS, "sort")


def _field_body(field: CollectionField) -> dict[str, Any]:
    body: dict[str, Any] = {"name": field.name, "type": field.type}
    for name in _FIELD_PROPERTIES:
        value = getattr(field, name)
        if value is not None:
            body[name] = value
    return body


def collection_schema(spec: TypesenseCollectionSpec, name: str) -> dict[str, Any]:
    """The body of ``POST /collections``."""
    schema: dict[str, Any] = {"name": name, "fields": [_field_body(field) for field in spec.fields]}
    if spec.default_sorting_field is not None:
        schema["default_sorting_field"] = spec.default_sorting_field
    if spec.token_separators is not None:
        schema["token_separators"] = spec.token_separators
    if spec.symbols_to_index is not None:
        schema["symbols_to_index"] = spec.symbols_to_index
    if spec.enable_nested_fields is not None:
        schema["enable_nested_fields"] = spec.enable_nested_fields
    return schema


def _differs(field: CollectionField, live: Mapping[str, Any]) -> list[str]:
    """The properties of ``field`` that Typesense holds otherwise."""
    changed = []
    for name in _FIELD_PROPERTIES:
        declared = getattr(field, name)
        if declared is None:
            if name not in _FIELD_DEFAULTS:
                continue  # sort: Typesense's choice stands
            declared = _FIELD_DEFAULTS[name]
        if live.get(name, _FIELD_DEFAULTS.get(name)) != declared:
            changed.append(name)
    return changed


def _made_by_typesense(name: str, spec: TypesenseCollectionSpec) -> bool:
    """A field Typesense added by itself: any, under an ``auto`` field with a pattern (``.*``), or a
    child of an object field (``address.city``)."""
    if any(field.type == "auto" or "*" in field.name for field in spec.fields):
        return True
    objects = [field.name for field in spec.fields if field.type in ("object", "object[]")]
    return any(name.startswith(f"{parent}.") for parent in objects)


def _collection_settings(spec: TypesenseCollectionSpec, live: Mapping[str, Any]) -> list[str]:
    """The collection-wide settings Typesense holds otherwise: none of them changes in place."""
    declared = {
        "default_sorting_field": spec.default_sorting_field or "",
        "token_separators": spec.token_separators or [],
        "symbols_to_index": spec.symbols_to_index or [],
        "enable_nested_fields": bool(spec.enable_nested_fields),
    }
    held = {
        "default_sorting_field": live.get("default_sorting_field") or "",
        "token_separators": live.get("token_separators") or [],
        "symbols_to_index": live.get("symbols_to_index") or [],
        "enable_nested_fields": bool(live.get("enable_nested_fields")),
    }
    return [
        f"{name} is {held[name]!r}, the spec asks for {declared[name]!r}"
        for name in declared
        if declared[name] != held[name]
    ]


def plan_collection(spec: TypesenseCollectionSpec, name: str, live: Mapping[str, Any] | None) -> ContentPlan:
    """Create the collection, or PATCH its fields; a change Typesense cannot make in place is refused."""
    if live is None:
        return Send("POST", "/collections", collection_schema(spec, name), "created")
    settings = _collection_settings(spec, live)
    if settings:
        return Refused(
            "NotChangeableInPlace",
            f"collection {name}: {'; '.join(settings)}; Typesense cannot change these in place "
            "(make a new collection and move an alias to it)",
        )
    held = {str(field["name"]): field for field in live.get("fields") or []}
    retyped = [
        f"{field.name} is {held[field.name].get('type')}, the spec asks for {field.type}"
        for field in spec.fields
        if field.name in held and held[field.name].get("type") != field.type
    ]
    if retyped:
        return Refused(
            "TypeChangeNotInPlace",
            f"collection {name}: {'; '.join(retyped)}; a field's type is not changed in place, since every "
            "document would be indexed again and one that does not fit would fail the change half-way "
            "(make a new collection and move an alias to it)",
        )
    declared = {field.name for field in spec.fields}
    added = [field for field in spec.fields if field.name not in held]
    changed = [(field, _differs(field, held[field.name])) for field in spec.fields if field.name in held]
    changed = [(field, properties) for field, properties in changed if properties]
    dropped = [
        held_name
        for held_name in held
        if held_name not in declared and not _made_by_typesense(held_name, spec)
    ]
    if not (added or changed or dropped):
        return InSync()
    fields: list[dict[str, Any]] = [{"name": held_name, "drop": True} for held_name in dropped]
    # A changed field is dropped and added again in the same PATCH: Typesense's way to change one.
    for field, _ in changed:
        fields += [{"name": field.name, "drop": True}, _field_body(field)]
    fields += [_field_body(field) for field in added]
    words = []
    if added:
        words.append("adds field(s) " + ", ".join(field.name for field in added))
    if dropped:
        words.append("drops field(s) " + ", ".join(dropped))
    if changed:
        words.append(
            "changes " + ", ".join(f"{field.name} ({', '.join(properties)})" for field, properties in changed)
        )
    return Send("PATCH", collection_path(name), {"fields": fields}, "; ".join(words))


# ---------------------------------------------------------------- aliases, synonyms, overrides


def plan_alias(spec: TypesenseAliasSpec, name: str, live: Mapping[str, Any] | None) -> ContentPlan:
    """Point the alias at the spec's collection (one PUT, which moves it at once)."""
    if live is not None and live.get("collection_name") == spec.collection:
        return InSync()
    change = "created" if live is None else f"moved from {live.get('collection_name')} to {spec.collection}"
    return Send("PUT", alias_path(name), {"collection_name": spec.collection}, change)


def plan_synonym(spec: TypesenseSynonymSpec, rule: str, live: Mapping[str, Any] | None) -> ContentPlan:
    body: dict[str, Any] = {"synonyms": list(spec.synonyms)}
    if spec.root is not None:
        body["root"] = spec.root
    if live is not None and (list(live.get("synonyms") or []), live.get("root") or "") == (
        body["synonyms"],
        spec.root or "",
    ):
        return InSync()
    return Send("PUT", synonym_path(spec.collection, rule), body, "created" if live is None else "updated")


# An override's parts as Typesense fills them in when the body leaves them out.
_OVERRIDE_DEFAULTS: Mapping[str, Any] = {
    "includes": [],
    "excludes": [],
    "filter_by": "",
    "sort_by": "",
    "remove_matched_tokens": True,
    "filter_curated_hits": False,
}


def override_body(spec: TypesenseOverrideSpec) -> dict[str, Any]:
    body: dict[str, Any] = {"rule": {"query": spec.rule.query, "match": spec.rule.match}}
    if spec.includes:
        body["includes"] = [{"id": hit.id, "position": hit.position} for hit in spec.includes]
    if spec.excludes:
        body["excludes"] = [{"id": hit.id} for hit in spec.excludes]
    for name in ("filter_by", "sort_by", "remove_matched_tokens", "filter_curated_hits"):
        value = getattr(spec, name)
        if value is not None:
            body[name] = value
    return body


def plan_override(spec: TypesenseOverrideSpec, rule: str, live: Mapping[str, Any] | None) -> ContentPlan:
    body = override_body(spec)
    if live is not None:
        held_rule = live.get("rule") or {}
        same = (held_rule.get("query"), held_rule.get("match")) == (spec.rule.query, spec.rule.match) and all(
            (live.get(name) if live.get(name) is not None else default) == body.get(name, default)
            for name, default in _OVERRIDE_DEFAULTS.items()
        )
        if same:
            return InSync()
    return Send("PUT", override_path(spec.collection, rule), body, "created" if live is None else "updated")


# ---------------------------------------------------------------- synonym and curation sets (30 on)


def plan_in_set(
    kind: SetKind,
    set_name: str,
    item: str,
    item_plan: ContentPlan,
    set_exists: bool,
    linked: Sequence[str],
    collection: str,
) -> list[Send]:
    """On Typesense 30 and later, what makes a synonym or an override (``item_plan``: its plan before 30,
    made against the set's item) item ``item`` of set ``set_name``, and the set linked to
    ``collection`` (``linked``: the sets the collection links now); none when all is so already.

    A set that does not exist is made empty first, then the item put into it, each request as
    Typesense's specification of 30 has it; a link is added to the collection's others, never put
    in their place."""
    sends = []
    if not set_exists:
        sends.append(Send("PUT", set_path(kind, set_name), {"items": []}, f"made {kind.noun} {set_name}"))
    if isinstance(item_plan, Send) or not set_exists:
        body = item_plan.body if isinstance(item_plan, Send) else {}
        change = item_plan.change if isinstance(item_plan, Send) else "created"
        change = f"{change} in {kind.noun} {set_name}"
        sends.append(Send("PUT", set_item_path(kind, set_name, item), body, change))
    if set_name not in linked:
        change = f"{kind.noun} {set_name} linked to {collection}"
        sends.append(Send("PATCH", collection_path(collection), {kind.route: [*linked, set_name]}, change))
    return sends


# ---------------------------------------------------------------- migrations


def versioned_name(name: str, version: int) -> str:
    """The collection behind alias ``name`` at ``version`` (from 1), for a collection with a migration."""
    return f"{name}-{version}"


def version_of(collection: str, name: str) -> int:
    """Which version of ``name`` a collection is (0 when it is not one of them: a name of a collection
    the alias was pointed at by hand)."""
    prefix = f"{name}-"
    suffix = collection[len(prefix) :] if collection.startswith(prefix) else ""
    return int(suffix) if suffix.isdigit() else 0


def batches(lines: list[bytes], size: int) -> list[bytes]:
    """JSONL bodies of at most ``size`` documents each, for ``POST .../documents/import``."""
    return [b"\n".join(lines[start : start + size]) for start in range(0, len(lines), size)]


def import_failures(answer: bytes) -> list[str]:
    """The errors of an import's answer (a JSON line per document, ``success`` false for a failure),
    each naming the document by its id where Typesense sent the document back: "document 7: Field
    `year` must be a string."."""
    failed = []
    for line in answer.splitlines():
        if line.strip():
            result = json.loads(line)
            if not result.get("success", False):
                error = str(result.get("error") or result)
                document_id = _document_id(result.get("document"))
                failed.append(f"document {document_id}: {error}" if document_id is not None else error)
    return failed


def _document_id(document: Any) -> str | None:
    """The id of a document an import's answer sent back (as JSON text), if it has one."""
    try:
        parsed = json.loads(document) if isinstance(document, str) else document
    except ValueError:
        return None
    return str(parsed["id"]) if isinstance(parsed, dict) and parsed.get("id") is not None else None


def import_path(collection: str) -> str:
    """Where a migration's copy imports its batches. ``action=upsert``: a copy started again after a
    crash repeats nothing. ``dirty_values=coerce_or_reject``: a value of another type than the new
    schema's field is turned into it where it can be (``1999`` into ``"1999"``, ``"42"`` into ``42``)
    and refused otherwise, which stops the migration before the alias moves; never dropped, so no
    document loses a field without a word (typesense-server 0.24.1 refuses a number for a string
    field without it)."""
    return f"{collection_path(collection)}/documents/import?action=upsert&dirty_values=coerce_or_reject"


Retiring = list[tuple[str, datetime]]
"""Earlier versions of a migrated collection kept for their grace: (name, when it is dropped)."""


def retiring_of(migration: Mapping[str, Any] | None) -> Retiring:
    """The earlier versions still kept, from ``status.migration``: its ``retiring`` list, and its last
    source while ``sourceDroppedAfter`` is set (a status written before the list was kept)."""
    migration = migration or {}
    kept: Retiring = []
    for entry in migration.get("retiring") or []:
        drop_after = parse_wire_time(entry.get("dropAfter"))
        if entry.get("name") and drop_after is not None:
            kept.append((str(entry["name"]), drop_after))
    last = parse_wire_time(migration.get("sourceDroppedAfter"))
    if migration.get("source") and last is not None and all(n != migration["source"] for n, _ in kept):
        kept.append((str(migration["source"]), last))
    return kept


def retiring_after_migration(before: Retiring, source: str, drop_after: datetime) -> Retiring:
    """The versions kept once ``source`` was migrated from: those kept before, and ``source`` itself
    until ``drop_after``. Each keeps its own time: a second migration within the first one's grace
    does not make the first source wait longer, nor forget it."""
    return [*(entry for entry in before if entry[0] != source), (source, drop_after)]
