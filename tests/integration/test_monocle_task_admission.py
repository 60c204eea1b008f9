"""MonocleTask on the real control plane, the operator as its own ServiceAccount: the API server
refuses a task that cannot run and any change of one, and a task says at once what it waits for. (No
kubelet runs pods here, so no engine is ever ready: the Job's run is tests/e2e/nodes/test_monocle.py's.)"""

from __future__ import annotations

import re
from typing import Any

import pytest

from operator_core.errors import Invalid
from operator_core.kube import Kube
from operator_testkit.assertions import wait_for_condition

pytestmark = pytest.mark.usefixtures("monocle_operator")

API = "monocle.monocle.change-metrics.io/v1alpha1"


def task(namespace: str, name: str = "wipe", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "MonocleTask",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"monocle": "m", "command": "WipeCrawlerData"}, "need spec.workspace and spec.crawler"),
        (
            {"monocle": "m", "command": "UpdateIdents", "crawler": "gerrit"},
            "UpdateIdents takes no spec.crawler",
        ),
        (
            {"monocle": "m", "command": "SetCrawlerCommitDate", "workspace": "w", "crawler": "c"},
            "spec.commitDate goes with SetCrawlerCommitDate",
        ),
        (
            {
                "monocle": "m",
                "command": "SetCrawlerCommitDate",
                "workspace": "w",
                "crawler": "c",
                "commitDate": "May",
            },
            "commitDate must be YYYY-MM-DD or YYYY-MM-DD hh:mm:ss UTC",
        ),
        ({"monocle": "m", "command": "Reindex"}, "Unsupported value"),
    ],
)
async def test_a_task_that_cannot_run_is_refused_with_a_readable_message(
    kube: Kube, namespace: str, spec: dict[str, Any], message: str
) -> None:
    with pytest.raises(Invalid, match=re.escape(message)):
        await kube.create(task(namespace, **spec))


async def test_a_task_waits_for_its_instance_and_then_for_its_engine_and_never_changes(
    kube: Kube, namespace: str
) -> None:
    spec = {"monocle": "m", "command": "WipeCrawlerData", "workspace": "demo", "crawler": "gerrit"}
    await kube.create(task(namespace, **spec))
    waiting = await wait_for_condition(
        kube, API, "MonocleTask", "wipe", namespace, "Complete", "False", "MonocleNotFound"
    )
    assert waiting["message"] == f"Monocle m does not exist in namespace {namespace}"
    found = await kube.get(API, "MonocleTask", "wipe", namespace)
    assert found is not None
    assert found["status"]["phase"] == "Pending"
    with pytest.raises(Invalid, match=re.escape("a MonocleTask runs once: its spec cannot change")):
        await kube.apply(task(namespace, **{**spec, "crawler": "github"}))
    # Its instance made, it is woken at once, and waits for the engine (no kubelet runs it here).
    await kube.apply(
        {"apiVersion": API, "kind": "Monocle", "metadata": {"name": "m", "namespace": namespace}, "spec": {}}
    )
    engine = await wait_for_condition(
        kube, API, "MonocleTask", "wipe", namespace, "Complete", "False", "WaitingForEngine"
    )
    assert "m's engine is not ready" in engine["message"], engine
    assert await kube.list("batch/v1", "Job", namespace, labels={"app.kubernetes.io/instance": "wipe"}) == []
