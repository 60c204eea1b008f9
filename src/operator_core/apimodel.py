"""The base class and annotations for every custom resource's spec and status models.

Models are written in Python naming and serialise to the camelCase that
Kubernetes users expect. Field docstrings become schema descriptions, so
``kubectl explain`` documents every field from the same text a developer reads.
CEL rules are attached with :func:`cel` and :func:`immutable`; the CRD
generator (:mod:`operator_core.crdgen`) copies them into
``x-kubernetes-validations``.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

__all__ = ["ApiModel", "cel", "immutable", "preserve_unknown"]


class ApiModel(BaseModel):
    """Base of spec and status models: camelCase on the wire, docstrings as descriptions."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        use_attribute_docstrings=True,
        extra="forbid",
    )

    def to_wire(self) -> dict[str, Any]:
        """The object as the API server stores it: camelCase keys, unset optionals left out."""
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")


def cel(
    *rules: tuple[str, str] | dict[str, Any],
) -> dict[str, Any]:
    """``json_schema_extra`` carrying CEL rules, each ``(rule, message)`` or a full validation dict.

    A full dict may add ``fieldPath``, ``reason`` or ``messageExpression`` as the
    Kubernetes ValidationRule allows.
    """
    validations = [r if isinstance(r, dict) else {"rule": r[0], "message": r[1]} for r in rules]
    return {"x-kubernetes-validations": validations}


def immutable(what: str) -> dict[str, Any]:
    """A transition rule that refuses any change once the field is set."""
    return cel(("self == oldSelf", f"{what} is immutable once set"))


def preserve_unknown() -> dict[str, Any]:
    """Schema extra for a free-form object, such as an embedded core/v1 type checked later."""
    return {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
