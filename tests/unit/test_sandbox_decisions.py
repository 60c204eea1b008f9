"""The sandbox's pure decisions: the StorageClasses its samples name, which the nodes must provide."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from operator_testkit.drivers.typesense_sandbox import SANDBOX
from operator_testkit.sandbox import storage_class_names, unknown_storage_classes

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("documents", "names"),
    [
        ([], set()),
        ([{"spec": {"storage": {"storageClassName": "gp2"}}}], {"gp2"}),
        ([{"spec": {"volumeClaimTemplates": [{"spec": {"storageClassName": "fast"}}]}}], {"fast"}),
        ([{"spec": {"storageClassName": ""}}, {"spec": {"storageClassName": None}}], set()),
        ([{"a": {"storageClassName": "x"}}, {"b": [{"storageClassName": "y"}]}], {"x", "y"}),
    ],
)
def test_storage_class_names_are_found_at_any_depth(documents: list[Any], names: set[str]) -> None:
    assert storage_class_names(documents) == names


def test_the_nodes_provide_every_class_the_samples_name() -> None:
    documents = [
        d for sample in SANDBOX.samples for d in yaml.safe_load_all((ROOT / sample).read_text()) if d
    ]
    assert storage_class_names(documents) == {"gp2"}
    assert unknown_storage_classes(documents) == []


def test_a_class_the_nodes_lack_is_named() -> None:
    documents = [{"spec": {"storageClassName": "premium-rwo"}}, {"spec": {"storageClassName": "gp2"}}]
    assert unknown_storage_classes(documents) == ["premium-rwo"]
