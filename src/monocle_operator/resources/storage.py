"""Whether, and to what, the Elasticsearch volume should grow: a pure decision over what was observed,
and the claim patch that grows it."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from enum import Enum

from monocle_operator.resources.model import Instance
from operator_core.children import Manifest
from operator_core.quantity import parse_quantity

__all__ = ["Expansion", "ExpansionPlan", "build_claim_expansion", "decide_expansion"]


def _bytes(size: str) -> Decimal:
    value = parse_quantity(size)
    if value is None:
        raise ValueError(f"not a Kubernetes quantity: {size!r}")
    return value


class Expansion(Enum):
    NONE = "none"
    """The claim already has the size asked for (or more), or does not exist yet."""
    EXPAND = "expand"
    """Ask the claim for the new size."""
    NOT_EXPANDABLE = "not-expandable"
    """A larger size was asked for but the StorageClass does not allow expansion."""


@dataclass(frozen=True)
class ExpansionPlan:
    action: Expansion
    size: str
    message: str = ""


def decide_expansion(
    wanted: str, claimed: str | None, storage_class: str | None, allows: bool
) -> ExpansionPlan:
    """What to do with the data claim, from the spec size, the claim's request and its class."""
    if claimed is None or _bytes(wanted) <= _bytes(claimed):
        return ExpansionPlan(Expansion.NONE, claimed or wanted)
    if not allows:
        where = f"StorageClass {storage_class}" if storage_class else "the claim's StorageClass"
        return ExpansionPlan(
            Expansion.NOT_EXPANDABLE,
            claimed,
            f"elastic.storageSize asks for {wanted} but the volume has {claimed} and {where} does not "
            "allow volume expansion (allowVolumeExpansion: true)",
        )
    return ExpansionPlan(
        Expansion.EXPAND, wanted, f"growing the Elasticsearch volume from {claimed} to {wanted}"
    )


def build_claim_expansion(instance: Instance, size: str) -> Manifest:
    """The server-side apply that asks the Elasticsearch data claim for ``size``, and nothing else.

    The claim is made by the StatefulSet's volumeClaimTemplates, not by us, so the patch names only
    the one field this operator owns on it.
    """
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": instance.elastic_claim_name, "namespace": instance.namespace},
        "spec": {"resources": {"requests": {"storage": size}}},
    }
