"""Growing the volumes of a StatefulSet: whether a larger size can be had, and the patches that ask
for it. Pure but for :func:`expansion_allowed`, the one read of a StorageClass: the controllers read the
claims, and apply what is decided here.

Kubernetes grows a bound PersistentVolumeClaim when its StorageClass says
``allowVolumeExpansion: true``; a StatefulSet's ``volumeClaimTemplates`` never change, so an operator
that wants the template to say the new size as well must recreate the StatefulSet (orphaning its
pods). Who calls it: the Monocle and Typesense controllers.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from enum import Enum
from typing import Any, Protocol

from operator_core.children import Manifest
from operator_core.quantity import parse_quantity

__all__ = [
    "Expansion",
    "ExpansionPlan",
    "Reader",
    "claim_expansion",
    "claim_template_size",
    "decide_expansion",
    "expansion_allowed",
    "requested_size",
    "smaller",
]


def _bytes(size: str) -> Decimal:
    value = parse_quantity(size)
    if value is None:
        raise ValueError(f"not a Kubernetes quantity: {size!r}")
    return value


def smaller(size: str, than: str) -> bool:
    """Whether the quantity ``size`` is less than ``than`` (``1024Mi`` is not less than ``1Gi``)."""
    return _bytes(size) < _bytes(than)


class Expansion(Enum):
    NONE = "none"
    """The volume already has the size asked for (or more), or does not exist yet."""
    EXPAND = "expand"
    """Ask the claims for the new size."""
    NOT_EXPANDABLE = "not-expandable"
    """A larger size was asked for but the StorageClass does not allow expansion."""


@dataclass(frozen=True)
class ExpansionPlan:
    action: Expansion
    size: str
    """The size the volume has (NONE, NOT_EXPANDABLE) or is to get (EXPAND)."""
    message: str = ""


def decide_expansion(
    wanted: str,
    claimed: str | None,
    storage_class: str | None,
    allows: bool,
    *,
    field: str,
    volume: str,
) -> ExpansionPlan:
    """What to do with a volume of size ``claimed`` when ``field`` of the spec asks for ``wanted``."""
    if claimed is None or not smaller(claimed, wanted):
        return ExpansionPlan(Expansion.NONE, claimed or wanted)
    if not allows:
        where = f"StorageClass {storage_class}" if storage_class else "the claim's StorageClass"
        return ExpansionPlan(
            Expansion.NOT_EXPANDABLE,
            claimed,
            f"{field} asks for {wanted} but the volume has {claimed} and {where} does not "
            "allow volume expansion (allowVolumeExpansion: true)",
        )
    return ExpansionPlan(Expansion.EXPAND, wanted, f"growing the {volume} from {claimed} to {wanted}")


class Reader(Protocol):
    """What :func:`expansion_allowed` reads through (an ``operator_core.kube.Kube``): named by shape, so that
    the pure ``resources`` rooms, which build the claim patches here, stay clear of the API adapter."""

    async def get(
        self, api_version: str, kind: str, name: str, namespace: str | None = None
    ) -> Mapping[str, Any] | None: ...


async def expansion_allowed(kube: Reader, class_name: str | None) -> bool:
    """Whether StorageClass ``class_name`` says ``allowVolumeExpansion: true`` (no class, or one that is
    not there, does not)."""
    if not class_name:
        return False
    storage_class = await kube.get("storage.k8s.io/v1", "StorageClass", class_name)
    return bool((storage_class or {}).get("allowVolumeExpansion"))


def requested_size(claim_spec: Mapping[str, Any] | None) -> str | None:
    """``resources.requests.storage`` of a claim's (or a claim template's) spec."""
    return (((claim_spec or {}).get("resources") or {}).get("requests") or {}).get("storage")


def claim_template_size(statefulset: Mapping[str, Any] | None) -> str | None:
    """The size in a live StatefulSet's (first) claim template; None without a StatefulSet or template."""
    templates = ((statefulset or {}).get("spec") or {}).get("volumeClaimTemplates") or []
    return requested_size(templates[0].get("spec")) if templates else None


def claim_expansion(name: str, namespace: str, size: str) -> Manifest:
    """The server-side apply that asks a claim for ``size``, and nothing else.

    The claim is made by the StatefulSet's volumeClaimTemplates, not by the operator, so the patch
    names only the one field the operator owns on it.
    """
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"resources": {"requests": {"storage": size}}},
    }
