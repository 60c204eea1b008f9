"""Quiet writes: when server-side apply is skipped, and when it is not."""

from __future__ import annotations

from typing import Any

import pytest

from operator_core.manifests import (
    APPLIED_HASH_ANNOTATION,
    LEGACY_APPLIED_HASH_ANNOTATION,
    applied_hash,
    is_contained,
    needs_apply,
    with_applied_hash,
)
from operator_core.quantity import parse_quantity


def configmap(**data: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "c", "namespace": "n", "labels": {"app": "x"}},
        "data": dict(data),
    }


def live_from(desired: dict[str, Any]) -> dict[str, Any]:
    """What the API server would hold after applying ``desired``: ours plus server-set fields."""
    live = with_applied_hash(desired)
    live["metadata"] |= {"uid": "1", "resourceVersion": "7", "managedFields": []}
    return live


def test_contained_allows_extra_keys_in_live() -> None:
    assert is_contained({"a": 1, "b": {"c": 2}}, {"a": 1, "b": {"c": 2, "d": 3}, "e": 4})


def test_contained_requires_equal_lists_item_by_item() -> None:
    assert is_contained([{"a": 1}], [{"a": 1, "b": 2}])
    assert not is_contained([{"a": 1}], [{"a": 1}, {"a": 2}])
    assert not is_contained([{"a": 1}], [{"a": 2}])


def test_contained_does_not_confuse_bools_and_numbers() -> None:
    assert not is_contained(True, 1)
    assert not is_contained(0, False)
    assert is_contained(1, 1.0)


def test_missing_object_needs_apply() -> None:
    assert needs_apply(configmap(a="1"), None)


def test_unchanged_object_needs_no_apply() -> None:
    desired = configmap(a="1")
    assert not needs_apply(desired, live_from(desired))


def test_drift_needs_apply() -> None:
    desired = configmap(a="1")
    live = live_from(desired)
    live["data"]["a"] = "edited by someone"
    assert needs_apply(desired, live)


def test_dropped_field_needs_apply_so_the_server_removes_it() -> None:
    before = configmap(a="1", b="2")
    after = configmap(a="1")
    assert needs_apply(after, live_from(before))


def test_hash_ignores_its_own_annotation() -> None:
    desired = configmap(a="1")
    assert applied_hash(desired) == applied_hash(with_applied_hash(desired))
    assert APPLIED_HASH_ANNOTATION in with_applied_hash(desired)["metadata"]["annotations"]


def test_secret_hash_does_not_depend_on_values() -> None:
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "stringData": {"key": "one"}}
    other = {**secret, "stringData": {"key": "two"}}
    assert applied_hash(secret) == applied_hash(other)


def test_secret_string_data_is_compared_as_stored_base64() -> None:
    desired = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "s"},
        "stringData": {"key": "value1"},
    }
    live = with_applied_hash(desired)
    live.pop("stringData")
    live["data"] = {"key": "dmFsdWUx"}
    assert not needs_apply(desired, live)
    live["data"] = {"key": "b3RoZXI="}
    assert needs_apply(desired, live)


def test_merge_patch_nulls_dropped_keys_and_keeps_equal_ones() -> None:
    from operator_core.manifests import merge_patch

    current = {"a": 1, "b": {"c": 2, "d": 3}, "e": [1, 2]}
    assert merge_patch(current, current) == {}
    assert merge_patch(current, {"a": 1, "b": {"c": 2}, "e": [1]}) == {"b": {"d": None}, "e": [1]}
    assert merge_patch(current, {"b": {"c": 5, "d": 3}}) == {"a": None, "b": {"c": 5}, "e": None}


@pytest.mark.parametrize(
    ("written", "stored"),
    [
        (0.5, "500m"),
        ("0.5", "500m"),
        (1, "1"),
        ("1024Mi", "1Gi"),
        ("1e3", "1k"),
        ("2G", "2G"),
        (".5Gi", "512Mi"),
    ],
)
def test_quantities_compare_by_value_as_the_server_stores_them(written: object, stored: str) -> None:
    desired = {"spec": {"resources": {"limits": {"cpu": written}}, "volume": {"sizeLimit": written}}}
    live = {"spec": {"resources": {"limits": {"cpu": stored}}, "volume": {"sizeLimit": stored}}}
    assert is_contained(desired, live)


def test_a_changed_quantity_or_a_number_outside_quantities_still_counts() -> None:
    assert not is_contained({"limits": {"cpu": "1"}}, {"limits": {"cpu": "500m"}})
    assert not is_contained({"replicas": 1}, {"replicas": "1"})
    assert not is_contained({"env": [{"value": "0.5"}]}, {"env": [{"value": "500m"}]})


@pytest.mark.parametrize("text", ["", "abc", "1x", "Gi", "1.2.3", True, None, [1]])
def test_what_is_not_a_quantity_parses_to_none(text: object) -> None:
    assert parse_quantity(text) is None


def test_a_child_stamped_under_the_old_domain_is_current_until_it_changes() -> None:
    """An upgrade writes nothing: the hash an older version left under operator-suite.dev still counts."""
    desired = configmap(key="value")
    live = live_from(desired)
    annotations = live["metadata"]["annotations"]
    annotations[LEGACY_APPLIED_HASH_ANNOTATION] = annotations.pop(APPLIED_HASH_ANNOTATION)
    assert not needs_apply(desired, live)
    assert needs_apply(configmap(key="changed"), live)
    older = configmap(key="value")
    older["metadata"]["annotations"] = {LEGACY_APPLIED_HASH_ANNOTATION: "anything"}
    assert applied_hash(older) == applied_hash(desired), "neither key is part of the hash"
    stamped = with_applied_hash(configmap(key="changed"))["metadata"]["annotations"]
    assert set(stamped) == {APPLIED_HASH_ANNOTATION}, "a new apply stamps the one domain only"
