"""Turn pydantic spec and status models into CustomResourceDefinition manifests.

Each operator's ``api`` room describes its kinds with :class:`CustomResource`.
``operator-suite crds`` writes the result to ``deploy/crds/``, and a unit test
fails when the committed YAML is stale.

The JSON schema that pydantic emits is close to, but not, a Kubernetes
*structural* schema, so :func:`structural_schema` rewrites it:

- ``$ref``/``$defs`` are inlined (Kubernetes allows no references);
- ``Optional[X]`` (``anyOf`` with ``null``) becomes ``X``; a ``null`` default is dropped;
- ``int | str`` becomes ``x-kubernetes-int-or-string``;
- JSON-schema-2020 ``exclusiveMinimum: n`` becomes OpenAPI v3.0's ``minimum: n, exclusiveMinimum: true``;
- ``const`` becomes a one-value ``enum``; titles are dropped;
- a field typed ``Any`` keeps its unknown fields.

Every property must carry a description, or generation fails: that is what
makes ``kubectl explain`` complete.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import yaml
from pydantic import BaseModel

from operator_core.conditions import METAV1, ConditionShape
from operator_core.errors import CRDGenerationError

__all__ = [
    "CustomResource",
    "PrinterColumn",
    "ScaleSubresource",
    "crd_manifest",
    "crds_yaml",
    "structural_schema",
]

# Keys of JSON schema that a Kubernetes structural schema accepts as they are.
_KEPT_KEYS = frozenset(
    {
        "description",
        "default",
        "enum",
        "format",
        "maximum",
        "minimum",
        "maxLength",
        "minLength",
        "pattern",
        "maxItems",
        "minItems",
        "uniqueItems",
        "maxProperties",
        "minProperties",
        "required",
        "nullable",
    }
)
# Formats the API server understands; pydantic's others (e.g. "uri") would be ignored or refused.
_KUBERNETES_FORMATS = frozenset(
    {"int32", "int64", "float", "double", "byte", "date", "date-time", "duration", "password", "uuid"}
)
_DROPPED_KEYS = frozenset({"title", "examples", "readOnly", "writeOnly", "discriminator"})


@dataclass(frozen=True)
class PrinterColumn:
    """One ``additionalPrinterColumns`` entry: what ``kubectl get`` shows."""

    name: str
    json_path: str
    type: Literal["string", "integer", "number", "boolean", "date"] = "string"
    description: str = ""
    priority: int = 0

    def to_wire(self) -> dict[str, Any]:
        column: dict[str, Any] = {"name": self.name, "type": self.type, "jsonPath": self.json_path}
        if self.description:
            column["description"] = self.description
        if self.priority:
            column["priority"] = self.priority
        return column


@dataclass(frozen=True)
class ScaleSubresource:
    """Paths for the ``scale`` subresource, so ``kubectl scale`` and autoscalers work."""

    spec_replicas_path: str = ".spec.replicas"
    status_replicas_path: str = ".status.replicas"
    label_selector_path: str | None = None

    def to_wire(self) -> dict[str, Any]:
        scale = {"specReplicasPath": self.spec_replicas_path, "statusReplicasPath": self.status_replicas_path}
        if self.label_selector_path:
            scale["labelSelectorPath"] = self.label_selector_path
        return scale


@dataclass(frozen=True)
class CustomResource:
    """Everything a CRD needs beyond the models: names, scope, columns and subresources."""

    group: str
    version: str
    kind: str
    plural: str
    spec_model: type[BaseModel]
    status_model: type[BaseModel] | None = None
    description: str = ""
    scope: Literal["Namespaced", "Cluster"] = "Namespaced"
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    printer_columns: tuple[PrinterColumn, ...] = ()
    scale: ScaleSubresource | None = None
    spec_required: bool = True
    # Rules on the whole object, e.g. those relating metadata.name to the spec.
    validations: tuple[dict[str, Any], ...] = field(default=())
    conditions: ConditionShape = METAV1
    """How its ``status.conditions`` are written (metav1's shape, or one with more fields)."""

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"

    @property
    def crd_name(self) -> str:
        return f"{self.plural}.{self.group}"


def structural_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The structural OpenAPI v3 schema of ``model``, as Kubernetes wants it."""
    raw = model.model_json_schema(by_alias=True, mode="validation")
    definitions = raw.pop("$defs", {})
    return _convert(raw, definitions, path=model.__name__)


def _resolve_reference(node: dict[str, Any], definitions: dict[str, Any]) -> dict[str, Any]:
    """Inline a ``$ref`` (or pydantic's single-element ``allOf`` wrapper), keeping the outer keys."""
    outer = {k: v for k, v in node.items() if k not in ("$ref", "allOf")}
    if "$ref" in node:
        target = definitions[node["$ref"].rsplit("/", 1)[-1]]
    else:
        (target,) = node["allOf"]
        target = _resolve_reference(target, definitions) if "$ref" in target else target
    # The referencing field's description and default win over the model's own.
    return {**target, **outer}


def _collapse_any_of(node: dict[str, Any], definitions: dict[str, Any], path: str) -> dict[str, Any]:
    outer = {k: v for k, v in node.items() if k != "anyOf"}
    choices = [c for c in node["anyOf"] if c.get("type") != "null"]
    if outer.get("default", "unset") is None:
        del outer["default"]
    if len(choices) == 1:
        (only,) = choices
        # The outer description and default win; the caller's loop resolves a reference inside.
        return {**only, **outer}
    types = sorted(c.get("type", "?") for c in choices)
    if types == ["integer", "string"]:
        return {**outer, "x-kubernetes-int-or-string": True}
    raise CRDGenerationError(f"{path}: a union of {types} has no structural schema; use one type")


def _without_nulls(value: Any) -> Any:
    """An object default without its unset (null) members: the API server refuses a null where the
    schema wants an object or a string, and an absent member means the same."""
    if isinstance(value, dict):
        return {key: _without_nulls(member) for key, member in value.items() if member is not None}
    return value


def prose(docstring: str) -> str:
    """A docstring as ``kubectl explain`` should show it: the lines of each paragraph joined by spaces
    (a docstring wraps at the code's line length, not the reader's), paragraphs kept apart."""
    paragraphs = (" ".join(line.strip() for line in block.splitlines()) for block in docstring.split("\n\n"))
    return "\n\n".join(paragraph for paragraph in paragraphs if paragraph)


def _is_reference(node: dict[str, Any]) -> bool:
    return "$ref" in node or ("allOf" in node and len(node["allOf"]) == 1)


def _convert(node: dict[str, Any], definitions: dict[str, Any], path: str) -> dict[str, Any]:
    while True:
        if _is_reference(node):
            node = _resolve_reference(node, definitions)
        elif "anyOf" in node:
            node = _collapse_any_of(node, definitions, path)
        else:
            break
    if "oneOf" in node or "allOf" in node:
        raise CRDGenerationError(f"{path}: oneOf/allOf has no structural schema")

    kind = node.get("type")
    if isinstance(kind, list):
        raise CRDGenerationError(f"{path}: a list of types {kind} has no structural schema")
    out: dict[str, Any] = {} if kind is None else {"type": kind}
    for key, value in node.items():
        if key in _DROPPED_KEYS or key in ("properties", "items", "additionalProperties", "type"):
            continue
        if key == "const":
            out["enum"] = [value]
        elif key == "exclusiveMinimum":
            out["minimum"], out["exclusiveMinimum"] = value, True
        elif key == "exclusiveMaximum":
            out["maximum"], out["exclusiveMaximum"] = value, True
        elif key == "format":
            if value in _KUBERNETES_FORMATS:
                out["format"] = value
        elif key == "description":
            out[key] = prose(value)
        elif key in _KEPT_KEYS or key.startswith("x-kubernetes-"):
            out[key] = value
        else:
            raise CRDGenerationError(f"{path}: schema keyword {key!r} has no Kubernetes equivalent")

    if out.get("default", "unset") is None:
        del out["default"]
    elif isinstance(out.get("default"), dict):
        out["default"] = _without_nulls(out["default"])

    if kind == "object" or "properties" in node:
        out["type"] = "object"
        properties = node.get("properties", {})
        if properties:
            out["properties"] = {}
            for name, child in properties.items():
                child_path = f"{path}.{name}"
                converted = _convert(child, definitions, child_path)
                if not converted.get("description"):
                    raise CRDGenerationError(f"{child_path}: every field needs a description (a docstring)")
                out["properties"][name] = converted
        extra = node.get("additionalProperties")
        if isinstance(extra, dict) and not properties:
            out["additionalProperties"] = _convert(extra, definitions, f"{path}[*]")
        elif not properties and extra is not False and "x-kubernetes-preserve-unknown-fields" not in out:
            out["x-kubernetes-preserve-unknown-fields"] = True
    elif kind == "array":
        out["items"] = _convert(node.get("items", {}), definitions, f"{path}[]")
    elif kind is None and not (
        out.get("x-kubernetes-int-or-string") or out.get("x-kubernetes-preserve-unknown-fields")
    ):
        # A field typed Any: keep whatever the user wrote.
        out["x-kubernetes-preserve-unknown-fields"] = True
    return out


def crd_manifest(resource: CustomResource) -> dict[str, Any]:
    """The full CustomResourceDefinition for ``resource``."""
    properties: dict[str, Any] = {
        "apiVersion": {"type": "string", "description": "The versioned schema of this object."},
        "kind": {"type": "string", "description": "The REST resource this object represents."},
        "metadata": {"type": "object"},
        "spec": structural_schema(resource.spec_model),
    }
    subresources: dict[str, Any] = {}
    if resource.status_model is not None:
        properties["status"] = structural_schema(resource.status_model)
        subresources["status"] = {}
    if resource.scale is not None:
        subresources["scale"] = resource.scale.to_wire()

    root: dict[str, Any] = {
        "type": "object",
        "description": resource.description or (resource.spec_model.__doc__ or "").strip(),
        "properties": properties,
    }
    if resource.spec_required:
        root["required"] = ["spec"]
    if resource.validations:
        root["x-kubernetes-validations"] = list(resource.validations)

    names: dict[str, Any] = {
        "kind": resource.kind,
        "listKind": f"{resource.kind}List",
        "plural": resource.plural,
        "singular": resource.kind.lower(),
    }
    if resource.short_names:
        names["shortNames"] = list(resource.short_names)
    if resource.categories:
        names["categories"] = list(resource.categories)

    version: dict[str, Any] = {
        "name": resource.version,
        "served": True,
        "storage": True,
        "schema": {"openAPIV3Schema": root},
    }
    if subresources:
        version["subresources"] = subresources
    if resource.printer_columns:
        version["additionalPrinterColumns"] = [c.to_wire() for c in resource.printer_columns]

    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": resource.crd_name},
        "spec": {"group": resource.group, "names": names, "scope": resource.scope, "versions": [version]},
    }


def crds_yaml(resources: list[CustomResource]) -> str:
    """Several CRDs as one multi-document YAML text, in the given order, stable across runs."""
    header = "# Generated by `operator-suite crds` from the pydantic models. Do not edit by hand.\n"
    documents = [yaml.safe_dump(crd_manifest(r), sort_keys=False, width=100) for r in resources]
    return header + "---\n".join(documents)
