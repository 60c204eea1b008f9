"""The CRD generator turns pydantic models into structural schemas that Kubernetes accepts."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import Field

from operator_core.apimodel import ApiModel, cel, immutable
from operator_core.cli import render_crd_files
from operator_core.crdgen import (
    CustomResource,
    PrinterColumn,
    ScaleSubresource,
    crd_manifest,
    structural_schema,
)
from operator_core.errors import CRDGenerationError


class Inner(ApiModel):
    """An inner object."""

    size: str = "1Gi"
    """How big."""
    tags: dict[str, str] | None = None
    """Unset by default: absent from the outer default, which the API server refuses as null."""


class Sample(ApiModel):
    """A sample spec."""

    replica_count: int = Field(default=3, gt=0, json_schema_extra=cel(("self % 2 == 1", "must be odd")))
    """How many."""
    mode: str | None = None
    """Which mode."""
    port: int | str = 80
    """A number or a name."""
    inner: Inner = Inner()
    """An inner object."""
    labels: dict[str, str] | None = None
    """Free labels."""
    anything: Any = None
    """Whatever the user writes."""
    fixed: str = Field(default="a", json_schema_extra=immutable("fixed"))
    """Cannot change."""


def test_optional_fields_become_their_type_without_null_default() -> None:
    schema = structural_schema(Sample)["properties"]["mode"]
    assert schema == {"type": "string", "description": "Which mode."}


def test_field_names_are_camel_case_and_documented() -> None:
    properties = structural_schema(Sample)["properties"]
    assert list(properties) == ["replicaCount", "mode", "port", "inner", "labels", "anything", "fixed"]
    assert all(p["description"] for p in properties.values())


def test_exclusive_minimum_becomes_openapi_v3_form() -> None:
    schema = structural_schema(Sample)["properties"]["replicaCount"]
    assert schema["minimum"] == 0
    assert schema["exclusiveMinimum"] is True
    assert schema["default"] == 3


def test_cel_rules_and_transition_rules_are_carried() -> None:
    properties = structural_schema(Sample)["properties"]
    assert properties["replicaCount"]["x-kubernetes-validations"] == [
        {"rule": "self % 2 == 1", "message": "must be odd"}
    ]
    assert properties["fixed"]["x-kubernetes-validations"][0]["rule"] == "self == oldSelf"


def test_int_or_string_union() -> None:
    schema = structural_schema(Sample)["properties"]["port"]
    assert schema["x-kubernetes-int-or-string"] is True
    assert "type" not in schema


def test_references_are_inlined_with_defaults() -> None:
    schema = structural_schema(Sample)["properties"]["inner"]
    assert schema["type"] == "object"
    assert schema["default"] == {"size": "1Gi"}
    assert schema["properties"]["size"] == {"type": "string", "default": "1Gi", "description": "How big."}
    assert schema["description"] == "An inner object."


def test_maps_and_any() -> None:
    properties = structural_schema(Sample)["properties"]
    assert properties["labels"]["additionalProperties"] == {"type": "string"}
    assert properties["anything"]["x-kubernetes-preserve-unknown-fields"] is True


def test_no_references_or_titles_remain() -> None:
    text = repr(structural_schema(Sample))
    assert "$ref" not in text
    assert "'title'" not in text
    assert "anyOf" not in text


def test_undocumented_field_is_refused() -> None:
    class Undocumented(ApiModel):
        """Has a field without a docstring."""

        name: str

    with pytest.raises(CRDGenerationError, match=r"Undocumented\.name: every field needs a description"):
        structural_schema(Undocumented)


def test_union_without_structural_form_is_refused() -> None:
    class Ambiguous(ApiModel):
        """Two object shapes."""

        value: Inner | list[str]
        """Either."""

    with pytest.raises(CRDGenerationError, match="no structural schema"):
        structural_schema(Ambiguous)


def test_manifest_carries_names_columns_and_subresources() -> None:
    resource = CustomResource(
        group="example.dev",
        version="v1",
        kind="Sample",
        plural="samples",
        spec_model=Sample,
        status_model=Inner,
        short_names=("smp",),
        categories=("examples",),
        printer_columns=(PrinterColumn("Count", ".spec.replicaCount", "integer"),),
        scale=ScaleSubresource(".spec.replicaCount", ".status.size"),
    )
    crd = crd_manifest(resource)
    assert crd["metadata"]["name"] == "samples.example.dev"
    names = crd["spec"]["names"]
    assert names["shortNames"] == ["smp"]
    assert names["categories"] == ["examples"]
    version = crd["spec"]["versions"][0]
    assert version["subresources"] == {
        "status": {},
        "scale": {"specReplicasPath": ".spec.replicaCount", "statusReplicasPath": ".status.size"},
    }
    assert version["additionalPrinterColumns"] == [
        {"name": "Count", "type": "integer", "jsonPath": ".spec.replicaCount"}
    ]
    assert version["schema"]["openAPIV3Schema"]["required"] == ["spec"]


def test_committed_crds_are_current(pytestconfig: pytest.Config) -> None:
    """deploy/crds/ must match the models; regenerate with `operator-suite crds`."""
    directory = pytestconfig.rootpath / "deploy" / "crds"
    rendered = render_crd_files()
    assert rendered, "no custom resources were found through the operator_suite.crds entry points"
    committed = {p.name: p.read_text() for p in directory.glob("*.yaml")}
    assert committed.keys() == rendered.keys(), "run `operator-suite crds` and commit deploy/crds/"
    for name, text in rendered.items():
        assert committed[name] == text, (
            f"deploy/crds/{name} is stale: run `operator-suite crds` and commit it"
        )


def test_every_generated_property_is_described() -> None:
    def walk(schema: dict[str, Any], path: str) -> list[str]:
        missing = []
        for name, child in schema.get("properties", {}).items():
            if name != "metadata" and not child.get("description"):
                missing.append(f"{path}.{name}")
            missing += walk(child, f"{path}.{name}")
        if "items" in schema:
            missing += walk(schema["items"], f"{path}[]")
        return missing

    import yaml

    for name, text in render_crd_files().items():
        for document in yaml.safe_load_all(text):
            root = document["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
            assert walk(root, name) == []
