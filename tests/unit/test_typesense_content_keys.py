"""A TypesenseApiKey's decisions: when the Secret gets another value, and which Typesense key is its."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from typesense_operator.api.content import TypesenseApiKeySpec
from typesense_operator.content.keys import KeyRecord, key_body, key_hash, matching_key, needs_new_value

SPEC = TypesenseApiKeySpec.model_validate(
    {
        "cluster": {"name": "search"},
        "actions": ["documents:search"],
        "collections": ["books"],
        "secret": {"name": "search-key"},
    }
)
H = key_hash(SPEC, None)
CURRENT = KeyRecord(key_id=3, value_prefix="abcd", key_hash=H)


@pytest.mark.parametrize(
    ("record", "desired", "in_secret", "expected"),
    [
        pytest.param(KeyRecord(None, None, None), H, None, True, id="new-key"),
        pytest.param(CURRENT, H, "abcdefgh", False, id="in-sync"),
        pytest.param(CURRENT, "other", "abcdefgh", True, id="scope-changed-rotates"),
        pytest.param(CURRENT, "other", "wxyz1234", False, id="rotation-half-done-keeps-the-new-value"),
        pytest.param(CURRENT, H, None, True, id="secret-deleted"),
    ],
)
def test_when_the_secret_gets_another_value(
    record: KeyRecord, desired: str, in_secret: str | None, expected: bool
) -> None:
    assert needs_new_value(record, desired, in_secret, None, sourced=False) is expected


def test_a_sourced_value_follows_its_source_only() -> None:
    assert needs_new_value(CURRENT, H, "abcdefgh", "newvalue", sourced=True)
    assert not needs_new_value(CURRENT, "other", "abcdefgh", "abcdefgh", sourced=True)


def test_the_hash_changes_with_scope_expiry_and_the_rotate_annotation() -> None:
    assert key_hash(SPEC, "2026-11-28") != H
    assert key_hash(SPEC.model_copy(update={"actions": ["documents:*"]}), None) != H
    expiring = SPEC.model_copy(update={"expires_at": datetime(2027, 1, 1, tzinfo=UTC)})
    assert key_hash(expiring, None) != H
    assert key_body(expiring, "v" * 48)["expires_at"] == 1798761600


def listed(**key: Any) -> dict[str, Any]:
    return {
        "id": 9,
        "value_prefix": "abcd",
        "actions": ["documents:search"],
        "collections": ["books"],
        "description": "",
        **key,
    }


@pytest.mark.parametrize(
    ("keys", "expected"),
    [
        ([listed()], 9),
        ([listed(value_prefix="zzzz")], None),
        ([listed(actions=["documents:*"])], None),
        ([listed(description="by hand")], None),
        ([listed(value_prefix="zzzz", id=1), listed(id=2)], 2),
    ],
)
def test_a_key_made_before_a_crash_is_found_by_prefix_and_scope(
    keys: list[dict[str, Any]], expected: int | None
) -> None:
    assert matching_key(keys, "abcdefgh", key_body(SPEC, "abcdefgh")) == expected
