"""The core's finalizing loop against the real API server, with an operator run in this process.

Its objects are of a kind of its own, which no other operator serves: the session's Monocle operator, run
by earlier tests on the same control plane, once wrote to the Monocle this test made, and its writes met
this operator's (a CI run waited 20 s for the finalizer in vain)."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest

from operator_core.apimodel import ApiModel
from operator_core.controller import FINALIZED, Operator
from operator_core.crdgen import CustomResource, crd_manifest
from operator_core.kube import Kube
from operator_core.reconciling import WAIT_FOR_CHANGE, Context
from operator_testkit.controlplane import ControlPlane
from operator_testkit.fixtures import install_crds, wait_until

FINALIZER = "test.operator-suite.io/clean-up"
HELD = CustomResource(
    group="finalizing.test.operator-suite.io",
    version="v1",
    kind="Held",
    plural="helds",
    spec_model=ApiModel,
    description="An object that is held until its clean-up ran: this test's own kind.",
)


@pytest.fixture
def held_crd(control_plane: ControlPlane) -> None:
    asyncio.run(install_crds(control_plane, [crd_manifest(HELD)]))


pytestmark = pytest.mark.usefixtures("held_crd")


async def test_a_clean_up_runs_once_when_the_finalizers_removal_meets_a_write_made_meanwhile(
    control_plane: ControlPlane, kube: Kube, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The clean-up writes to the object as it ends (as a reconcile's last status write may, at the same
    moment): the finalizer's removal, conditional on the version the clean-up was given, is refused
    with a conflict. Its retry removes the finalizer only: the clean-up, and the Event it says, are not
    made twice."""
    monkeypatch.setenv("KUBECONFIG", str(control_plane.kubeconfig))
    clean_ups: list[str] = []

    async def reconcile(obj: dict[str, Any], context: Context) -> float:
        return WAIT_FOR_CHANGE

    async def clean_up(obj: dict[str, Any], context: Context) -> float:
        clean_ups.append(obj["metadata"]["resourceVersion"])
        patch = {"metadata": {"annotations": {"test.operator-suite.io/cleaned-up": "yes"}}}
        await context.kube.patch(HELD.api_version, HELD.kind, "held", namespace, patch)
        return FINALIZED

    operator = Operator("finalizing-test", "test.operator-suite.io")
    operator.controller(HELD, reconcile, managed_by="finalizing-test", finalizer=FINALIZER, finalize=clean_up)
    stopping = asyncio.Event()
    running = asyncio.create_task(operator.run(stopping, (namespace,)))
    try:
        manifest = {
            "apiVersion": HELD.api_version,
            "kind": HELD.kind,
            "metadata": {"name": "held", "namespace": namespace},
            "spec": {},
        }
        await kube.create(manifest)

        async def finalizer_added() -> bool:
            found = await kube.get(HELD.api_version, HELD.kind, "held", namespace)
            return FINALIZER in ((found or {}).get("metadata") or {}).get("finalizers", [])

        # 60 s: the operator's caches start on a kind whose CRD was made a moment ago (a CI run under
        # load, with three workers, waited more than 20 s without a warning logged).
        await wait_until(finalizer_added, timeout=60, what="the finalizer on the object")
        await kube.delete(HELD.api_version, HELD.kind, "held", namespace)

        async def gone() -> bool:
            return await kube.get(HELD.api_version, HELD.kind, "held", namespace) is None

        await wait_until(gone, timeout=30, what="the object to go")
        assert len(clean_ups) == 1, f"the clean-up ran {len(clean_ups)} times"
    finally:
        stopping.set()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(running, timeout=30)
