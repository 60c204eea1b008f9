"""The Monocle operator with the node agent: the seed sample's pods run, and a config change's Job completes.

Monocle and Elasticsearch have no runner here, so their containers run as the
agent's labelled stand-ins (they serve their declared ports and log what they
would have run); what this proves is the operator's side: the pods it asks for
are scheduled, started and probed, and the update-idents Job it creates runs to
completion, so the real Job controller marks it Complete.
"""

from __future__ import annotations

from typing import Any

import pytest

from operator_core.kube import Kube
from operator_testkit.assertions import condition, events_for, wait_for_condition
from operator_testkit.fixtures import wait_until

pytestmark = pytest.mark.usefixtures("node_agent", "monocle_operator")

API = "monocle.monocle.change-metrics.io/v1alpha1"
SAMPLE = "monocle_v1alpha1_monocle"


async def test_a_config_change_runs_an_update_idents_job_to_completion(
    kube: Kube, namespace: str, samples: dict[str, list[dict[str, Any]]]
) -> None:
    (sample,) = samples[SAMPLE]
    name = sample["metadata"]["name"]
    await kube.apply({**sample, "metadata": {**sample["metadata"], "namespace": namespace}})
    await wait_for_condition(kube, API, "Monocle", name, namespace, "Ready", "True", timeout=120)

    config = await kube.get("v1", "ConfigMap", f"{name}-api", namespace)
    assert config is not None
    await kube.apply(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": f"{name}-api", "namespace": namespace},
            "data": {"config.yaml": "workspaces:\n  - name: demo\n  - name: openstack\n"},
        },
        force=True,
    )
    labels = {"app.kubernetes.io/instance": name, "app.kubernetes.io/component": "update-idents"}

    async def completed_job() -> dict[str, Any] | None:
        for job in await kube.list("batch/v1", "Job", namespace, labels=labels):
            found = condition(job, "Complete")
            if found and found["status"] == "True":
                return job
        return None

    job = await wait_until(completed_job, timeout=120, interval=1, what="the update-idents Job to complete")
    assert isinstance(job, dict)
    assert job["status"]["succeeded"] == 1
    assert any("STAND-IN" in event["message"] for event in await events_for(kube, namespace, "Started")), (
        "the Job's pod must be marked as a stand-in"
    )

    async def recorded() -> bool:
        instance = await kube.get(API, "Monocle", name, namespace)
        return ((instance or {}).get("status") or {}).get("updateIdentsJob") == job["metadata"]["name"]

    await wait_until(recorded, timeout=30, interval=0.5, what="the Job recorded in the instance's status")
