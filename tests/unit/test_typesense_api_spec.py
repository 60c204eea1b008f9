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
    plan_override,
    plan_synonym,
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


def assert_served(version: str, method: str, url: str, body: dict[str, Any] | None = None) -> None:
    found = operation(version, method, url)
    asked = {key for key, _ in parse_qsl(urlsplit(url).query)}
    assert asked <= _parameters(version, found), f"{method} {url}: {asked - _parameters(version, found)}"
    if body is None:
        return
    content = (found.get("requestBody") or {}).get("content") or {}
    schema = (content.get("application/json") or {}).get("schema")
    assert schema is not None, f"{method} {url} takes no JSON body in Typesense {version}'s spec"
    names, required = _properties(version, schema)
    assert set(body) <= names, f"{method} {url}: {set(body) - names} not in Typesense {version}'s spec"
    assert required <= set(body), f"{method} {url}: {required - set(body)} required by Typesense {version}"


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
