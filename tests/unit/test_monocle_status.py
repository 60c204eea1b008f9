"""Component conditions, Ready and the status patch are pure: only changes are written."""

from __future__ import annotations

from typing import Any

import pytest

from monocle_operator.controller.monocle.status import (
    deployment_condition,
    engine_health_condition,
    ready_condition,
    statefulset_condition,
    status_fields,
)
from operator_core.steps import final_status_patch
from operator_testkit.tables import conditions


def deployment(generation: int = 1, **status: int) -> dict[str, Any]:
    return {
        "metadata": {"name": "m-api", "generation": generation},
        "spec": {"replicas": 1},
        "status": status,
    }


@pytest.mark.parametrize(
    ("live", "expected"),
    [
        (None, ("False", "NotFound")),
        (
            deployment(2, observedGeneration=1, updatedReplicas=1, availableReplicas=1),
            ("False", "RollingOut"),
        ),
        (
            deployment(1, observedGeneration=1, updatedReplicas=0, availableReplicas=1),
            ("False", "RollingOut"),
        ),
        (deployment(1, observedGeneration=1, updatedReplicas=1), ("False", "NotAvailable")),
        (deployment(1, observedGeneration=1, updatedReplicas=1, availableReplicas=1), ("True", "Available")),
    ],
)
def test_deployment_condition(live: dict[str, Any] | None, expected: tuple[str, str]) -> None:
    status, reason, message = deployment_condition(live, "API")
    assert (status, reason) == expected
    assert message


def test_statefulset_condition() -> None:
    assert statefulset_condition(None, "OpenSearch") == (
        "False",
        "NotFound",
        "the OpenSearch StatefulSet does not exist yet",
    )
    sts = {"metadata": {"name": "m-elastic"}, "status": {"replicas": 1}}
    assert statefulset_condition(sts, "Elasticsearch")[:2] == ("False", "NotReady")
    assert statefulset_condition({**sts, "status": {"readyReplicas": 1}}, "Elasticsearch")[:2] == (
        "True",
        "Ready",
    )


ADDRESS = "http://198.18.0.7:9200"
RED = {
    "status": "red",
    "unassigned_shards": 3,
    "indices": {"monocle.changes.1.demo": {"status": "red"}, "monocle.config": {"status": "green"}},
}


@pytest.mark.parametrize(
    ("address", "health", "unreachable", "expected", "said"),
    [
        (None, None, None, ("Unknown", "NoAddress"), "m-elastic-0 has no address yet"),
        (ADDRESS, None, "no answer within 4 s", ("Unknown", "Unreachable"), "no answer within 4 s"),
        (ADDRESS, {"status": "green", "active_shards": 2}, None, ("True", "Green"), "2 active shards"),
        # A single node never holds replica copies: yellow is its normal state.
        (ADDRESS, {"status": "yellow", "unassigned_shards": 1}, None, ("True", "Yellow"), "1 replica shards"),
        (ADDRESS, RED, None, ("False", "Red"), "(red: monocle.changes.1.demo)"),
        (ADDRESS, {"status": "red"}, None, ("False", "Red"), "a primary shard is unassigned, and"),
        (ADDRESS, {"status": "purple"}, None, ("Unknown", "UnexpectedAnswer"), "'purple'"),
    ],
)
def test_engine_health_condition(
    address: str | None,
    health: dict[str, Any] | None,
    unreachable: str | None,
    expected: tuple[str, str],
    said: str,
) -> None:
    status, reason, message = engine_health_condition("m-elastic-0", address, health, unreachable)
    assert (status, reason) == expected
    assert said in message, message


ALL_TRUE = {
    "ConfigValid": "True",
    "ChildrenApplied": "True",
    "ElasticReady": "True",
    "EngineHealthy": "True",
    "ApiReady": "True",
}


@pytest.mark.parametrize(
    ("states", "expected"),
    [
        ({**ALL_TRUE, "CrawlerReady": "True"}, ("True", "AllComponentsReady")),
        ({**ALL_TRUE, "ConfigValid": "False", "CrawlerReady": "True"}, ("False", "ConfigValidReason")),
        ({**ALL_TRUE, "ChildrenApplied": "False"}, ("False", "ChildrenAppliedReason")),
        (
            {"ConfigValid": "True", "ChildrenApplied": "True", "ElasticReady": "False"},
            ("False", "ElasticReadyReason"),
        ),
        (
            {"ConfigValid": "True", "ChildrenApplied": "True", "ElasticReady": "True"},
            ("Unknown", "NotObserved"),
        ),
        ({**ALL_TRUE, "EngineHealthy": "False", "CrawlerReady": "True"}, ("False", "EngineHealthyReason")),
        # Red: the pod is not ready either (its probe waits for yellow); the engine's reason comes first.
        ({**ALL_TRUE, "ElasticReady": "False", "EngineHealthy": "False"}, ("False", "EngineHealthyReason")),
    ],
)
def test_ready_names_the_first_component_that_is_not(
    states: dict[str, str], expected: tuple[str, str]
) -> None:
    assert ready_condition(conditions(**states))[:2] == expected


def status_patch(current: Any, conditions: Any, *, generation: Any, **fields: Any) -> Any:
    """The patch a reconcile's end writes (operator_core.steps.Steps) of these fields and conditions."""
    return final_status_patch(current, status_fields(**fields), [c.to_wire() for c in conditions], generation)


def test_status_patch_is_empty_when_nothing_changed_and_keeps_unset_fields() -> None:
    current_conditions = conditions(ConfigValid="True")
    current = {
        "conditions": [c.to_wire() for c in current_conditions],
        "configHash": "abc",
        "observedGeneration": 3,
    }
    unchanged = status_patch(
        current, current_conditions, config_hash="abc", update_idents_job=None, generation=3
    )
    assert unchanged == {}
    failed = status_patch(
        current, current_conditions, config_hash="abc", update_idents_job=None, generation=None
    )
    assert failed == {}, "an incomplete reconcile leaves observedGeneration alone"
    moved = status_patch(current, current_conditions, config_hash="def", update_idents_job="j", generation=4)
    assert moved == {"configHash": "def", "updateIdentsJob": "j", "observedGeneration": 4}
