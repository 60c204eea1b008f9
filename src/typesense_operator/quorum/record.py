"""The quorum record in and out of the cluster's status (``status.quorum``). Pure."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from typesense_operator.quorum.decide import Action, Plan, QuorumRecord

__all__ = ["record_from_status", "status_from_plan"]


def _time(value: Any) -> datetime | None:
    if isinstance(value, datetime) or value is None:
        return value
    return datetime.fromisoformat(str(value).replace("Z", "+00:00"))


def record_from_status(status: dict[str, Any] | None) -> QuorumRecord:
    quorum = (status or {}).get("quorum") or {}
    return QuorumRecord(
        members=tuple(quorum.get("members") or ()),
        unhealthy_since=_time(quorum.get("unhealthySince")),
        loading_since=_time(quorum.get("loadingSince")),
        survivor=quorum.get("survivor"),
        downgraded_at=_time(quorum.get("downgradedAt")),
        survivor_restarted=bool(quorum.get("survivorRestarted")),
    )


def _wire_time(value: datetime | None) -> str | None:
    return value.strftime("%Y-%m-%dT%H:%M:%SZ") if value else None


def status_from_plan(plan: Plan, previous: dict[str, Any] | None) -> dict[str, Any]:
    """``status.quorum`` after ``plan``, unset fields left out: an unchanged plan gives an equal dict."""
    record = plan.record
    last_action = plan.action.value if plan.action is not Action.NONE else (previous or {}).get("lastAction")
    fields: dict[str, Any] = {
        "state": plan.state.value,
        "members": list(record.members) or None,
        "unhealthySince": _wire_time(record.unhealthy_since),
        "loadingSince": _wire_time(record.loading_since),
        "survivor": record.survivor,
        "downgradedAt": _wire_time(record.downgraded_at),
        "survivorRestarted": record.survivor_restarted or None,
        "lastAction": last_action,
    }
    return {key: value for key, value in fields.items() if value is not None}
