"""A TypesenseApiKey's decisions, pure: when its value changes, which Typesense key holds the value in
its Secret, and when the previous key goes (table-tested in tests/unit/test_typesense_content_keys.py).

The Secret is where the value lives: it is written first, and the key in Typesense is made from it
(Typesense takes a key's value on creation). An operator that dies between the two finds the value in
the Secret and a key whose listed prefix and scope match it, or makes the key again: no key is left
in Typesense that nothing knows of, and none is made twice.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from typesense_operator.api.content import TypesenseApiKeySpec

__all__ = ["PREFIX_LENGTH", "KeyRecord", "key_body", "key_hash", "matching_key", "needs_new_value"]

PREFIX_LENGTH = 4
"""How many characters of a key's value typesense-server 0.24.1 lists (value_prefix)."""


def key_hash(spec: TypesenseApiKeySpec, rotate: str | None) -> str:
    """What the key is made with, and the rotate annotation: any change of it rotates the key."""
    made_with = {
        "actions": spec.actions,
        "collections": spec.collections,
        "description": spec.description,
        "expiresAt": int(spec.expires_at.timestamp()) if spec.expires_at else None,
        "rotate": rotate,
        "valueFrom": spec.value_from.model_dump() if spec.value_from else None,
    }
    return hashlib.sha256(json.dumps(made_with, sort_keys=True).encode()).hexdigest()[:16]


def key_body(spec: TypesenseApiKeySpec, value: str) -> dict[str, Any]:
    """The body of ``POST /keys``, the value included."""
    body: dict[str, Any] = {
        "actions": spec.actions,
        "collections": spec.collections,
        "description": spec.description or "",
        "value": value,
    }
    if spec.expires_at is not None:
        body["expires_at"] = int(spec.expires_at.timestamp())
    return body


@dataclass(frozen=True)
class KeyRecord:
    """What the status says of the key the operator made last."""

    key_id: int | None
    value_prefix: str | None
    key_hash: str | None
    previous_key_id: int | None = None
    previous_key_deleted_after: datetime | None = None


def needs_new_value(
    record: KeyRecord, desired_hash: str, in_secret: str | None, from_source: str | None, sourced: bool
) -> bool:
    """Whether the Secret needs another value now: it has none; the value source holds another; or
    what the key is made with changed while the Secret still holds the current key's value (a rotation
    half done, the Secret written and the key not, needs no second value)."""
    if sourced:
        return from_source is not None and from_source != in_secret
    if in_secret is None:
        return True
    holds_current = record.value_prefix is not None and in_secret.startswith(record.value_prefix)
    return holds_current and record.key_hash != desired_hash


def matching_key(listed: Sequence[Mapping[str, Any]], value: str, body: Mapping[str, Any]) -> int | None:
    """The id of a key in Typesense's list (``GET /keys``) made from ``value`` with this scope: same
    prefix, actions, collections and description; None when there is none."""
    for key in listed:
        if (
            key.get("value_prefix") == value[:PREFIX_LENGTH]
            and key.get("actions") == body["actions"]
            and key.get("collections") == body["collections"]
            and (key.get("description") or "") == body["description"]
        ):
            return int(key["id"])
    return None
