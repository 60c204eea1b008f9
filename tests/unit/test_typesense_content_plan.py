"""What the content controller sends Typesense, for each spec and what Typesense answered."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from typesense_operator.api.content import (
    TypesenseAliasSpec,
    TypesenseCollectionSpec,
    TypesenseOverrideSpec,
    TypesenseSynonymSpec,
)
from typesense_operator.content.plan import (
    InSync,
    Refused,
    Send,
    batches,
    import_failures,
    import_path,
    plan_alias,
    plan_collection,
    plan_override,
    plan_synonym,
    retiring_after_migration,
    retiring_of,
    version_of,
    versioned_name,
)

CLUSTER = {"name": "search"}


def collection(*fields: dict[str, Any], **extra: Any) -> TypesenseCollectionSpec:
    return TypesenseCollectionSpec.model_validate({"cluster": CLUSTER, "fields": list(fields), **extra})


def held(*fields: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """A collection as typesense-server 0.24.1 answers GET /collections/{name}: every property filled in."""
    defaults = {"facet": False, "index": True, "optional": False, "infix": False, "locale": "", "sort": False}
    return {
        "name": "books",
        "num_documents": 3,
        "default_sorting_field": "",
        "token_separators": [],
        "symbols_to_index": [],
        "enable_nested_fields": False,
        "fields": [{**defaults, **field} for field in fields],
        **extra,
    }


TITLE = {"name": "title", "type": "string"}
YEAR = {"name": "year", "type": "int32"}


def test_a_missing_collection_is_created_with_only_what_the_spec_sets() -> None:
    spec = collection(TITLE, {**YEAR, "facet": True}, defaultSortingField="year", tokenSeparators=["-"])
    plan = plan_collection(spec, "books", None)
    assert plan == Send(
        "POST",
        "/collections",
        {
            "name": "books",
            "fields": [TITLE, {**YEAR, "facet": True}],
            "default_sorting_field": "year",
            "token_separators": ["-"],
        },
        "created",
    )


def test_a_collection_as_declared_is_in_sync() -> None:
    assert plan_collection(collection(TITLE, YEAR), "books", held(TITLE, {**YEAR, "sort": True})) == InSync()


@pytest.mark.parametrize(
    ("fields", "live_fields", "body", "change"),
    [
        pytest.param([TITLE, YEAR], [TITLE], [YEAR], "adds field(s) year", id="field-added"),
        pytest.param(
            [TITLE],
            [TITLE, YEAR],
            [{"name": "year", "drop": True}],
            "drops field(s) year",
            id="field-dropped",
        ),
        pytest.param(
            [TITLE, {**YEAR, "facet": True}],
            [TITLE, YEAR],
            [{"name": "year", "drop": True}, {**YEAR, "facet": True}],
            "changes year (facet)",
            id="property-changed-by-drop-and-add",
        ),
        pytest.param(
            [TITLE, YEAR],
            [TITLE, {**YEAR, "facet": True}],
            [{"name": "year", "drop": True}, YEAR],
            "changes year (facet)",
            id="property-taken-out-goes-back-to-the-default",
        ),
    ],
)
def test_field_changes_are_one_patch(
    fields: list[dict[str, Any]], live_fields: list[dict[str, Any]], body: list[dict[str, Any]], change: str
) -> None:
    plan = plan_collection(collection(*fields), "books", held(*live_fields))
    assert plan == Send("PATCH", "/collections/books", {"fields": body}, change)


def test_a_field_type_change_is_refused_with_both_types() -> None:
    plan = plan_collection(collection(TITLE, {"name": "year", "type": "string"}), "books", held(TITLE, YEAR))
    assert isinstance(plan, Refused)
    assert plan.reason == "TypeChangeNotInPlace"
    assert "year is int32, the spec asks for string" in plan.message


@pytest.mark.parametrize(
    "extra",
    [
        {"defaultSortingField": "year"},
        {"tokenSeparators": ["-"]},
        {"symbolsToIndex": ["+"]},
        {"enableNestedFields": True},
    ],
)
def test_collection_settings_are_not_changed_in_place(extra: dict[str, Any]) -> None:
    plan = plan_collection(collection(TITLE, YEAR, **extra), "books", held(TITLE, YEAR))
    assert isinstance(plan, Refused)
    assert plan.reason == "NotChangeableInPlace"


def test_fields_typesense_made_itself_are_never_dropped() -> None:
    auto = collection({"name": ".*", "type": "auto"})
    assert plan_collection(auto, "books", held({"name": ".*", "type": "auto"}, TITLE)) == InSync()
    nested = collection({"name": "address", "type": "object"}, enableNestedFields=True)
    live = held(
        {"name": "address", "type": "object"},
        {"name": "address.city", "type": "string"},
        enable_nested_fields=True,
    )
    assert plan_collection(nested, "books", live) == InSync()


def test_names_are_one_path_segment() -> None:
    plan = plan_collection(collection(TITLE), "my books?", held(TITLE, YEAR))
    assert isinstance(plan, Send)
    assert plan.path == "/collections/my%20books%3F"


def test_an_alias_is_put_when_missing_or_elsewhere_and_left_when_right() -> None:
    spec = TypesenseAliasSpec.model_validate({"cluster": CLUSTER, "collection": "books_v2"})
    assert plan_alias(spec, "books", None) == Send(
        "PUT", "/aliases/books", {"collection_name": "books_v2"}, "created"
    )
    moved = plan_alias(spec, "books", {"name": "books", "collection_name": "books_v1"})
    assert isinstance(moved, Send)
    assert moved.change == "moved from books_v1 to books_v2"
    assert plan_alias(spec, "books", {"name": "books", "collection_name": "books_v2"}) == InSync()


def test_synonyms_one_way_and_multi_way() -> None:
    multi = TypesenseSynonymSpec.model_validate(
        {"cluster": CLUSTER, "collection": "books", "synonyms": ["a", "b"]}
    )
    assert plan_synonym(multi, "ab", None) == Send(
        "PUT", "/collections/books/synonyms/ab", {"synonyms": ["a", "b"]}, "created"
    )
    assert plan_synonym(multi, "ab", {"id": "ab", "synonyms": ["a", "b"]}) == InSync()
    one_way = TypesenseSynonymSpec.model_validate(
        {"cluster": CLUSTER, "collection": "books", "synonyms": ["tome"], "root": "book"}
    )
    changed = plan_synonym(one_way, "ab", {"id": "ab", "synonyms": ["tome"]})
    assert changed == Send(
        "PUT", "/collections/books/synonyms/ab", {"synonyms": ["tome"], "root": "book"}, "updated"
    )


def test_an_override_compares_with_typesense_defaults_filled_in() -> None:
    spec = TypesenseOverrideSpec.model_validate(
        {
            "cluster": CLUSTER,
            "collection": "books",
            "rule": {"query": "dune", "match": "exact"},
            "includes": [{"id": "7", "position": 1}],
        }
    )
    body = {"rule": {"query": "dune", "match": "exact"}, "includes": [{"id": "7", "position": 1}]}
    assert plan_override(spec, "pin", None) == Send(
        "PUT", "/collections/books/overrides/pin", body, "created"
    )
    live = {
        "id": "pin",
        **body,
        "excludes": [],
        "filter_by": "",
        "remove_matched_tokens": True,
        "filter_curated_hits": False,
    }
    assert plan_override(spec, "pin", live) == InSync()
    edited = {**live, "excludes": [{"id": "9"}]}
    assert isinstance(plan_override(spec, "pin", edited), Send)


def test_versions_of_a_migrated_collection() -> None:
    assert versioned_name("books", 1) == "books-1"
    assert [version_of(name, "books") for name in ("books-1", "books-12", "books", "books-x", "other-2")] == [
        1,
        12,
        0,
        0,
        0,
    ]


def test_a_copy_goes_in_bounded_batches_and_an_import_says_which_document_failed() -> None:
    lines = [f'{{"id": "{i}"}}'.encode() for i in range(5)]
    assert batches(lines, 2) == [b'{"id": "0"}\n{"id": "1"}', b'{"id": "2"}\n{"id": "3"}', b'{"id": "4"}']
    answer = b'{"success": true}\n{"success": false, "error": "Field `year` must be an int32."}\n'
    assert import_failures(answer) == ["Field `year` must be an int32."]
    sent_back = {"success": False, "error": "Field `year` must be an int32.", "document": '{"id": "7"}'}
    assert import_failures(json.dumps(sent_back).encode()) == ["document 7: Field `year` must be an int32."]
    unreadable = {**sent_back, "document": "{not json"}
    assert import_failures(json.dumps(unreadable).encode()) == ["Field `year` must be an int32."]
    assert import_failures(b'{"success": true}\n') == []


# ---------------------------------------------------------------- migrations' earlier versions

T = datetime(2026, 12, 7, 5, 0, tzinfo=UTC)


def test_each_earlier_version_keeps_its_own_grace_however_many_migrations_follow() -> None:
    """Issue 68: a second migration within the first one's grace kept only its own source, and the
    first was never dropped."""
    first = retiring_after_migration([], "shelf-1", T + timedelta(seconds=300))
    second = retiring_after_migration(first, "shelf-2", T + timedelta(seconds=360))
    assert second == [("shelf-1", T + timedelta(seconds=300)), ("shelf-2", T + timedelta(seconds=360))]
    again = retiring_after_migration(second, "shelf-2", T + timedelta(seconds=400))
    assert again == [("shelf-1", T + timedelta(seconds=300)), ("shelf-2", T + timedelta(seconds=400))]


@pytest.mark.parametrize(
    ("migration", "retiring"),
    [
        pytest.param(None, [], id="never migrated"),
        pytest.param(
            {"source": "shelf-1", "sourceDroppedAfter": "2026-12-07T05:05:00Z"},
            [("shelf-1", T + timedelta(minutes=5))],
            id="a status written before the list: its last source",
        ),
        pytest.param(
            {"source": "shelf-1", "sourceDroppedAfter": None}, [], id="the last source dropped already"
        ),
        pytest.param(
            {
                "source": "shelf-2",
                "sourceDroppedAfter": "2026-12-07T05:06:00Z",
                "retiring": [
                    {"name": "shelf-1", "dropAfter": "2026-12-07T05:05:00Z"},
                    {"name": "shelf-2", "dropAfter": "2026-12-07T05:06:00Z"},
                ],
            },
            [("shelf-1", T + timedelta(minutes=5)), ("shelf-2", T + timedelta(minutes=6))],
            id="the list, the last source once",
        ),
    ],
)
def test_the_earlier_versions_kept_are_read_from_the_status(
    migration: dict[str, Any] | None, retiring: list[tuple[str, datetime]]
) -> None:
    assert retiring_of(migration) == retiring


def test_a_migration_imports_with_values_coerced_into_the_new_types_or_refused() -> None:
    path = import_path("shelf-2")
    assert path == "/collections/shelf-2/documents/import?action=upsert&dirty_values=coerce_or_reject"
