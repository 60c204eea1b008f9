"""Whether, and to what, the Elasticsearch volume should grow: a pure decision over what was observed."""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal
from enum import Enum

__all__ = ["Expansion", "ExpansionPlan", "decide_expansion", "parse_quantity"]

_SUFFIXES = {
    "": 1,
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "P": 10**15,
    "E": 10**18,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "Pi": 2**50,
    "Ei": 2**60,
}
_QUANTITY = re.compile(r"^([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:([eE][-+]?[0-9]+)|([a-zA-Z]*))$")


def parse_quantity(text: str) -> Decimal:
    """A Kubernetes quantity in its base unit (bytes for storage)."""
    match = _QUANTITY.match(text.strip())
    if match is None or (match.group(3) or "") not in _SUFFIXES:
        raise ValueError(f"not a Kubernetes quantity: {text!r}")
    number, exponent, suffix = match.groups()
    if exponent:
        return Decimal(number + exponent)
    return Decimal(number) * _SUFFIXES[suffix or ""]


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
    if claimed is None or parse_quantity(wanted) <= parse_quantity(claimed):
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
