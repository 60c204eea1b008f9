"""Child metadata and pruning are computed once, in operator_core.children, for every operator."""

from __future__ import annotations

import pytest

from operator_core.apimodel import ApiModel
from operator_core.children import Owner, stale_children
from operator_core.crdgen import CustomResource
from operator_core.errors import InvalidSpec, Retry, retry_policy


class WidgetSpec(ApiModel):
    size: int = 1
    """How big."""


WIDGET = CustomResource(
    group="example.com", version="v1", kind="Widget", plural="widgets", spec_model=WidgetSpec
)


class Widget(Owner[WidgetSpec]):
    resource = WIDGET
    app = "widget"
    managed_by = "widget-operator"


def a_widget() -> Widget:
    return Widget.from_object(
        {"metadata": {"name": "w1", "namespace": "ns", "uid": "u1"}, "spec": {"size": 3}}
    )


def test_from_object_validates_the_spec_with_the_resources_model() -> None:
    widget = a_widget()
    assert (widget.name, widget.namespace, widget.uid) == ("w1", "ns", "u1")
    assert widget.spec == WidgetSpec(size=3)
    assert Widget.from_object({"metadata": {"name": "w2", "namespace": "ns"}}).spec.size == 1


def test_children_carry_the_instance_label_and_a_controller_owner_reference() -> None:
    metadata = a_widget().metadata("w1-web", "web", annotations={"a": "b"})
    assert metadata == {
        "name": "w1-web",
        "namespace": "ns",
        "labels": {
            "app.kubernetes.io/name": "widget",
            "app.kubernetes.io/instance": "w1",
            "app.kubernetes.io/component": "web",
            "app.kubernetes.io/managed-by": "widget-operator",
        },
        "ownerReferences": [
            {
                "apiVersion": "example.com/v1",
                "kind": "Widget",
                "name": "w1",
                "uid": "u1",
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
        "annotations": {"a": "b"},
    }
    assert a_widget().instance_selector() == {
        "app.kubernetes.io/instance": "w1",
        "app.kubernetes.io/managed-by": "widget-operator",
    }


def test_stale_children_are_live_prunable_ones_that_no_desired_manifest_names() -> None:
    def manifest(kind: str, name: str) -> dict[str, object]:
        return {"apiVersion": "v1", "kind": kind, "metadata": {"name": name}}

    desired = [manifest("Service", "kept")]
    live = [manifest("Service", "kept"), manifest("Service", "dropped"), manifest("Secret", "never-pruned")]
    assert stale_children(desired, live, [("v1", "Service")]) == [manifest("Service", "dropped")]


def test_a_spec_its_model_refuses_is_an_invalid_spec_naming_the_field() -> None:
    obj = {"metadata": {"name": "w", "namespace": "ns"}, "spec": {"size": "big"}}
    with pytest.raises(
        InvalidSpec, match=r"^Widget w: spec\.size: Input should be a valid integer"
    ) as refused:
        Widget.from_object(obj)
    assert retry_policy(refused.value) is Retry.WAIT_FOR_CHANGE
