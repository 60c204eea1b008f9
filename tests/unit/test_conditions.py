"""Condition setters are pure: transition times move only on a flip, order is stable, Ready summarises."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from operator_core.conditions import Condition, find, is_true, set_condition, summarize_ready

T0 = datetime(2026, 1, 1, tzinfo=UTC)
T1 = datetime(2026, 1, 2, tzinfo=UTC)


def test_setting_a_new_condition_stamps_now() -> None:
    conditions = set_condition([], "Ready", "False", "Starting", now=T0)
    assert conditions == [Condition(type="Ready", status="False", reason="Starting", last_transition_time=T0)]


def test_same_status_keeps_transition_time_but_updates_reason_and_message() -> None:
    first = set_condition([], "Ready", "False", "Starting", now=T0)
    second = set_condition(first, "Ready", "False", "Waiting", "for pods", now=T1)
    assert second[0].last_transition_time == T0
    assert (second[0].reason, second[0].message) == ("Waiting", "for pods")


def test_flip_moves_transition_time() -> None:
    first = set_condition([], "Ready", "False", "Starting", now=T0)
    flipped = set_condition(first, "Ready", "True", "QuorumReady", now=T1)
    assert flipped[0].last_transition_time == T1


def test_ready_comes_first_then_alphabetical() -> None:
    conditions = set_condition([], "Zeta", "True", "Ok", now=T0)
    conditions = set_condition(conditions, "Alpha", "True", "Ok", now=T0)
    conditions = set_condition(conditions, "Ready", "True", "Ok", now=T0)
    assert [c.type for c in conditions] == ["Ready", "Alpha", "Zeta"]


def test_setting_twice_with_the_same_values_is_identical() -> None:
    once = set_condition([], "Ready", "True", "Ok", now=T0)
    assert set_condition(once, "Ready", "True", "Ok", now=T1) == once


def test_find_and_is_true() -> None:
    conditions = set_condition([], "Ready", "True", "Ok", now=T0)
    assert find(conditions, "Ready") is conditions[0]
    assert find(conditions, "Other") is None
    assert is_true(conditions, "Ready")
    assert not is_true(conditions, "Other")


@pytest.mark.parametrize(
    ("states", "expected"),
    [
        ({"A": "True", "B": "True"}, ("True", "AllConditionsTrue")),
        ({"A": "True", "B": "False"}, ("False", "BReason")),
        ({"A": "Unknown", "B": "False"}, ("Unknown", "AReason")),
        ({"A": "True"}, ("Unknown", "NotObserved")),
    ],
)
def test_summarize_ready_takes_the_first_required_condition_that_is_not_true(
    states: dict[str, str], expected: tuple[str, str]
) -> None:
    conditions: list[Condition] = []
    for name, status in states.items():
        conditions = set_condition(conditions, name, status, f"{name}Reason", now=T0)  # type: ignore[arg-type]
    status, reason, _ = summarize_ready(conditions, ["A", "B"])
    assert (status, reason) == expected


def test_condition_serialises_as_metav1_condition() -> None:
    wire = Condition(
        type="Ready", status="True", reason="Ok", last_transition_time=T0, observed_generation=2
    ).to_wire()
    assert wire == {
        "type": "Ready",
        "status": "True",
        "reason": "Ok",
        "message": "",
        "observedGeneration": 2,
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }
