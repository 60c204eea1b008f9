"""The one reconcile shape every controller shares (operator_core.steps.Steps): the steps until one stops,
then one status write of the fields the controller owns, observedGeneration only when every step ran;
what a step holds is let go after the write, and what is to follow the write runs only after it."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import pytest

from operator_core.apimodel import ApiModel
from operator_core.crdgen import CustomResource
from operator_core.reconciling import Context
from operator_core.settings import KubeSettings
from operator_core.steps import Outcome, Scope, Steps
from recording import Recorder

GADGET = CustomResource(
    group="example.com", version="v1", kind="Gadget", plural="gadgets", spec_model=ApiModel
)


class StatusKube:
    def __init__(self, *, failing: bool = False) -> None:
        self.patches: list[dict[str, Any]] = []
        self.failing = failing

    async def patch_status(self, api_version: str, kind: str, name: str, namespace: str, patch: Any) -> None:
        if self.failing:
            raise RuntimeError("the API server refused the status")
        self.patches.append(patch)


def a_gadget(status: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "example.com/v1",
        "kind": "Gadget",
        "metadata": {"name": "g", "namespace": "ns", "generation": 3},
        "status": status or {"size": 1, "note": "kept by someone else", "observedGeneration": 2},
    }


@dataclass(kw_only=True)
class GadgetScope(Scope):
    stop_at: str = ""
    ran: tuple[str, ...] = ()

    @classmethod
    def of(cls, obj: dict[str, Any], context: Context) -> GadgetScope:
        return cls(**Scope.parts(obj, context))


def step(name: str, *, size: int | None = None) -> Any:
    async def run(scope: GadgetScope) -> Outcome:
        scope.ran = (*scope.ran, name)
        if size is not None:
            scope.status["size"] = size
        return Outcome.STOP if scope.stop_at == name else Outcome.CONTINUE

    return run


async def report(scope: GadgetScope, completed: bool) -> None:
    await scope.book.set("Ready", "True" if completed else "False", "Done" if completed else "Stopped")


STEPS = Steps(GADGET, GadgetScope.of, (step("first", size=2), step("second")), report)


def a_context(kube: StatusKube) -> Context:
    return Context(kube, Recorder(), KubeSettings())  # type: ignore[arg-type]


async def test_a_full_pass_writes_the_owned_fields_the_conditions_and_the_generation_once() -> None:
    kube = StatusKube()
    after = await STEPS.reconcile(a_gadget(), a_context(kube))
    (patch,) = kube.patches
    assert patch["size"] == 2
    assert patch["observedGeneration"] == 3
    assert [c["reason"] for c in patch["conditions"]] == ["Done"]
    assert "note" not in patch, "a field the controller does not own stays as it is"
    assert after == KubeSettings().resync_seconds


async def test_a_pass_that_stops_early_leaves_the_generation_unobserved() -> None:
    kube = StatusKube()
    scope = GadgetScope.of(a_gadget(), a_context(kube))
    scope.stop_at = "first"
    await STEPS.run(scope)
    assert scope.ran == ("first",)
    (patch,) = kube.patches
    assert "observedGeneration" not in patch


async def test_nothing_changed_writes_nothing() -> None:
    kube = StatusKube()
    obj = a_gadget()
    await STEPS.reconcile(obj, a_context(kube))
    obj["status"] = {**obj["status"], **kube.patches[0]}
    await STEPS.reconcile(obj, a_context(kube))
    assert len(kube.patches) == 1


async def test_what_a_step_holds_is_let_go_after_the_write_and_what_follows_it_runs_only_once_written() -> (
    None
):
    lock, order = asyncio.Lock(), []

    async def hold(scope: GadgetScope) -> Outcome:
        await scope.held.enter_async_context(lock)

        async def then() -> None:
            order.append(("after the write", lock.locked()))

        scope.after_status.append(then)
        return Outcome.CONTINUE

    holding = Steps(GADGET, GadgetScope.of, (hold, step("first", size=5)), report)
    kube = StatusKube()
    await holding.reconcile(a_gadget(), a_context(kube))
    assert order == [("after the write", True)]
    assert not lock.locked()

    order.clear()
    with pytest.raises(RuntimeError):
        await holding.reconcile(a_gadget(), a_context(StatusKube(failing=True)))
    assert order == [], "nothing follows a write that failed"
    assert not lock.locked()


async def test_progress_written_mid_reconcile_is_seen_at_once_and_not_written_again_at_the_end() -> None:
    """A long step (a migration) says what it does before it ends: the owned fields and conditions so far
    are written at once; the end writes only what changed after, and the generation."""

    async def long_step(scope: GadgetScope) -> Outcome:
        scope.status["size"] = 5
        await scope.book.set("Ready", "False", "Migrating", "copying")
        await scope.write_progress(GADGET)
        scope.status["note"] = None
        return Outcome.CONTINUE

    async def keep_ready(scope: GadgetScope, completed: bool) -> None:
        await scope.book.set("Ready", "False", "Migrating", "copying")

    kube = StatusKube()
    await Steps(GADGET, GadgetScope.of, (long_step,), keep_ready).reconcile(a_gadget(), a_context(kube))
    progress, end = kube.patches
    assert progress["size"] == 5
    assert [(c["type"], c["reason"]) for c in progress["conditions"]] == [("Ready", "Migrating")]
    assert "observedGeneration" not in progress
    assert end == {"note": None, "observedGeneration": 3}
