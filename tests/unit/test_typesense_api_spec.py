"""Every request the operator makes of Typesense for content, checked against Typesense's own published
OpenAPI specification of each server version (issue 68; the files are pinned in
tests/data/typesense-api-spec/, its README says from which commit). Only typesense-server 0.24.1 runs
on these machines: this is how 27, 28, 29 and 30 are held to what they serve.

What is checked: the path (with its parameters) and the method exist in that version's spec, the
query parameters are ones it names, and a body's keys are properties of the request's schema, with
every property the schema requires. Typesense 30 moved synonyms and overrides into synonym and
curation sets: the per-collection routes are gone there, which the last test says.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest
import yaml

from typesense_operator.api.content import (
    TypesenseAliasSpec,
    TypesenseApiKeySpec,
    TypesenseCollectionSpec,
    TypesenseOverrideSpec,
    TypesenseSynonymSpec,
)
from typesense_operator.content.keys import key_body
from typesense_operator.content.plan import (
    Send,
    alias_path,
    collection_path,
    import_path,
    override_body,
    plan_alias,
    plan_collection,
    plan_in_set,
    plan_override,
    plan_synonym,
)
from typesense_operator.content.versions import (
    CURATION_SETS,
    SYNONYM_SETS,
    SetKind,
    default_set_name,
    set_item_path,
    set_links,
    set_path,
)

SPECS = Path(__file__).parents[1] / "data" / "typesense-api-spec"
VERSIONS = ("0.24", "27", "28", "29", "30")
BEFORE_SETS = VERSIONS[:-1]
"""The versions whose synonyms and overrides live under their collection."""
CLUSTER = {"name": "search"}


@cache
def spec(version: str) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((SPECS / version / "openapi.yml").read_text())
    return loaded


def _resolve(version: str, schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        *_, name = schema["$ref"].split("/")
        schema = spec(version)["components"]["schemas"][name]
    return schema


def _properties(version: str, schema: dict[str, Any]) -> tuple[set[str], set[str]]:
    """(the properties, the required ones) of a schema, its allOf parts merged."""
    schema = _resolve(version, schema)
    names, required = set((schema.get("properties") or {}).keys()), set(schema.get("required") or [])
    for part in schema.get("allOf") or []:
        more, needed = _properties(version, part)
        names |= more
        required |= needed
    return names, required


def operation(version: str, method: str, url: str) -> dict[str, Any]:
    """The spec's operation for ``method`` ``url`` (a concrete path, with its query string)."""
    path = urlsplit(url).path
    for template, operations in spec(version)["paths"].items():
        pattern = "^" + re.sub(r"\\\{[^/]+?\\\}", "[^/]+", re.escape(template)) + "$"
        if re.match(pattern, path) and method.lower() in operations:
            found: dict[str, Any] = operations[method.lower()]
            return found
    raise AssertionError(f"Typesense {version}'s spec has no {method} {path}")


def _parameters(version: str, found: dict[str, Any]) -> set[str]:
    names = set()
    for parameter in found.get("parameters") or []:
        resolved = _resolve(version, parameter) if "$ref" in parameter else parameter
        if "$ref" in parameter and "name" not in resolved:
            *_, name = parameter["$ref"].split("/")
            resolved = spec(version)["components"].get("parameters", {}).get(name, {})
        if resolved.get("in") == "query" and "schema" in resolved:
            schema = _resolve(version, resolved["schema"])
            names |= set((schema.get("properties") or {}).keys()) if schema.get("type") == "object" else set()
        names.add(str(resolved.get("name")))
    return names


def assert_served(
    version: str,
    method: str,
    url: str,
    body: dict[str, Any] | None = None,
    gaps: frozenset[str] = frozenset(),
) -> None:
    """``gaps``: keys where the spec is known to fall short of the server it describes (each named where
    it is used, with what documents the server's behaviour): not checked."""
    found = operation(version, method, url)
    asked = {key for key, _ in parse_qsl(urlsplit(url).query)}
    assert asked <= _parameters(version, found), f"{method} {url}: {asked - _parameters(version, found)}"
    if body is None:
        return
    content = (found.get("requestBody") or {}).get("content") or {}
    schema = (content.get("application/json") or {}).get("schema")
    assert schema is not None, f"{method} {url} takes no JSON body in Typesense {version}'s spec"
    names, required = _properties(version, schema)
    asked_for = set(body) - gaps
    assert asked_for <= names, f"{method} {url}: {asked_for - names} not in Typesense {version}'s spec"
    missing = required - gaps - set(body)
    assert not missing, f"{method} {url}: {missing} required by Typesense {version}"


def sent(plan: Any) -> Send:
    assert isinstance(plan, Send)
    return plan


COLLECTION = TypesenseCollectionSpec.model_validate(
    {
        "cluster": CLUSTER,
        "fields": [
            {"name": "title", "type": "string", "infix": True},
            {"name": "year", "type": "int32", "facet": True, "sort": True, "optional": True},
        ],
        "defaultSortingField": "year",
        "tokenSeparators": ["-"],
        "symbolsToIndex": ["+"],
        "enableNestedFields": True,
    }
)


@pytest.mark.parametrize("version", VERSIONS)
def test_collections_aliases_keys_and_documents_are_served_as_the_operator_asks(version: str) -> None:
    create = sent(plan_collection(COLLECTION, "books", None))
    assert_served(version, create.method, create.path, create.body)
    live = {**create.body, "fields": [{"name": "title", "type": "string"}]}
    patch = sent(plan_collection(COLLECTION, "books", live))
    assert_served(version, patch.method, patch.path, patch.body)
    for method in ("GET", "DELETE"):
        assert_served(version, method, collection_path("books"))
    alias = TypesenseAliasSpec.model_validate({"cluster": CLUSTER, "collection": "books-2"})
    put = sent(plan_alias(alias, "books", None))
    assert_served(version, put.method, put.path, put.body)
    for method in ("GET", "DELETE"):
        assert_served(version, method, alias_path("books"))
    key = TypesenseApiKeySpec.model_validate(
        {
            "cluster": CLUSTER,
            "actions": ["documents:search"],
            "collections": ["books"],
            "secret": {"name": "k"},
        }
    )
    assert_served(version, "POST", "/keys", key_body(key, "v" * 32))
    for method in ("GET", "DELETE"):
        assert_served(version, method, "/keys/7")
    assert_served(version, "GET", "/keys")
    assert_served(version, "POST", import_path("books-2"))
    assert_served(version, "GET", "/collections/books-1/documents/export")
    assert_served(version, "DELETE", "/collections/books-2/documents/w7")


SYNONYM = TypesenseSynonymSpec.model_validate(
    {"cluster": CLUSTER, "collection": "books", "synonyms": ["tome"], "root": "book"}
)
OVERRIDE = TypesenseOverrideSpec.model_validate(
    {
        "cluster": CLUSTER,
        "collection": "books",
        "rule": {"query": "dune", "match": "exact"},
        "includes": [{"id": "7", "position": 1}],
        "excludes": [{"id": "9"}],
        "filterBy": "year:>1960",
        "removeMatchedTokens": True,
    }
)


@pytest.mark.parametrize("version", BEFORE_SETS)
def test_synonyms_and_overrides_are_served_under_their_collection_up_to_29(version: str) -> None:
    synonym = sent(plan_synonym(SYNONYM, "tomes", None))
    assert_served(version, synonym.method, synonym.path, synonym.body)
    override = sent(plan_override(OVERRIDE, "pin", None))
    assert_served(version, override.method, override.path, override_body(OVERRIDE))
    for path in (synonym.path, override.path):
        for method in ("GET", "DELETE"):
            assert_served(version, method, path)


@pytest.mark.parametrize("version", VERSIONS)
def test_every_version_tells_its_own_version_at_debug(version: str) -> None:
    assert_served(version, "GET", "/debug")


LINK_GAPS = frozenset({"fields", "curation_sets"})
"""Where Typesense 30's specification (pinned at 24facda) falls short of the server: it has no
``curation_sets`` in a collection's schema, and its ``CollectionUpdateSchema`` requires ``fields``.
Typesense's own documentation of 30.x (api/curation.md and api/synonyms.md, "Linking ... with
collections") links sets with ``curation_sets`` and ``synonym_sets`` in a collection's schema, and by
a PATCH of the links alone; typesense-server 0.24.1 refuses a PATCH with an empty ``fields`` ("The
`fields` value should be an array of objects ..."), so an empty list is no way round it. The
operator sends what the documentation shows."""


@pytest.mark.parametrize(
    ("set_kind", "plan"),
    [
        pytest.param(SYNONYM_SETS, plan_synonym(SYNONYM, "tomes", None), id="synonym"),
        pytest.param(CURATION_SETS, plan_override(OVERRIDE, "pin", None), id="override"),
    ],
)
def test_on_30_a_synonym_and_an_override_are_items_of_sets_linked_to_their_collection(
    set_kind: SetKind, plan: Any
) -> None:
    name = default_set_name(set_kind, "books")
    for send in plan_in_set(set_kind, name, sent(plan).path.rsplit("/", 1)[1], plan, False, [], "books"):
        assert_served("30", send.method, send.path, send.body, gaps=LINK_GAPS)
    item = set_item_path(set_kind, name, "tomes")
    for method in ("GET", "DELETE"):
        assert_served("30", method, item)
    assert_served("30", "GET", set_path(set_kind, name))
    linked = {"name": "books-2", "fields": [], **set_links({"synonym_sets": [name], "curation_sets": [name]})}
    assert_served("30", "POST", "/collections", linked, gaps=LINK_GAPS)


def test_the_gaps_of_30s_specification_are_still_there() -> None:
    """When a newer pin of the specification has them, LINK_GAPS goes."""
    names, _ = _properties("30", spec("30")["components"]["schemas"]["CollectionSchema"])
    assert "synonym_sets" in names
    assert "curation_sets" not in names
    _, required = _properties("30", spec("30")["components"]["schemas"]["CollectionUpdateSchema"])
    assert "fields" in required


def test_typesense_30_serves_synonyms_and_overrides_only_as_sets() -> None:
    """What issue 68's version-aware content is for: on 30, TypesenseSynonym and TypesenseOverride as
    the operator sends them today have no route (Typesense answers 404)."""
    for plan in (plan_synonym(SYNONYM, "tomes", None), plan_override(OVERRIDE, "pin", None)):
        with pytest.raises(AssertionError, match="has no PUT"):
            operation("30", "PUT", sent(plan).path)
    assert operation("30", "PUT", "/synonym_sets/books")
    assert operation("30", "PUT", "/curation_sets/books")


@pytest.mark.parametrize(
    ("method", "url", "body", "said"),
    [
        pytest.param("POST", "/collections", {"name": "b", "fields": [], "bogus": 1}, "bogus", id="a key"),
        pytest.param("POST", "/collections", {"name": "b"}, "required", id="a required key missing"),
        pytest.param(
            "POST", "/collections/b/documents/import?actions=upsert", None, "actions", id="a parameter"
        ),
        pytest.param("PUT", "/collections/b/nothing/x", None, "has no PUT", id="a path"),
    ],
)
def test_the_check_itself_refuses_what_the_spec_does_not_have(
    method: str, url: str, body: dict[str, Any] | None, said: str
) -> None:
    with pytest.raises(AssertionError, match=said):
        assert_served("0.24", method, url, body)
