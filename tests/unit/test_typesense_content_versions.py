"""Which API the content kinds speak, from the version a cluster's server reports: the version read,
the actions a key may have on it, and on 30 and later a synonym or an override as an item of its set
(issue 68). What the requests look like on each version is held to Typesense's own specification in
test_typesense_api_spec.py."""

from __future__ import annotations

import pytest

from typesense_operator.api.content import TypesenseSynonymSpec
from typesense_operator.content.plan import InSync, Send, plan_in_set, plan_synonym
from typesense_operator.content.versions import (
    CURATION_SETS,
    SYNONYM_SETS,
    ServerVersion,
    action_refusal,
    default_set_name,
    set_links,
)


@pytest.mark.parametrize(
    ("said", "parts", "sets"),
    [
        ("0.24.1", (0, 24, 1), False),
        ("27.1", (27, 1, 0), False),
        ("29.0", (29, 0, 0), False),
        ("30.0", (30, 0, 0), True),
        ("v30.2.rc4", (30, 2, 0), True),
        ("31", (31, 0, 0), True),
    ],
)
def test_a_reported_version_is_read_and_says_whether_synonyms_live_in_sets(
    said: str, parts: tuple[int, int, int], sets: bool
) -> None:
    version = ServerVersion.parse(said)
    assert version is not None
    assert (version.major, version.minor, version.patch) == parts
    assert version.uses_sets is sets
    assert str(version) == said


@pytest.mark.parametrize("said", ["nightly", "", "latest"])
def test_a_version_that_names_no_release_is_none(said: str) -> None:
    assert ServerVersion.parse(said) is None


@pytest.mark.parametrize(
    ("actions", "version", "said"),
    [
        (["documents:search", "collections:get"], "0.24.1", None),
        (["documents:search", "collections:get"], "30.1", None),
        (["synonyms:*"], "29.0", None),
        (["synonym_sets:*", "curation_sets:get"], "30.0", None),
        (["*"], "30.0", None),
        (["synonyms:*"], "30.1", "action synonyms:*: Typesense 30.1 keeps synonyms in synonym_sets"),
        (["documents:*", "overrides:get"], "30.0", "ask for curation_sets:get instead"),
        (["synonym_sets:upsert"], "0.24.1", "Typesense 0.24.1 has no synonym_sets (they came with 30.0)"),
        (["curation_sets:*"], "29.0", "ask for overrides:* instead"),
    ],
)
def test_a_keys_actions_must_name_what_its_clusters_version_has(
    actions: list[str], version: str, said: str | None
) -> None:
    found = ServerVersion.parse(version)
    assert found is not None
    refusal = action_refusal(actions, found)
    if said is None:
        assert refusal is None
    else:
        assert refusal is not None
        assert said in refusal


SYNONYM = TypesenseSynonymSpec.model_validate(
    {"cluster": {"name": "search"}, "collection": "books", "synonyms": ["tome"], "root": "book"}
)


def test_a_new_synonym_on_30_makes_its_set_puts_itself_in_and_links_the_set() -> None:
    plan = plan_synonym(SYNONYM, "tomes", None)
    sends = plan_in_set(SYNONYM_SETS, "books-synonyms", "tomes", plan, False, ["shared"], "books")
    assert [(send.method, send.path, send.body) for send in sends] == [
        ("PUT", "/synonym_sets/books-synonyms", {"items": []}),
        ("PUT", "/synonym_sets/books-synonyms/items/tomes", {"synonyms": ["tome"], "root": "book"}),
        ("PATCH", "/collections/books", {"synonym_sets": ["shared", "books-synonyms"]}),
    ]
    assert sends[-1].change == "synonym set books-synonyms linked to books"


def test_a_synonym_in_a_linked_set_that_holds_it_sends_nothing() -> None:
    live = {"id": "tomes", "synonyms": ["tome"], "root": "book"}
    plan = plan_synonym(SYNONYM, "tomes", live)
    assert isinstance(plan, InSync)
    assert plan_in_set(SYNONYM_SETS, "books-synonyms", "tomes", plan, True, ["books-synonyms"], "books") == []


def test_a_changed_synonym_is_put_again_and_a_link_taken_away_by_hand_is_put_back() -> None:
    plan = plan_synonym(SYNONYM, "tomes", {"id": "tomes", "synonyms": ["volume"], "root": "book"})
    sends = plan_in_set(SYNONYM_SETS, "words", "tomes", plan, True, [], "books")
    assert [(send.method, send.path) for send in sends] == [
        ("PUT", "/synonym_sets/words/items/tomes"),
        ("PATCH", "/collections/books"),
    ]
    assert sends[0].change == "updated in synonym set words"
    assert isinstance(plan, Send)


def test_each_collection_gets_its_own_set_and_a_migration_carries_the_links() -> None:
    assert default_set_name(SYNONYM_SETS, "books") == "books-synonyms"
    assert default_set_name(CURATION_SETS, "books") == "books-curations"
    held = {"name": "books-1", "synonym_sets": ["books-synonyms"], "curation_sets": [], "fields": []}
    assert set_links(held) == {"synonym_sets": ["books-synonyms"]}
    assert set_links({"name": "books-1"}) == {}
