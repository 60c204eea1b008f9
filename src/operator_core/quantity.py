"""Kubernetes resource quantities as numbers, so that ``0.5`` and ``500m`` compare equal. Pure.

The API server stores quantities in canonical form (``cpu: 0.5`` comes back as
``500m``, ``1024Mi`` as ``1Gi``), so a manifest written the way a user wrote it
never equals the live object textually, and a "did anything change" check that
compared text would write on every reconcile.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

__all__ = ["BINARY_SUFFIXES", "QUANTITY_MAPS", "QUANTITY_VALUES", "parse_quantity", "same_quantity"]

QUANTITY_MAPS = frozenset({"limits", "requests", "capacity", "allocatable", "hard"})
"""Maps whose values are quantities (resources, storage, quotas)."""
QUANTITY_VALUES = frozenset({"sizeLimit"})
"""Keys whose own value is a quantity (an emptyDir's size limit)."""

BINARY_SUFFIXES = {
    "Ki": Decimal(2) ** 10,
    "Mi": Decimal(2) ** 20,
    "Gi": Decimal(2) ** 30,
    "Ti": Decimal(2) ** 40,
    "Pi": Decimal(2) ** 50,
    "Ei": Decimal(2) ** 60,
}
"""The power-of-two suffixes and their value in bytes, smallest first."""
_SUFFIXES = {
    **BINARY_SUFFIXES,
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
}
_QUANTITY = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+))(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]?))$")


def parse_quantity(value: object) -> Decimal | None:
    """The quantity's value, or None when ``value`` is not a quantity."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return Decimal(str(value))
    if not isinstance(value, str):
        return None
    match = _QUANTITY.match(value.strip())
    if match is None:
        return None
    number, exponent, suffix = match.groups()
    try:
        if exponent:
            return Decimal(number + exponent)
        return Decimal(number) * _SUFFIXES[suffix or ""]
    except InvalidOperation:
        return None


def same_quantity(desired: object, live: object) -> bool:
    """Whether both are quantities of the same value."""
    wanted, found = parse_quantity(desired), parse_quantity(live)
    return wanted is not None and found is not None and wanted == found
