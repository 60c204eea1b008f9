"""Keep Secret values out of logs, Events, status and exception text.

Code that reads a secret value registers it with :func:`register_secret`.
:func:`scrub` replaces every registered value in a text, and
:class:`ScrubbingFilter` does the same for every log record. The Kubernetes
adapter scrubs server messages before they become exceptions, and the Event
recorder scrubs notes, so one registration protects every exit.
"""

from __future__ import annotations

import logging
import threading

__all__ = ["REDACTED", "ScrubbingFilter", "install_log_scrubbing", "register_secret", "scrub"]

REDACTED = "[REDACTED]"
# Shorter values would redact ordinary words; real keys and passwords are longer.
_MIN_SECRET_LENGTH = 6

_lock = threading.Lock()
_secrets: set[str] = set()


def register_secret(value: str | bytes | None) -> None:
    """Remember a secret value so that :func:`scrub` hides it from now on."""
    if value is None:
        return
    text = value.decode(errors="replace") if isinstance(value, bytes) else value
    if len(text) >= _MIN_SECRET_LENGTH:
        with _lock:
            _secrets.add(text)


def scrub(text: str) -> str:
    """Return ``text`` with every registered secret value replaced by ``[REDACTED]``."""
    with _lock:
        values = sorted(_secrets, key=len, reverse=True)
    for value in values:
        if value in text:
            text = text.replace(value, REDACTED)
    return text


class ScrubbingFilter(logging.Filter):
    """A logging filter that scrubs the fully formatted message of each record."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = scrub(message)
        if cleaned != message:
            record.msg = cleaned
            record.args = None
        return True


def install_log_scrubbing(logger: logging.Logger | None = None) -> None:
    """Attach a :class:`ScrubbingFilter` to every handler of ``logger`` (the root logger by default)."""
    target = logger or logging.getLogger()
    for handler in target.handlers:
        if not any(isinstance(f, ScrubbingFilter) for f in handler.filters):
            handler.addFilter(ScrubbingFilter())
