"""The sandbox's pure decisions: its StorageClasses, and address ranges that stay on loopback."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from operator_testkit.drivers.typesense import SANDBOX
from operator_testkit.nodeagent.storage import PROVISIONER
from operator_testkit.sandbox import loopback_range, storage_class, storage_class_names

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


@pytest.mark.parametrize("text", ["127.60.0.0/16", "127.111.32.0/19", "127.0.0.0/8"])
def test_loopback_ranges_are_accepted(text: str) -> None:
    assert loopback_range(text) == text


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("10.96.0.0/12", "not a loopback range"),
        ("126.0.0.0/7", "not a loopback range"),
        ("127.60.0.1/16", "not an IPv4 network"),
        ("nonsense", "not an IPv4 network"),
    ],
)
def test_a_sandbox_range_off_loopback_is_refused(text: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        loopback_range(text)
