"""How an operator process logs: plain text for a terminal, or one JSON object per line for a collector.

Each record says which object it is about when it is about one: inside a
reconcile (:func:`about_object`, set by the shared loop for everything the
reconcile logs, its HTTP clients' lines too). The JSON fields are ``time``, ``level``,
``logger``, ``message``, ``kind``, ``namespace``, ``object`` and, after a
failure, ``exception``. Both formats scrub what they write with
:mod:`operator_core.secrets` (a traceback's text too), so a Secret value never
reaches a line in either.
"""

from __future__ import annotations

import contextvars
import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any, Literal, get_args

from operator_core.secrets import install_log_scrubbing, scrub

__all__ = [
    "LOG_FORMATS",
    "LOG_LEVELS",
    "JsonFormatter",
    "LogFormat",
    "LogLevel",
    "about_object",
    "configure_logging",
]

LogFormat = Literal["text", "json"]
LogLevel = Literal["debug", "info", "warning", "error"]
LOG_FORMATS: tuple[str, ...] = get_args(LogFormat)
LOG_LEVELS: tuple[str, ...] = get_args(LogLevel)

_OBJECT: contextvars.ContextVar[tuple[str, str, str] | None] = contextvars.ContextVar(
    "operator_core_log_object", default=None
)


@contextmanager
def about_object(kind: str, namespace: str, name: str) -> Iterator[None]:
    """Every record logged inside (by this task and the tasks it starts) is about this object."""
    token = _OBJECT.set((kind, namespace, name))
    try:
        yield
    finally:
        _OBJECT.reset(token)


class JsonFormatter(logging.Formatter):
    """One JSON object per record, with the object it is about as fields of their own."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": scrub(record.getMessage()),
        }
        about = _OBJECT.get()
        if about is not None:
            entry["kind"], entry["namespace"], entry["object"] = about
        if record.exc_info:
            # The traceback's own text may quote a value: scrub it too.
            entry["exception"] = scrub(self.formatException(record.exc_info))
        return json.dumps(entry, ensure_ascii=False)


class _TextFormatter(logging.Formatter):
    """The plain format, with ``[namespace/name]`` after the logger when the record is about an object."""

    def format(self, record: logging.LogRecord) -> str:
        about = _OBJECT.get()
        record.about = f" [{about[1]}/{about[2]}]" if about is not None else ""
        # The whole line, a traceback's text included, which may quote a value.
        return scrub(super().format(record))


_CHATTY_LIBRARIES = ("celpy",)
"""Libraries whose debug records say how they work inside, not what the operator decided."""


def configure_logging(level: LogLevel = "info", log_format: LogFormat = "text") -> None:
    """Send every record to stderr in ``log_format`` at ``level``, with Secret values scrubbed."""
    handler = logging.StreamHandler()
    if log_format == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(_TextFormatter("%(asctime)s %(levelname)s %(name)s%(about)s: %(message)s"))
    root = logging.getLogger()
    for existing in list(root.handlers):
        root.removeHandler(existing)
    root.addHandler(handler)
    root.setLevel(level.upper())
    for chatty in _CHATTY_LIBRARIES:
        # Their debug is their own internals (celpy writes some twenty lines per CEL evaluation), which
        # would bury the operator's own debug lines: at most their information.
        logging.getLogger(chatty).setLevel(max(root.level, logging.INFO))
    install_log_scrubbing(root)
