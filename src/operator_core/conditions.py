"""Status conditions: their shape, and pure functions to read, set and summarise them.

The shape is Kubernetes' ``metav1.Condition``; a kind whose conditions carry more (Cluster API's
severity) says so with its :class:`ConditionShape`. Setters never touch the API:
a controller computes the new list, then writes status once, from a diff.
``lastTransitionTime`` changes only when ``status`` flips, and lists are kept
in a fixed order (``Ready`` first, then by type) so that an unchanged
reconcile produces an identical status and therefore no write.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from pydantic import Field

from operator_core.apimodel import ApiModel
from operator_core.clock import utcnow

__all__ = [
    "METAV1",
    "READY",
    "Condition",
    "ConditionShape",
    "ConditionStatus",
    "condition_of",
    "find",
    "is_true",
    "reports_true",
    "set_condition",
    "summarize_ready",
]

READY = "Ready"
ConditionStatus = Literal["True", "False", "Unknown"]


class Condition(ApiModel):
    """One aspect of the object's current state, as in metav1.Condition."""

    type: str = Field(
        max_length=316,
        pattern=r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$",
    )
    """Type of condition in CamelCase, such as Ready."""
    status: ConditionStatus
    """Status of the condition: True, False or Unknown."""
    reason: str = Field(min_length=1, max_length=1024, pattern=r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")
    """A CamelCase word for the last transition, for machines."""
    message: str = Field(default="", max_length=32768)
    """A human-readable explanation of the last transition."""
    observed_generation: int | None = Field(default=None, ge=0)
    """The .metadata.generation that the condition was set from."""
    last_transition_time: datetime
    """When the status last changed from one value to another."""


_WIRE_FIELDS = frozenset(field.alias or name for name, field in Condition.model_fields.items())


@dataclass(frozen=True)
class ConditionShape:
    """How one kind writes ``status.conditions``: metav1.Condition's fields, and what ``added`` gives
    each (Cluster API's severity). Read back, the added fields are dropped (they are derived again),
    and so is an entry without a reason (Cluster API allows one on a True condition)."""

    added: Callable[[Condition], Mapping[str, Any]] | None = None

    def read(self, obj: Mapping[str, Any]) -> list[Condition]:
        """The conditions in ``obj``'s status."""
        return [
            Condition.model_validate({key: value for key, value in entry.items() if key in _WIRE_FIELDS})
            for entry in (obj.get("status") or {}).get("conditions") or []
            if entry.get("reason")
        ]

    def write(self, conditions: Iterable[Condition]) -> list[dict[str, Any]]:
        """``conditions`` as the kind's status holds them."""
        return [{**c.to_wire(), **(self.added(c) if self.added is not None else {})} for c in conditions]


METAV1 = ConditionShape()
"""metav1.Condition's shape, nothing added: every kind's unless it says otherwise."""


def find(conditions: Iterable[Condition], condition_type: str) -> Condition | None:
    """The condition of that type, or None."""
    return next((c for c in conditions if c.type == condition_type), None)


def is_true(conditions: Iterable[Condition], condition_type: str) -> bool:
    found = find(conditions, condition_type)
    return found is not None and found.status == "True"


def condition_of(obj: Mapping[str, Any], condition_type: str = READY) -> Mapping[str, Any] | None:
    """That condition of an object read from the API, as it is on the wire; None when it has none."""
    conditions = (obj.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c.get("type") == condition_type), None)


def reports_true(obj: Mapping[str, Any], condition_type: str = READY) -> bool:
    """Whether an object read from the API (a pod, say) has that condition True in its status."""
    return (condition_of(obj, condition_type) or {}).get("status") == "True"


def _order(condition: Condition) -> tuple[int, str]:
    return (0 if condition.type == READY else 1, condition.type)


def set_condition(
    conditions: Sequence[Condition],
    condition_type: str,
    status: ConditionStatus,
    reason: str,
    message: str = "",
    *,
    observed_generation: int | None = None,
    now: datetime | None = None,
) -> list[Condition]:
    """A new list with that condition set; the transition time moves only when the status flips."""
    previous = find(conditions, condition_type)
    if previous is not None and previous.status == status:
        transition = previous.last_transition_time
    else:
        transition = now or utcnow()
    updated = Condition(
        type=condition_type,
        status=status,
        reason=reason,
        message=message,
        observed_generation=observed_generation,
        last_transition_time=transition,
    )
    rest = [c for c in conditions if c.type != condition_type]
    return sorted([*rest, updated], key=_order)


def summarize_ready(
    conditions: Sequence[Condition],
    required: Sequence[str],
    *,
    ready_reason: str = "AllConditionsTrue",
    ready_message: str = "",
) -> tuple[ConditionStatus, str, str]:
    """Ready's (status, reason, message) from the required conditions.

    The first required condition that is not True decides: a missing one makes
    Ready Unknown (it was not observed), a False one makes Ready False with that
    condition's reason, so a reader sees why without opening the others.
    """
    for condition_type in required:
        found = find(conditions, condition_type)
        if found is None:
            return "Unknown", "NotObserved", f"{condition_type} has not been observed yet"
        if found.status != "True":
            return found.status, found.reason, found.message or f"{condition_type} is {found.status}"
    return "True", ready_reason, ready_message
