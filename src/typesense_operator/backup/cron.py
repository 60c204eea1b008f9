"""Five-field cron expressions (as a CronJob's schedule, in UTC) and the next time one fires. Pure.

The API server only checks an expression's shape (CEL); this parses it for real, so a schedule such
as ``61 * * * *`` is reported with its reason instead of never firing. Vixie cron's rules: ``*``,
lists, ranges, steps, month and weekday names, 0 or 7 for Sunday, and a day that matches when either
its day of month or its weekday does (when both are restricted).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

__all__ = ["CronError", "CronSchedule", "parse_cron"]

_MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_MONTH_NAMES = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
_MONTHS = {name: n for n, name in enumerate(_MONTH_NAMES, 1)}
_WEEKDAYS = {name: n for n, name in enumerate(["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"])}
# A valid expression fires within a few years (February 29th comes every four); one that finds no time
# in eight never fires, such as "0 0 30 2 *".
_SEARCH_LIMIT = timedelta(days=366 * 8)


class CronError(ValueError):
    """An expression that is not a valid five-field cron schedule; the message says which field."""


@dataclass(frozen=True)
class CronSchedule:
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]
    """0 is Sunday (7 is read as 0)."""
    days_restricted: bool
    weekdays_restricted: bool

    def _day_matches(self, moment: datetime) -> bool:
        day = moment.day in self.days
        weekday = (moment.isoweekday() % 7) in self.weekdays
        if self.days_restricted and self.weekdays_restricted:
            return day or weekday
        return day and weekday

    def next_after(self, moment: datetime) -> datetime:
        """The first time after ``moment`` (to the minute) that the schedule fires."""
        candidate = moment.replace(second=0, microsecond=0) + timedelta(minutes=1)
        limit = candidate + _SEARCH_LIMIT
        while candidate < limit:
            if candidate.month not in self.months:
                first = candidate.replace(day=1, hour=0, minute=0)
                candidate = (first + timedelta(days=32)).replace(day=1)  # the first of the next month
            elif not self._day_matches(candidate):
                candidate = (candidate + timedelta(days=1)).replace(hour=0, minute=0)
            elif candidate.hour not in self.hours:
                candidate = (candidate + timedelta(hours=1)).replace(minute=0)
            elif candidate.minute not in self.minutes:
                candidate += timedelta(minutes=1)
            else:
                return candidate
        raise CronError("the schedule never fires (a day that no month has)")


def _value(text: str, names: dict[str, int], field: str) -> int:
    upper = text.upper()
    if upper in names:
        return names[upper]
    if not text.isdigit():
        raise CronError(f"{field}: {text!r} is not a number{' or a name' if names else ''}")
    return int(text)


def _field(text: str, field: str, low: int, high: int, names: dict[str, int] | None = None) -> frozenset[int]:
    values: set[int] = set()
    for part in text.split(","):
        if not part:
            raise CronError(f"{field}: an empty item in {text!r}")
        span, _, step_text = part.partition("/")
        step = 1
        if step_text:
            if not step_text.isdigit() or int(step_text) == 0:
                raise CronError(f"{field}: the step {step_text!r} is not a positive number")
            step = int(step_text)
        if span == "*":
            first, last = low, high
        elif "-" in span:
            start, _, end = span.partition("-")
            first, last = _value(start, names or {}, field), _value(end, names or {}, field)
        else:
            first = _value(span, names or {}, field)
            last = high if step_text else first
        for bound in (first, last):
            if not low <= bound <= high:
                raise CronError(f"{field}: {bound} is outside {low}-{high}")
        if first > last:
            raise CronError(f"{field}: the range {span!r} runs backwards")
        values.update(range(first, last + 1, step))
    return frozenset(values)


def parse_cron(expression: str) -> CronSchedule:
    """The schedule ``expression`` (five fields, or a macro such as ``@daily``) stands for."""
    text = _MACROS.get(expression.strip(), expression.strip())
    fields = text.split()
    if len(fields) != 5:
        raise CronError(f"{expression!r} has {len(fields)} fields, not 5 (minute hour day month weekday)")
    minute, hour, day, month, weekday = fields
    weekdays = _field(weekday, "weekday", 0, 7, _WEEKDAYS)
    return CronSchedule(
        minutes=_field(minute, "minute", 0, 59),
        hours=_field(hour, "hour", 0, 23),
        days=_field(day, "day of month", 1, 31),
        months=_field(month, "month", 1, 12, _MONTHS),
        weekdays=frozenset(d % 7 for d in weekdays),
        days_restricted=not day.startswith("*"),
        weekdays_restricted=not weekday.startswith("*"),
    )
