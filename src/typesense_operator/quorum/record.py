"""The quorum record and the roll's bookkeeping in and out of the cluster's status (``status.quorum``,
``status.roll``). Pure."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from operator_core.clock import parse_wire_time, wire_time
from typesense_operator.quorum.model import Action, ClusterState, Plan, QuorumRecord
from typesense_operator.quorum.roll import RollAction, RollPlan

__all__ = [
    "record_from_status",
    "roll_status",
    "roll_under_way",
    "roll_waiting_since",
    "status_from_plan",
]


def _time(value: Any) -> datetime | None:
    if isinstance(value, datetime) or value is None:
        return value
    return parse_wire_time(str(value))


def record_from_status(status: dict[str, Any] | None) -> QuorumRecord:
    quorum = (status or {}).get("quorum") or {}
    return QuorumRecord(
        members=tuple(quorum.get("members") or ()),
        unhealthy_since=_time(quorum.get("unhealthySince")),
        loading_since=_time(quorum.get("loadingSince")),
        survivor=quorum.get("survivor"),
        downgraded_at=_time(quorum.get("downgradedAt")),
        survivor_restarted=bool(quorum.get("survivorRestarted")),
        held_back_restarted=bool(quorum.get("heldBackRestarted")),
        committed=_commit(quorum.get("committed")),
    )


def _committed_to_write(plan: Plan, previous: dict[str, Any]) -> dict[str, int] | None:
    """``status.quorum.committed`` to write: the plan's, or the one written before while the cluster is
    healthy and its leader's term unchanged. Under writes the committed index moves on every look;
    written each time, it would cost a status write per look. The operator keeps the latest in memory
    (controller/cluster/reconcile.py), and writes it once anything goes wrong, when it matters."""
    if plan.record.committed is None:
        found = previous.get("committed")
        return found if isinstance(found, dict) else None
    fresh = {"term": plan.record.committed[0], "index": plan.record.committed[1]}
    before = previous.get("committed")
    healthy = plan.state is ClusterState.OK and plan.action is Action.NONE
    if healthy and isinstance(before, dict) and before.get("term") == fresh["term"]:
        return before
    return fresh


def _commit(value: Any) -> tuple[int, int] | None:
    if not isinstance(value, dict) or value.get("term") is None or value.get("index") is None:
        return None
    return int(value["term"]), int(value["index"])


def _wire_time(value: datetime | None) -> str | None:
    return wire_time(value) if value else None


def status_from_plan(plan: Plan, previous: dict[str, Any] | None, now: datetime) -> dict[str, Any]:
    """``status.quorum`` after ``plan`` (decided at ``now``), unset fields left out: an unchanged plan
    gives an equal dict."""
    record = plan.record
    previous = previous or {}
    # Hold and NeedsIntervention are decided again on every look while they last: one episode, one
    # record (not a write per look).
    lasting = plan.action in (Action.HOLD, Action.NEEDS_INTERVENTION)
    acted = plan.action is not Action.NONE and not (
        lasting and previous.get("lastAction") == plan.action.value
    )
    fields: dict[str, Any] = {
        "state": plan.state.value,
        "members": list(record.members) or None,
        "unhealthySince": _wire_time(record.unhealthy_since),
        "loadingSince": _wire_time(record.loading_since),
        "survivor": record.survivor,
        "downgradedAt": _wire_time(record.downgraded_at),
        "survivorRestarted": record.survivor_restarted or None,
        "heldBackRestarted": record.held_back_restarted or None,
        "committed": _committed_to_write(plan, previous),
        "lastAction": plan.action.value if plan.action is not Action.NONE else previous.get("lastAction"),
        "lastActionAt": _wire_time(now) if acted else previous.get("lastActionAt"),
        "lastActionMessage": plan.message if acted else previous.get("lastActionMessage"),
        "graceEndsAt": _wire_time(plan.wait_ends_at),
        "thenAction": plan.then,
    }
    return {key: value for key, value in fields.items() if value is not None}


def roll_waiting_since(status: dict[str, Any] | None, revision: str) -> datetime | None:
    """Since when the roll to ``revision`` has waited for a restarted node (``status.roll``); None when
    it does not wait, or the status speaks of another revision."""
    roll = (status or {}).get("roll") or {}
    return _time(roll.get("waitingSince")) if roll.get("updateRevision") == revision else None


def roll_under_way(status: dict[str, Any] | None, revision: str) -> bool:
    """Whether ``status.roll`` says a roll to ``revision`` still has nodes to do."""
    roll = (status or {}).get("roll") or {}
    return roll.get("updateRevision") == revision and bool(roll.get("toDo"))


def roll_status(revision: str, step: RollPlan | None, waiting_since: datetime | None) -> dict[str, Any]:
    """``status.roll`` after ``step`` (None: nothing to roll), unset fields left out: a merge patch
    removes them, where a None would be written again on every reconcile."""
    if step is None or step.action is RollAction.DONE:
        return {"updateRevision": revision}
    fields: dict[str, Any] = {
        "updateRevision": revision,
        "done": list(step.done),
        "toDo": list(step.to_do),
        "next": step.node,
        "waitingSince": _wire_time(waiting_since),
    }
    return {key: value for key, value in fields.items() if value is not None}
