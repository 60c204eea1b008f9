"""The shared apply-report-prune step: the same Events, condition and Warnings for every operator."""

from __future__ import annotations

import asyncio
from enum import StrEnum
from typing import Any, ClassVar

import pytest

from operator_core import errors
from operator_core.apimodel import ApiModel
from operator_core.applying import apply_report_prune, report_invalid_spec
from operator_core.children import CHILDREN_APPLIED, Owner
from operator_core.crdgen import CustomResource
from operator_core.kube import ApplyResult
from operator_core.reconciling import Context
from operator_core.settings import KubeSettings
from operator_core.steps import ConditionBook
from recording import Recorder


class Widget(Owner[ApiModel]):
    resource: ClassVar[CustomResource] = CustomResource(
        group="example.com", version="v1", kind="Widget", plural="widgets", spec_model=ApiModel
    )
    app: ClassVar[str] = "widget"
    managed_by: ClassVar[str] = "widget-operator"


class FakeKube:
    """Applies by name, failing the names it is told to; lists what it holds (unit-test stand-in)."""

    def __init__(self, live: list[dict[str, Any]] | None = None) -> None:
        self.live = {m["metadata"]["name"]: m for m in live or []}
        self.failing: dict[str, errors.KubeError] = {}
        self.deleted: list[str] = []

    async def apply(self, manifest: dict[str, Any]) -> ApplyResult:
        name = manifest["metadata"]["name"]
        if name in self.failing:
            raise self.failing[name]
        created = name not in self.live
        changed = self.live.get(name) != manifest
        self.live[name] = manifest
        return ApplyResult(manifest, written=changed, created=created)

    async def list(self, api_version: str, kind: str, namespace: str, *, labels: Any) -> list[dict[str, Any]]:
        if kind == "PodMonitor":
            raise errors.NotFound("kind PodMonitor of monitoring.coreos.com/v1 is not served", status=404)
        return [m for m in self.live.values() if m["kind"] == kind]

    async def delete(self, api_version: str, kind: str, name: str, namespace: str) -> bool:
        self.deleted.append(name)
        return self.live.pop(name, None) is not None


WIDGET = Widget(name="w", namespace="ns", uid="u", spec=ApiModel())
PRUNABLE = (("v1", "ConfigMap"), ("monitoring.coreos.com/v1", "PodMonitor"))


def config_map(name: str, value: str = "1") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"v": value}}


def a_book(*, applied_before: bool = True) -> tuple[ConditionBook, Recorder]:
    """The book of a Widget whose children were applied before (or, not: a new Widget)."""
    recorder = Recorder()
    obj: dict[str, Any] = {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": "w", "generation": 1},
    }
    if applied_before:
        applied = {"type": CHILDREN_APPLIED, "status": "True", "reason": "Applied", "message": "applied"}
        obj["status"] = {"conditions": [{**applied, "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
    return ConditionBook.of(obj, recorder), recorder  # type: ignore[arg-type]


async def run(kube: FakeKube, book: ConditionBook, desired: list[dict[str, Any]]) -> None:
    await apply_report_prune(kube, book, WIDGET, desired, PRUNABLE)  # type: ignore[arg-type]


async def test_created_updated_and_deleted_children_get_one_event_per_step() -> None:
    kube, (book, recorder) = FakeKube([config_map("old")]), a_book()
    await run(kube, book, [config_map("a"), config_map("b")])
    await run(kube, book, [config_map("a", "2"), config_map("b")])
    assert recorder.events == [
        ("Normal", "Created", "created ConfigMap a, ConfigMap b"),
        ("Normal", "Deleted", "deleted ConfigMap old"),
        ("Normal", "Updated", "updated ConfigMap a"),
    ]
    applied = book.get(CHILDREN_APPLIED)
    assert applied is not None
    assert (applied.status, applied.reason) == ("True", "Applied")
    assert kube.deleted == ["old"], "a kind that is not served (PodMonitor) has nothing to prune"


async def test_a_new_owners_children_are_made_without_an_event_and_made_again_with_one() -> None:
    kube, (book, recorder) = FakeKube(), a_book(applied_before=False)
    await run(kube, book, [config_map("a"), config_map("b")])
    assert recorder.events == [], "making a new owner's children is what was asked for, not news"
    applied = book.get(CHILDREN_APPLIED)
    assert applied is not None
    assert (applied.status, applied.message) == ("True", "2 objects applied")
    del kube.live["b"]
    await run(kube, book, [config_map("a"), config_map("b")])
    assert recorder.events == [("Normal", "Created", "created ConfigMap b")], "made again: someone deleted it"


async def test_a_failing_apply_sets_the_condition_and_warns_once_per_failure_not_per_retry() -> None:
    kube, (book, recorder) = FakeKube(), a_book()
    kube.failing["b"] = errors.Invalid("ConfigMap b: data.v: must be a number", status=422)
    for _ in range(3):
        with pytest.raises(errors.Invalid):
            await run(kube, book, [config_map("a"), config_map("b")])
    warnings = [event for event in recorder.events if event[0] == "Warning"]
    assert warnings == [("Warning", "ApplyFailed", "ConfigMap b: ConfigMap b: data.v: must be a number")]
    applied = book.get(CHILDREN_APPLIED)
    assert applied is not None
    assert (applied.status, applied.reason) == ("False", "ApplyFailed")
    kube.failing["b"] = errors.Forbidden("RBAC forbids configmaps", status=403)
    with pytest.raises(errors.Forbidden):
        await run(kube, book, [config_map("a"), config_map("b")])
    assert [event for event in recorder.events if event[0] == "Warning"][-1] == (
        "Warning",
        "ApplyFailed",
        "ConfigMap b: RBAC forbids configmaps",
    ), "a failure that changes is worth a new Warning"
    del kube.failing["b"]
    await run(kube, book, [config_map("a"), config_map("b")])
    applied = book.get(CHILDREN_APPLIED)
    assert applied is not None
    assert applied.status == "True"


class TimedKube(FakeKube):
    """Applies after a delay per name, and logs when each apply starts and ends."""

    def __init__(self, delays: dict[str, float]) -> None:
        super().__init__()
        self.delays = delays
        self.log: list[tuple[str, str]] = []

    async def apply(self, manifest: dict[str, Any]) -> ApplyResult:
        name = manifest["metadata"]["name"]
        self.log.append(("start", name))
        try:
            await asyncio.sleep(self.delays.get(name, 0))
            return await super().apply(manifest)
        finally:
            self.log.append(("end", name))


def child(kind: str, name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": kind, "metadata": {"name": name}}


async def test_pods_wait_for_what_they_read() -> None:
    kube, (book, recorder) = TimedKube({"config": 0.05}), a_book()
    desired = [child("ConfigMap", "config"), child("Service", "service"), child("StatefulSet", "nodes")]
    await run(kube, book, desired)
    log = kube.log
    assert log.index(("start", "nodes")) > log.index(("end", "config")), "no pod before its configuration"
    assert recorder.events == [
        ("Normal", "Created", "created ConfigMap config, Service service, StatefulSet nodes")
    ]


async def test_a_refused_configuration_starts_no_pods() -> None:
    kube, (book, _) = TimedKube({}), a_book()
    kube.failing["config"] = errors.Invalid("ConfigMap config: data: too long", status=422)
    desired = [child("ConfigMap", "config"), child("Service", "service"), child("StatefulSet", "nodes")]
    with pytest.raises(errors.Invalid):
        await run(kube, book, desired)
    assert "nodes" not in {name for step, name in kube.log if step == "start"}


class StatusKube:
    def __init__(self) -> None:
        self.patches: list[dict[str, Any]] = []

    async def patch_status(self, api_version: str, kind: str, name: str, namespace: str, patch: Any) -> None:
        self.patches.append(patch)


async def test_a_spec_its_model_refuses_makes_ready_false_with_one_warning() -> None:
    kube, recorder = StatusKube(), Recorder()
    context = Context(kube, recorder, KubeSettings())  # type: ignore[arg-type]
    obj: dict[str, Any] = {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": "w", "namespace": "ns", "generation": 2},
    }
    error = errors.InvalidSpec("Widget w: spec.size: Input should be a valid integer")
    await report_invalid_spec(context, Widget.resource, obj, error)
    (patch,) = kube.patches
    (ready,) = patch["conditions"]
    assert (ready["type"], ready["status"], ready["reason"]) == ("Ready", "False", "InvalidSpec")
    assert ready["message"] == str(error)
    assert recorder.events == [("Warning", "InvalidSpec", str(error))]
    await report_invalid_spec(context, Widget.resource, {**obj, "status": patch}, error)
    assert len(kube.patches) == 1, "the same refusal again writes nothing"
    assert len(recorder.events) == 1, "and warns no more"


async def test_a_warning_is_news_against_the_stored_status_not_a_passing_state_of_the_same_reconcile() -> (
    None
):
    """A broken download: "downloading" is set before each attempt, then the same failure again. The
    failure the object's status already says is not posted again; a new one is, once."""
    recorder = Recorder()
    failed = {"type": "Downloaded", "status": "False", "reason": "Broken", "message": "no addon chart"}
    obj = {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": "w", "generation": 1},
        "status": {"conditions": [{**failed, "lastTransitionTime": "2026-01-01T00:00:00Z"}]},
    }
    book = ConditionBook.of(obj, recorder)  # type: ignore[arg-type]
    for _ in range(2):
        await book.set("Downloaded", "False", "NotYet", "downloading")
        await book.set("Downloaded", "False", "Broken", "no addon chart", warn=Reason.BROKEN)
    assert recorder.events == []
    for _ in range(2):
        await book.set("Downloaded", "False", "NotYet", "downloading")
        await book.set(
            "Downloaded", "False", "Broken", "no metadata", warn=Reason.BROKEN, warn_on_new_message=True
        )
    assert recorder.events == [("Warning", "Broken", "no metadata")]


class Reason(StrEnum):
    BROKEN = "Broken"
