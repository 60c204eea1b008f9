"""The metadata every child of a custom object carries, computed in one place; pure, no I/O.

Each operator's ``resources`` room describes its custom object with a frozen
dataclass that derives from :class:`Owner` (the Typesense ``Cluster``, the
Monocle ``Instance``) and sets three class attributes: the custom resource, the
``app.kubernetes.io/name`` of its children, and the ``managed-by`` value its
watches select on. Builders then ask the object for labels, selectors, the
owner reference and whole child metadata. :func:`stale_children` tells a
controller which live children no desired manifest names any more.
:data:`CHILDREN_APPLIED` and :class:`StepEventReason` are the words the shared
apply-report-prune step (:mod:`operator_core.controller`) uses for every operator.

Who calls it: the operators' ``resources`` builders, and their controllers for
pruning.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, ClassVar, Generic, Self, TypeVar, cast

from pydantic import BaseModel, ValidationError

from operator_core.crdgen import CustomResource
from operator_core.errors import InvalidSpec
from operator_core.manifests import SUITE_DOMAIN

__all__ = [
    "CHILDREN_APPLIED",
    "COMPONENT_LABEL",
    "INSTANCE_LABEL",
    "INVALID_SPEC",
    "MANAGED_BY_LABEL",
    "NAME_LABEL",
    "OWNER_NAMESPACE_LABEL",
    "WATCH_FORBIDDEN",
    "Manifest",
    "Owner",
    "StepEventReason",
    "stale_children",
]

Manifest = dict[str, Any]
SpecT = TypeVar("SpecT", bound=BaseModel)

NAME_LABEL = "app.kubernetes.io/name"
INSTANCE_LABEL = "app.kubernetes.io/instance"
COMPONENT_LABEL = "app.kubernetes.io/component"
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
OWNER_NAMESPACE_LABEL = f"{SUITE_DOMAIN}/owner-namespace"
"""On a child in another namespace than its owner's (which no owner reference can name): the owner's
namespace, so that a change wakes the right owner and a prune or clean-up finds it by label."""

CHILDREN_APPLIED = "ChildrenApplied"
"""The condition that says whether every child was applied on the last reconcile (every operator's)."""
INVALID_SPEC = "InvalidSpec"
"""Ready's reason when the spec passed the CRD's schema but its model refuses it (every operator's)."""
WATCH_FORBIDDEN = "WatchForbidden"
"""Ready's reason when RBAC forbids watching a kind the object's controller needs (every operator's)."""


class StepEventReason(StrEnum):
    """The Event reasons of the shared controller step, the same for every operator."""

    CREATED = "Created"
    UPDATED = "Updated"
    DELETED = "Deleted"
    APPLY_FAILED = "ApplyFailed"
    INVALID_SPEC = "InvalidSpec"
    WATCH_FORBIDDEN = "WatchForbidden"


@dataclass(frozen=True)
class Owner(Generic[SpecT]):
    """One custom object as its builders see it: identity, validated spec, and its children's metadata."""

    name: str
    namespace: str
    uid: str
    """For owner references (empty before the object was created)."""
    spec: SpecT

    resource: ClassVar[CustomResource]
    """The custom resource: its kind, apiVersion and spec model."""
    app: ClassVar[str]
    """The children's ``app.kubernetes.io/name``."""
    managed_by: ClassVar[str]
    """The children's ``app.kubernetes.io/managed-by``: what the operator's watches select on."""

    @classmethod
    def from_object(cls, obj: Mapping[str, Any]) -> Self:
        """The object as read from the API; a spec its model refuses is :class:`InvalidSpec` (permanent)."""
        metadata = obj["metadata"]
        try:
            spec = cls.resource.spec_model.model_validate(obj.get("spec") or {})
        except ValidationError as error:
            problems = "; ".join(
                f"spec.{'.'.join(str(part) for part in problem['loc'])}: {problem['msg']}"
                for problem in error.errors(include_url=False, include_input=False)
            )
            raise InvalidSpec(f"{cls.resource.kind} {metadata['name']}: {problems}") from None
        return cls(
            name=metadata["name"],
            namespace=metadata["namespace"],
            uid=metadata.get("uid", ""),
            spec=cast(SpecT, spec),
        )

    def selector(self, component: str) -> dict[str, str]:
        """The pods (or other children) of one component of this object."""
        return {NAME_LABEL: self.app, INSTANCE_LABEL: self.name, COMPONENT_LABEL: component}

    def labels(self, component: str) -> dict[str, str]:
        return {**self.selector(component), MANAGED_BY_LABEL: self.managed_by}

    def component_selector(self, component: str) -> dict[str, str]:
        """This object's children of one component, whatever their name label (Jobs, say)."""
        return {**self.instance_selector(), COMPONENT_LABEL: component}

    def instance_selector(self) -> dict[str, str]:
        """Every child of this object, whatever its component."""
        return {INSTANCE_LABEL: self.name, MANAGED_BY_LABEL: self.managed_by}

    def owner_reference(self) -> dict[str, Any]:
        return {
            "apiVersion": self.resource.api_version,
            "kind": self.resource.kind,
            "name": self.name,
            "uid": self.uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }

    def metadata(self, name: str, component: str, **extra: Any) -> dict[str, Any]:
        """Metadata of a child: namespace, labels and the owner reference that makes GC remove it."""
        return {
            "name": name,
            "namespace": self.namespace,
            "labels": self.labels(component),
            "ownerReferences": [self.owner_reference()],
            **extra,
        }


def stale_children(
    desired: Iterable[Manifest], live: Iterable[Manifest], prunable: Iterable[tuple[str, str]]
) -> list[Manifest]:
    """Live children of a prunable (apiVersion, kind) that no desired manifest names (in its namespace)."""

    def key(m: Manifest) -> tuple[str, str, str | None, str]:
        metadata = m["metadata"]
        return (m["apiVersion"], m["kind"], metadata.get("namespace"), metadata["name"])

    wanted = {key(m) for m in desired}
    kinds = set(prunable)
    return [m for m in live if (m["apiVersion"], m["kind"]) in kinds and key(m) not in wanted]
