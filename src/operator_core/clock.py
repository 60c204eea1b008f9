"""Time as the API server writes and reads it: now to the second, status fields in RFC 3339, and
MicroTime (a Lease's renewals, an Event's eventTime); pure.

Status timestamps are kept to the second so that an unchanged reconcile writes an identical status (and
therefore nothing); a MicroTime always carries six fraction digits, as the API server's own do.
"""

from __future__ import annotations

from datetime import UTC, datetime

__all__ = ["micro_time", "parse_wire_time", "utcnow", "wire_time"]


def utcnow() -> datetime:
    """Now, in UTC, to the second (what the API server stores)."""
    return datetime.now(UTC).replace(microsecond=0)


def wire_time(moment: datetime) -> str:
    """``moment`` as a status field writes it: RFC 3339 in UTC, to the second (``2026-11-26T02:15:30Z``)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_wire_time(text: str | None) -> datetime | None:
    """A time the API server wrote (``2026-11-26T03:00:00Z``, RFC 3339), or None for none."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")) if text else None


def micro_time(moment: datetime | float | None = None) -> str:
    """``moment`` (a datetime, or seconds since the epoch; now when None) as a MicroTime: RFC 3339 in UTC
    with six fraction digits, always."""
    if moment is None:
        moment = datetime.now(UTC)
    elif not isinstance(moment, datetime):
        moment = datetime.fromtimestamp(moment, UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
