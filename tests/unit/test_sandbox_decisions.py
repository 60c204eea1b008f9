"""The sandbox's pure decisions: which StorageClasses its samples need, and what each one is."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from operator_testkit.drivers.typesense import SANDBOX
from operator_testkit.nodeagent.storage import PROVISIONER
from operator_testkit.sandbox import storage_class, storage_class_names

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


def test_the_sandbox_makes_the_classes_its_samples_and_its_operators_defaults_name() -> None:
    documents = [
        d for sample in SANDBOX.samples for d in yaml.safe_load_all((ROOT / sample).read_text()) if d
    ]
    assert storage_class_names(documents) | set(SANDBOX.storage_classes) == {"gp2", "standard"}


def test_a_sandbox_storage_class_is_provisioned_by_the_node_agent_as_an_external_provisioner() -> None:
    made = storage_class("gp2")
    assert made["metadata"]["name"] == "gp2"
    assert made["provisioner"] == PROVISIONER
    # The controller manager reports ProvisioningFailed for an in-tree name it has no plugin for.
    assert not made["provisioner"].startswith("kubernetes.io/")
    assert made["volumeBindingMode"] == "Immediate"
