"""Registered secret values never leave through logs or messages."""

from __future__ import annotations

import logging

import pytest

from operator_core.secrets import REDACTED, ScrubbingFilter, register_secret, scrub


def test_registered_values_are_scrubbed() -> None:
    register_secret("s3cr3t-api-key-value")
    assert scrub("key=s3cr3t-api-key-value;") == f"key={REDACTED};"


def test_bytes_and_short_values() -> None:
    register_secret(b"bytes-secret-123")
    register_secret("ab")  # too short to redact safely
    assert scrub("bytes-secret-123 ab") == f"{REDACTED} ab"


def test_log_records_are_scrubbed(caplog: pytest.LogCaptureFixture) -> None:
    register_secret("log-secret-4567")
    logger = logging.getLogger("test.secrets")
    caplog.handler.addFilter(ScrubbingFilter())
    with caplog.at_level(logging.INFO, logger="test.secrets"):
        logger.info("connecting with %s", "log-secret-4567")
    assert "log-secret-4567" not in caplog.text
    assert REDACTED in caplog.text
