"""What a backup decides, from what was observed: which node to snapshot, which of a schedule's
backups to let go, and whether every node of a restored cluster serves what was restored. Pure, and
table-tested (tests/unit/test_backup_decisions.py)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from typesense_operator.quorum.model import NodeProbe

__all__ = [
    "BackupView",
    "NodeChoice",
    "NotBackedUp",
    "choose_node",
    "collections_held",
    "not_serving_the_restore",
    "parse_age",
    "to_prune",
]


@dataclass(frozen=True)
class NodeChoice:
    index: int
    why: str
    """For the Event and the log: "a caught-up follower", "the only node", ..."""


@dataclass(frozen=True)
class NotBackedUp:
    """The backup is refused: its condition's reason and message."""

    reason: str
    message: str


def _serving(probe: NodeProbe) -> bool:
    return probe.reachable and bool(probe.health_ok) and probe.committed_index is not None


def choose_node(phase: str | None, probes: Sequence[NodeProbe]) -> NodeChoice | NotBackedUp:
    """A caught-up follower, to keep the load of a snapshot off the leader; the leader only when no
    follower is caught up (or it is the only node). A cluster whose quorum is not ready is not backed
    up: its data may be behind what it acknowledged."""
    if phase != "QuorumReady":
        return NotBackedUp(
            "ClusterNotReady",
            f"the cluster is {phase or 'not observed yet'}, not QuorumReady: only a cluster whose quorum "
            "is ready is backed up",
        )
    leaders = [p for p in probes if p.state == "LEADER" and _serving(p)]
    if len(leaders) != 1:
        answered = f"{len(leaders)} healthy leaders answered, not one: no snapshot is taken"
        return NotBackedUp("NoLeader", answered)
    (leader,) = leaders
    assert leader.committed_index is not None  # _serving
    caught_up = [
        p
        for p in probes
        if p.state == "FOLLOWER" and _serving(p) and p.committed_index is not None
        and p.committed_index >= leader.committed_index
    ]  # fmt: skip
    if caught_up:
        return NodeChoice(min(p.index for p in caught_up), "a caught-up follower")
    if len(probes) == 1:
        return NodeChoice(leader.index, "the only node")
    return NodeChoice(leader.index, "the leader: no follower had caught up with it")


@dataclass(frozen=True)
class BackupView:
    """One of a schedule's backups, as the pruning sees it."""

    name: str
    phase: str | None
    created_at: datetime
    completed_at: datetime | None = None


_AGE = re.compile(r"^([0-9]+)(d|h|m|s)$")
_UNITS = {"d": "days", "h": "hours", "m": "minutes", "s": "seconds"}


def parse_age(text: str) -> timedelta:
    """``30d``, ``720h``, ``90m`` or ``3600s`` as a duration (the API server checked the shape)."""
    match = _AGE.match(text)
    if match is None:
        raise ValueError(f"{text!r} is not a number of d, h, m or s")
    return timedelta(**{_UNITS[match[2]]: int(match[1])})


def to_prune(
    backups: Sequence[BackupView], keep: int | None, max_age: timedelta | None, now: datetime
) -> list[str]:
    """The backups a schedule lets go, oldest first: completed ones beyond the newest ``keep`` or
    older than ``max_age``, and failed ones older than the newest completed (nothing would restore
    them). The newest completed backup is always kept, so that a schedule whose backups start to fail
    never ends with none; one still pending or running is never touched."""
    completed = sorted(
        (b for b in backups if b.phase == "Completed" and b.completed_at is not None),
        key=lambda b: (b.completed_at, b.name),
        reverse=True,
    )
    going: dict[str, datetime] = {}
    for position, backup in enumerate(completed):
        assert backup.completed_at is not None
        if position == 0:
            continue
        beyond_keep = keep is not None and position >= keep
        too_old = max_age is not None and now - backup.completed_at > max_age
        if beyond_keep or too_old:
            going[backup.name] = backup.created_at
    if completed:
        newest = completed[0].created_at
        for backup in backups:
            if backup.phase == "Failed" and backup.created_at < newest:
                going[backup.name] = backup.created_at
    return [name for name, _ in sorted(going.items(), key=lambda item: (item[1], item[0]))]


def collections_held(code: int, body: bytes) -> dict[str, int] | None:
    """What a node's ``GET /collections`` says it serves: each collection's documents; None when it
    serves nothing it could say (a node still catching up answers 503)."""
    if code != 200:
        return None
    try:
        listed = json.loads(body)
    except ValueError:
        return None
    if not isinstance(listed, list):
        return None
    return {
        str(found["name"]): int(found.get("num_documents") or 0)
        for found in listed
        if isinstance(found, dict) and "name" in found
    }


def not_serving_the_restore(held: Mapping[str, dict[str, int] | None], leader: str) -> list[str]:
    """The nodes that do not serve what the restored leader serves yet, each with what it lacks:
    empty once every node lists the leader's collections with as many documents. Ready after a
    restore waits for it, so that a client reading through the Service right after Ready finds the
    restored collections on whichever node it reaches."""
    wanted = held.get(leader)
    if wanted is None:
        return [f"the leader {leader} does not list its collections yet"]
    notes = []
    for pod, collections in sorted(held.items()):
        if pod == leader:
            continue
        if collections is None:
            notes.append(f"{pod} does not serve yet (catching up)")
            continue
        missing = sorted(set(wanted) - set(collections))
        short = sorted(name for name in wanted if name in collections and collections[name] < wanted[name])
        if missing:
            notes.append(
                f"{pod} lacks {len(missing)} of the {len(wanted)} restored collections ({', '.join(missing)})"
            )
        elif short:
            name = short[0]
            notes.append(f"{pod} holds {collections[name]} of the {wanted[name]} documents of {name}")
    return notes
