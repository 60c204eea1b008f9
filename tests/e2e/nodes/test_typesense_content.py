"""Collections, aliases, synonyms and overrides as objects, against the real typesense-server 0.24.1 of
a 3-node cluster on real nodes, run by the operator: made, changed in place, refused where Typesense
cannot change in place, put back after a change through Typesense's own API, and deleted by policy."""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

import httpx

from operator_core.kube import Kube
from operator_testkit.assertions import condition
from operator_testkit.drivers.typesense import CollectionWriter, TypesenseCluster
from operator_testkit.fixtures import wait_until

API = "ts.opentelekomcloud.com/v1alpha1"
DRIFT_REPAIRED_WITHIN_SECONDS = 30.0
"""The tests' operator checks every 10 s (tests/conftest.py): a change through Typesense is put back
within one check, the request and the kubelet-free path to the leader included."""


def content(kind: str, name: str, namespace: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": kind,
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"cluster": {"name": "cluster-1"}, **spec},
    }


async def ready(kube: Kube, kind: str, name: str, namespace: str, timeout: float = 60) -> dict[str, Any]:
    """The Ready condition once it is True for the object's current generation."""
    found: dict[str, Any] = {}

    async def settled() -> bool:
        obj = await kube.get(API, kind, name, namespace)
        if obj is None:
            return False
        found.update(condition(obj, "Ready") or {})
        generation = obj["metadata"].get("generation")
        return (
            found.get("status") == "True"
            and (obj.get("status") or {}).get("observedGeneration") == generation
        )

    await wait_until(settled, timeout=timeout, interval=0.5, what=f"{kind} {name} Ready for its generation")
    return found


async def not_ready(kube: Kube, kind: str, name: str, namespace: str, reason: str) -> dict[str, Any]:
    found: dict[str, Any] = {}

    async def said() -> bool:
        obj = await kube.get(API, kind, name, namespace)
        found.clear()
        found.update(condition(obj or {}, "Ready") or {})
        return found.get("status") == "False" and found.get("reason") == reason

    await wait_until(said, timeout=60, interval=0.5, what=f"{kind} {name} Ready=False {reason}")
    return found


async def typesense(cluster: TypesenseCluster, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    leader = await cluster.leader_ip()
    assert leader is not None
    answer = await cluster.http.request(
        method, f"http://{leader}:8108{path}", headers=cluster.headers, json=body, timeout=10
    )
    return answer.status_code, answer.json()


async def fields_of(cluster: TypesenseCluster, collection: str) -> dict[str, dict[str, Any]]:
    code, answer = await typesense(cluster, "GET", f"/collections/{collection}")
    assert code == 200, answer
    return {field["name"]: field for field in answer["fields"]}


ARTICLES = {
    "fields": [
        {"name": "title", "type": "string"},
        {"name": "year", "type": "int32"},
        {"name": "body", "type": "string", "optional": True},
    ],
    "defaultSortingField": "year",
}


async def test_a_collection_is_made_changed_in_place_and_refused_where_typesense_cannot(
    kube: Kube, namespace: str, cluster: TypesenseCluster
) -> None:
    await kube.apply(content("TypesenseCollection", "articles", namespace, ARTICLES))
    await ready(kube, "TypesenseCollection", "articles", namespace)
    assert set(await fields_of(cluster, "articles")) == {"title", "year", "body"}
    await typesense(
        cluster, "POST", "/collections/articles/documents", {"id": "1", "title": "t", "year": 2020}
    )

    changed = {
        **ARTICLES,
        "fields": [
            {"name": "title", "type": "string", "facet": True},
            {"name": "year", "type": "int32"},
            {"name": "tags", "type": "string[]", "facet": True, "optional": True},
        ],
    }
    await kube.apply(content("TypesenseCollection", "articles", namespace, changed))
    await ready(kube, "TypesenseCollection", "articles", namespace)
    fields = await fields_of(cluster, "articles")
    assert set(fields) == {"title", "year", "tags"}, "tags added and body dropped in place"
    assert fields["title"]["facet"] is True, "a property changed in place"
    code, _ = await typesense(cluster, "GET", "/collections/articles/documents/1")
    assert code == 200, "the documents stay"
    obj = await kube.get(API, "TypesenseCollection", "articles", namespace)
    assert obj is not None
    assert obj["status"]["documents"] == 1

    # Changed behind the operator's back: the dropped field is added again at the next check.
    await typesense(cluster, "PATCH", "/collections/articles", {"fields": [{"name": "tags", "drop": True}]})
    assert "tags" not in await fields_of(cluster, "articles")

    async def field_back() -> bool:
        return "tags" in await fields_of(cluster, "articles")

    await wait_until(field_back, timeout=DRIFT_REPAIRED_WITHIN_SECONDS, interval=1, what="tags added again")

    retyped = {
        **changed,
        "fields": [*changed["fields"][:2], {"name": "tags", "type": "string", "optional": True}],
    }
    await kube.apply(content("TypesenseCollection", "articles", namespace, retyped))
    said = await not_ready(kube, "TypesenseCollection", "articles", namespace, "TypeChangeNotInPlace")
    assert "tags is string[], the spec asks for string" in said["message"]
    assert (await fields_of(cluster, "articles"))["tags"]["type"] == "string[]", "nothing applied"


async def test_aliases_synonyms_and_overrides_are_refused_made_changed_repaired_and_deleted_by_policy(
    kube: Kube, namespace: str, cluster: TypesenseCluster
) -> None:
    # What only Typesense (or the operator) can refuse: said in Ready, in its words. (What the API
    # server refuses is in tests/integration/test_typesense_validation.py.)
    orphan = {"collection": "no-such-collection", "synonyms": ["a", "b"]}
    await kube.apply(content("TypesenseSynonym", "orphan", namespace, orphan))
    lost = content("TypesenseAlias", "lost", namespace, {"collection": "books"})
    lost["spec"]["cluster"]["name"] = "no-such-cluster"
    await kube.apply(lost)
    said = await not_ready(kube, "TypesenseSynonym", "orphan", namespace, "RejectedByTypesense")
    assert "not found" in said["message"].lower(), said["message"]
    assert "its collection no-such-collection does not exist in Typesense" in said["message"], said
    said = await not_ready(kube, "TypesenseAlias", "lost", namespace, "ClusterNotFound")
    assert "no-such-cluster" in said["message"]
    # What the server's version (its /debug) lacks is refused with the version named (issue 68).
    in_a_set = {"collection": "books", "synonyms": ["a", "b"], "synonymSet": "words"}
    await kube.apply(content("TypesenseSynonym", "in-a-set", namespace, in_a_set))
    said = await not_ready(kube, "TypesenseSynonym", "in-a-set", namespace, "NotInThisVersion")
    assert "spec.synonymSet: Typesense 0.24.1 has no synonym_sets" in said["message"], said
    set_key = {"actions": ["synonym_sets:*"], "collections": ["books"], "secret": {"name": "sets-key"}}
    await kube.apply(content("TypesenseApiKey", "sets", namespace, set_key))
    said = await not_ready(kube, "TypesenseApiKey", "sets", namespace, "NotInThisVersion")
    assert "ask for synonyms:* instead" in said["message"], said
    assert await kube.get("v1", "Secret", "sets-key", namespace) is None, "nothing made for a refused key"

    await kube.apply(content("TypesenseAlias", "current", namespace, {"collection": "books"}))
    synonym = {"collection": "books", "synonyms": ["novel", "book", "tome"]}
    await kube.apply(content("TypesenseSynonym", "novels", namespace, synonym))
    override = {
        "collection": "books",
        "rule": {"query": "dune", "match": "exact"},
        "includes": [{"id": "7", "position": 1}],
        "filterBy": "title:=dune",
    }
    await kube.apply(content("TypesenseOverride", "pin-dune", namespace, override))
    for kind, name in (
        ("TypesenseAlias", "current"),
        ("TypesenseSynonym", "novels"),
        ("TypesenseOverride", "pin-dune"),
    ):
        await ready(kube, kind, name, namespace)
    assert (await typesense(cluster, "GET", "/aliases/current"))[1]["collection_name"] == "books"
    code, held = await typesense(cluster, "GET", "/collections/books/synonyms/novels")
    assert (code, held["synonyms"]) == (200, ["novel", "book", "tome"])
    code, held = await typesense(cluster, "GET", "/collections/books/overrides/pin-dune")
    assert (code, held["includes"], held["filter_by"]) == (200, [{"id": "7", "position": 1}], "title:=dune")

    # Changed in their specs: Typesense follows.
    await kube.apply(
        content("TypesenseSynonym", "novels", namespace, {**synonym, "synonyms": ["novel", "book"]})
    )
    override["filterBy"] = "title:=arrakis"
    await kube.apply(content("TypesenseOverride", "pin-dune", namespace, override))
    await ready(kube, "TypesenseSynonym", "novels", namespace)
    await ready(kube, "TypesenseOverride", "pin-dune", namespace)
    assert (await typesense(cluster, "GET", "/collections/books/synonyms/novels"))[1]["synonyms"] == [
        "novel",
        "book",
    ]
    assert (await typesense(cluster, "GET", "/collections/books/overrides/pin-dune"))[1][
        "filter_by"
    ] == "title:=arrakis"

    # Changed and deleted behind the operator's back, through Typesense's own API.
    await typesense(
        cluster, "POST", "/collections", {"name": "other", "fields": [{"name": "x", "type": "string"}]}
    )
    await typesense(cluster, "PUT", "/aliases/current", {"collection_name": "other"})
    await typesense(cluster, "DELETE", "/collections/books/synonyms/novels")
    await typesense(cluster, "DELETE", "/collections/books/overrides/pin-dune")

    async def repaired() -> bool:
        alias = await typesense(cluster, "GET", "/aliases/current")
        synonym = await typesense(cluster, "GET", "/collections/books/synonyms/novels")
        override = await typesense(cluster, "GET", "/collections/books/overrides/pin-dune")
        return alias[1].get("collection_name") == "books" and synonym[0] == 200 and override[0] == 200

    await wait_until(repaired, timeout=DRIFT_REPAIRED_WITHIN_SECONDS, interval=1, what="the drift repaired")

    # Delete (the default of these kinds): gone from Typesense too; Retain: left there.
    retained = {**synonym, "synonyms": ["film", "movie"], "deletionPolicy": "Retain"}
    await kube.apply(content("TypesenseSynonym", "films", namespace, retained))
    await ready(kube, "TypesenseSynonym", "films", namespace)
    for kind, name in (
        ("TypesenseSynonym", "novels"),
        ("TypesenseSynonym", "films"),
        ("TypesenseAlias", "current"),
    ):
        await kube.delete(API, kind, name, namespace)

    async def gone() -> bool:
        found = [
            await kube.get(API, kind, name, namespace)
            for kind, name in (
                ("TypesenseSynonym", "novels"),
                ("TypesenseSynonym", "films"),
                ("TypesenseAlias", "current"),
            )
        ]
        return found == [None, None, None]

    await wait_until(gone, timeout=30, interval=0.5, what="the objects deleted")
    assert (await typesense(cluster, "GET", "/collections/books/synonyms/novels"))[0] == 404
    assert (await typesense(cluster, "GET", "/aliases/current"))[0] == 404
    assert (await typesense(cluster, "GET", "/collections/books/synonyms/films"))[0] == 200, "Retain keeps it"


async def secret_value(kube: Kube, namespace: str, name: str, key: str = "api-key") -> str | None:
    found = await kube.get("v1", "Secret", name, namespace)
    encoded = ((found or {}).get("data") or {}).get(key)
    return base64.b64decode(encoded).decode() if encoded else None


async def search_with(cluster: TypesenseCluster, key: str) -> int:
    """The HTTP status of a search of books with ``key`` (200: accepted, 401: refused)."""
    leader = await cluster.leader_ip()
    answer = await cluster.http.get(
        f"http://{leader}:8108/collections/books/documents/search",
        params={"q": "*", "query_by": "title"},
        headers={"X-TYPESENSE-API-KEY": key},
    )
    return answer.status_code


async def test_a_key_is_made_into_its_secret_rotated_with_a_grace_and_made_again_when_deleted_by_hand(
    kube: Kube, namespace: str, cluster: TypesenseCluster
) -> None:
    spec = {
        "actions": ["documents:search"],
        "collections": ["books"],
        "description": "the search page",
        "secret": {"name": "search-key"},
        "rotationGraceSeconds": 5,
    }
    await kube.apply(content("TypesenseApiKey", "search", namespace, spec))
    await ready(kube, "TypesenseApiKey", "search", namespace)
    first = await secret_value(kube, namespace, "search-key")
    assert first is not None
    assert await search_with(cluster, first) == 200
    obj = await kube.get(API, "TypesenseApiKey", "search", namespace)
    assert obj is not None
    first_id = obj["status"]["keyId"]
    text = json.dumps(obj) + json.dumps(await kube.list("v1", "Event", namespace))
    assert first not in text, "the value is in no status and no Event"

    # Rotated by the annotation: the new value in the Secret works at once, the old one until its grace.
    rotate = content("TypesenseApiKey", "search", namespace, spec)
    rotate["metadata"]["annotations"] = {"ts.opentelekomcloud.com/rotate": "now"}
    await kube.apply(rotate)

    async def rotated() -> bool:
        value = await secret_value(kube, namespace, "search-key")
        return value not in (None, first) and await search_with(cluster, value or "") == 200

    await wait_until(rotated, timeout=30, interval=0.5, what="the rotated key in the Secret")

    async def old_refused() -> bool:
        return await search_with(cluster, first) == 401

    await wait_until(old_refused, timeout=30, interval=1, what="the old key refused after its grace")

    # Deleted in Typesense by hand: made again from the value in the Secret.
    second = await secret_value(kube, namespace, "search-key")
    assert second is not None
    obj = await kube.get(API, "TypesenseApiKey", "search", namespace)
    assert obj is not None
    assert obj["status"]["keyId"] != first_id
    deleted_id = obj["status"]["keyId"]
    assert (await typesense(cluster, "DELETE", f"/keys/{deleted_id}"))[0] == 200
    # Not "refused now": the operator may make it again before a search could see it gone (a CI run
    # saw it made again within the same second). Its new id says it was made again.

    async def back() -> bool:
        again = await kube.get(API, "TypesenseApiKey", "search", namespace)
        made_again = again is not None and again["status"].get("keyId") not in (None, deleted_id)
        return made_again and await search_with(cluster, second) == 200

    await wait_until(back, timeout=DRIFT_REPAIRED_WITHIN_SECONDS, interval=1, what="the key made again")

    await kube.delete(API, "TypesenseApiKey", "search", namespace)

    async def stopped() -> bool:
        return await search_with(cluster, second) == 401

    await wait_until(stopped, timeout=30, interval=1, what="the key deleted with its object")


async def test_a_type_change_is_made_by_migration_while_searches_through_the_alias_never_fail(
    kube: Kube, namespace: str, cluster: TypesenseCluster
) -> None:
    fields = [{"name": "title", "type": "string"}, {"name": "rank", "type": "int32"}]
    spec = {"fields": fields, "migration": {"batchSize": 250, "dropOldAfterSeconds": 5}}
    await kube.apply(content("TypesenseCollection", "catalog", namespace, spec))
    await ready(kube, "TypesenseCollection", "catalog", namespace)
    assert (await typesense(cluster, "GET", "/aliases/catalog"))[1]["collection_name"] == "catalog-1"
    documents = "\n".join(json.dumps({"id": str(i), "title": f"item {i}", "rank": i}) for i in range(2000))
    leader = await cluster.leader_ip()
    imported = await cluster.http.post(
        f"http://{leader}:8108/collections/catalog/documents/import?action=create",
        headers=cluster.headers,
        content=documents,
        timeout=60,
    )
    assert imported.status_code == 200
    assert imported.text.count('"success":true') == 2000

    attempts, failures = 0, []
    searching = True

    async def search() -> None:
        nonlocal attempts
        while searching:
            attempts += 1
            try:
                answer = await cluster.http.get(
                    f"http://{leader}:8108/collections/catalog/documents/search",
                    params={"q": "item", "query_by": "title"},
                    headers=cluster.headers,
                )
                if answer.status_code != 200 or answer.json()["found"] != 2000:
                    failures.append(f"{answer.status_code} {answer.text[:120]}")
            except httpx.HTTPError as error:
                failures.append(repr(error))
            await asyncio.sleep(0.05)

    searcher = asyncio.ensure_future(search())
    try:
        retyped = {**spec, "fields": [fields[0], {"name": "rank", "type": "float"}]}
        await kube.apply(content("TypesenseCollection", "catalog", namespace, retyped))

        async def migrated() -> bool:
            obj = await kube.get(API, "TypesenseCollection", "catalog", namespace)
            ready_now = (condition(obj or {}, "Ready") or {}).get("status") == "True"
            return ready_now and (obj or {}).get("status", {}).get("name") == "catalog-2"

        await wait_until(migrated, timeout=120, interval=0.5, what="catalog migrated to catalog-2")
        assert (await typesense(cluster, "GET", "/aliases/catalog"))[1]["collection_name"] == "catalog-2"

        async def old_dropped() -> bool:
            return (await typesense(cluster, "GET", "/collections/catalog-1"))[0] == 404

        # The searches go on until the old collection is gone: its drop is the last moment a search
        # through the alias could fail. (A fast migration alone once left the searcher 20 tries.)
        await wait_until(
            old_dropped, timeout=DRIFT_REPAIRED_WITHIN_SECONDS, interval=1, what="catalog-1 dropped"
        )
        await asyncio.sleep(1)
    finally:
        searching = False
        await searcher
    assert attempts > 20
    assert failures == [], f"{len(failures)} of {attempts} searches failed: {failures[:3]}"
    code, held = await typesense(cluster, "GET", "/collections/catalog-2")
    assert (code, held["num_documents"]) == (200, 2000)
    assert {field["name"]: field["type"] for field in held["fields"]}["rank"] == "float"

    # Issue 68: a number into a string (the docs' own example) migrates, Typesense coercing each value;
    # a second migration within the first one's grace drops both sources, each after its own grace.
    # A client writes through the alias all along, 10 writes a second: none of its acknowledged
    # writes is lost, those the old collection took during the copy included.
    graced = {**spec, "migration": {"batchSize": 250, "dropOldAfterSeconds": 15}}
    as_text = {**graced, "fields": [fields[0], {"name": "rank", "type": "string"}]}
    writer = CollectionWriter(
        cluster, leader, "catalog", lambda n: {"id": f"w{n}", "title": f"written {n}", "rank": n}
    )
    writer.start()
    try:
        await asyncio.sleep(2)
        await kube.apply(content("TypesenseCollection", "catalog", namespace, as_text))
        done: Any = await wait_until(
            lambda: _migrated_to(kube, namespace, "catalog-3"), timeout=120, what="catalog-3"
        )
        await asyncio.sleep(3)
    finally:
        await writer.stop()
    acknowledged = writer.acknowledged
    assert len(acknowledged) > 30, acknowledged
    missing = await writer.missing_from("catalog-3")
    assert missing == [], f"{len(missing)} of {len(acknowledged)} acknowledged writes lost: {missing[:5]}"
    print(
        f"migration to catalog-3 under {len(acknowledged)} writes: "
        f"{done['status']['migration'].get('caughtUp')} carried over from the old collection, 0 lost"
    )
    separated = {**as_text, "tokenSeparators": ["-"]}
    await kube.apply(content("TypesenseCollection", "catalog", namespace, separated))
    moved: Any = await wait_until(
        lambda: _migrated_to(kube, namespace, "catalog-4"), timeout=120, what="catalog-4"
    )
    retiring = [entry["name"] for entry in moved["status"]["migration"]["retiring"]]
    assert retiring == ["catalog-2", "catalog-3"], moved["status"]["migration"]
    code, held = await typesense(cluster, "GET", "/collections/catalog-4")
    assert code == 200
    assert held["num_documents"] >= 2000 + len(acknowledged), "a write unanswered may have landed too"
    code, document = await typesense(cluster, "GET", "/collections/catalog-4/documents/7")
    assert code == 200, document
    assert isinstance(document["rank"], str), document  # Typesense's own text of the number
    assert float(document["rank"]) == 7, document

    async def both_dropped() -> bool:
        gone = [(await typesense(cluster, "GET", f"/collections/{c}"))[0] for c in ("catalog-2", "catalog-3")]
        return gone == [404, 404]

    await wait_until(both_dropped, timeout=15 + DRIFT_REPAIRED_WITHIN_SECONDS, what="both sources dropped")
    kept = (await kube.get(API, "TypesenseCollection", "catalog", namespace))["status"]["migration"]
    assert kept.get("retiring") == [], kept


async def _migrated_to(kube: Kube, namespace: str, collection: str) -> dict[str, Any] | None:
    obj = await kube.get(API, "TypesenseCollection", "catalog", namespace)
    ready_now = (condition(obj or {}, "Ready") or {}).get("status") == "True"
    return obj if ready_now and (obj or {}).get("status", {}).get("name") == collection else None
