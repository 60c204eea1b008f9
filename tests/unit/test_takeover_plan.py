"""Taking over a StatefulSet the Go operator made: which pods get our labels first (pure)."""

from __future__ import annotations

from typing import Any

import pytest

from typesense_operator.controller.cluster.takeover import foreign_selector, plan_takeover

OURS = {
    "app.kubernetes.io/name": "typesense",
    "app.kubernetes.io/instance": "c",
    "app.kubernetes.io/component": "node",
}
GO = {"app": "c-sts"}


def pod(name: str, **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels}}


def statefulset(selector: dict[str, str], deleting: bool = False) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": "c-sts"}
    if deleting:
        metadata["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": metadata, "spec": {"selector": {"matchLabels": selector}}}


@pytest.mark.parametrize(
    ("live", "foreign"),
    [
        pytest.param(None, None, id="none yet"),
        pytest.param(statefulset(OURS), None, id="ours"),
        pytest.param(statefulset(GO), GO, id="the Go operator's"),
        pytest.param(statefulset(GO, deleting=True), None, id="being replaced already"),
    ],
)
def test_a_foreign_selector_is_one_that_is_not_ours(
    live: dict[str, Any] | None, foreign: dict[str, str] | None
) -> None:
    assert foreign_selector(live, OURS) == foreign


def test_only_the_statefulsets_own_ordinals_without_our_labels_are_labelled() -> None:
    pods = [
        pod("c-sts-0", app="c-sts", **{"app.kubernetes.io/instance": "c"}),
        pod("c-sts-1", **OURS, app="c-sts"),  # labelled already (an operator stopped half-way)
        pod("c-sts-2", app="c-sts"),
        pod("c-sts-reverse-proxy-x", app="c-sts"),  # not an ordinal of this StatefulSet
    ]
    plan = plan_takeover("c-sts", GO, OURS, pods)
    assert plan.label == ("c-sts-0", "c-sts-2")
    assert "selector app=c-sts" in plan.message
    assert "one at a time, the leader last" in plan.message
    assert plan_takeover("c-sts", GO, OURS, [pod("c-sts-0", **OURS)]).label == ()
