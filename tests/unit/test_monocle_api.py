"""The Monocle model accepts the Go operator's sample and its CEL rules say what they promise."""

from __future__ import annotations

from typing import Any

import pytest

from monocle_operator.api import DEFAULT_IMAGE, MONOCLE, MonocleSpec
from operator_core.crdgen import crd_manifest
from operator_testkit import cel
from samples import load_sample

SEED_SAMPLE = "monocle_v1alpha1_monocle"


@pytest.fixture(scope="module")
def spec_schema() -> dict[str, Any]:
    root = crd_manifest(MONOCLE)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return dict(root["properties"]["spec"])


def test_seed_sample_is_accepted_with_the_go_operators_defaults() -> None:
    (document,) = load_sample(SEED_SAMPLE)
    assert document["apiVersion"] == MONOCLE.api_version
    assert document["kind"] == MONOCLE.kind
    wire = MonocleSpec.model_validate(document["spec"]).to_wire()
    assert wire["monoclePublicURL"] == "http://localhost:8090"
    assert wire["image"] == DEFAULT_IMAGE == "quay.io/change-metrics/monocle:1.8.0"
    assert wire["elastic"]["storageSize"] == "1Gi"
    assert "storageClassName" not in wire["elastic"], "unset means the cluster's default class"


def test_an_empty_spec_means_every_default(spec_schema: dict[str, Any]) -> None:
    assert MonocleSpec.model_validate({}).monocle_public_url == "http://localhost:8090"
    assert spec_schema["properties"]["elastic"]["default"] == {}, (
        "{} lets the API server fill nested defaults and never writes a null"
    )


@pytest.mark.parametrize(
    ("url", "allowed"),
    [
        ("http://localhost:8090", True),
        ("https://monocle.example.com", True),
        ("monocle.example.com", False),
        ("ftp://monocle.example.com", False),
    ],
)
def test_public_url_rule(spec_schema: dict[str, Any], url: str, allowed: bool) -> None:
    (rule,) = cel.rules(spec_schema["properties"]["monoclePublicURL"])
    assert cel.evaluate(rule, {"self": url}) is allowed


@pytest.mark.parametrize(
    ("heap", "allowed"), [("512m", True), ("1g", True), ("2G", True), ("512", False), ("0m", False)]
)
def test_java_heap_rule(spec_schema: dict[str, Any], heap: str, allowed: bool) -> None:
    (rule,) = cel.rules(spec_schema["properties"]["elastic"]["properties"]["javaHeap"])
    assert cel.evaluate(rule, {"self": heap}) is allowed


@pytest.mark.parametrize(
    ("old", "new", "allowed"),
    [
        ({}, {}, True),
        ({"storageClassName": "fast"}, {"storageClassName": "fast"}, True),
        ({"storageClassName": "fast"}, {"storageClassName": "slow"}, False),
        ({}, {"storageClassName": "slow"}, False),
        ({"storageClassName": "fast"}, {}, False),
    ],
)
def test_storage_class_is_fixed(
    spec_schema: dict[str, Any], old: dict[str, str], new: dict[str, str], allowed: bool
) -> None:
    (rule,) = [r for r in cel.rules(spec_schema["properties"]["elastic"]) if "storageClassName" in r]
    engine = {"engine": "Elasticsearch"}
    assert cel.evaluate(rule, {"self": {**engine, **new}, "oldSelf": {**engine, **old}}) is allowed


ES, OS = "Elasticsearch", "OpenSearch"
ES_IMAGE = "docker.elastic.co/elasticsearch/elasticsearch:7.17.5"


@pytest.mark.parametrize(
    ("old", "new", "allowed"),
    [
        ({"engine": ES}, {"engine": ES}, True),
        ({"engine": ES}, {"engine": OS}, False),  # how the data moves is not said
        ({"engine": ES}, {"engine": OS, "onEngineChange": "Recrawl"}, True),
        ({"engine": OS, "onEngineChange": "Recrawl"}, {"engine": ES, "onEngineChange": "Recrawl"}, True),
        # An instance from before the choice has the Elasticsearch image stored: it must change too.
        (
            {"engine": ES, "image": ES_IMAGE},
            {"engine": OS, "onEngineChange": "Recrawl", "image": ES_IMAGE},
            False,
        ),
        ({"engine": ES, "image": ES_IMAGE}, {"engine": OS, "onEngineChange": "Recrawl"}, True),
        ({"engine": ES, "image": ES_IMAGE}, {"engine": ES, "image": ES_IMAGE}, True),
    ],
)
def test_a_change_of_engine_says_how_the_data_moves_and_leaves_the_old_image(
    spec_schema: dict[str, Any], old: dict[str, str], new: dict[str, str], allowed: bool
) -> None:
    rules = [r for r in cel.rules(spec_schema["properties"]["elastic"]) if "engine" in r]
    assert len(rules) == 2
    verdict = all(cel.evaluate(rule, {"self": new, "oldSelf": old}) for rule in rules)
    assert verdict is allowed


def test_every_rule_has_a_message_that_names_the_field() -> None:
    crd = crd_manifest(MONOCLE)
    text = repr(crd)
    for field in (
        "monoclePublicURL",
        "elastic.javaHeap",
        "elastic.storageSize",
        "elastic.storageClassName",
        "elastic.engine",
        "elastic.image",
    ):
        assert f"'message': '{field}" in text or f"'message': \"{field}" in text, field


def test_printer_columns_show_url_and_readiness() -> None:
    version = crd_manifest(MONOCLE)["spec"]["versions"][0]
    names = [c["name"] for c in version["additionalPrinterColumns"]]
    assert names[:3] == ["URL", "Ready", "Reason"]
    assert version["subresources"] == {"status": {}}


@pytest.mark.parametrize(("name", "allowed"), [("a" * 38, True), ("a" * 39, False)])
def test_name_leaves_room_for_the_job_name(name: str, allowed: bool) -> None:
    root = crd_manifest(MONOCLE)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    (rule,) = cel.rules(root)
    assert cel.evaluate(rule, {"self": {"metadata": {"name": name}}}) is allowed
    assert (len(f"{name}-update-idents-0123456789") <= 63) is allowed
