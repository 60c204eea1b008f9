"""The one per-object loop and the reconcile helpers that both operators' controllers use."""

from __future__ import annotations

import asyncio
import logging
from enum import StrEnum
from typing import Any

import pytest

from operator_core import errors, reconciling
from operator_core.apimodel import ApiModel
from operator_core.crdgen import CustomResource
from operator_core.reconciling import References, Wakeups, run_loop
from operator_core.steps import ConditionBook, Outcome, run_steps, write_status
from recording import Recorder


class Reason(StrEnum):
    READY = "Ready"
    NOT_READY = "NotReady"
    BROKEN = "Broken"


class NeverStopped:
    def __bool__(self) -> bool:
        return False

    async def wait(self) -> None:
        await asyncio.Event().wait()


def a_book(conditions: list[dict[str, Any]] | None = None) -> tuple[ConditionBook, Recorder]:
    recorder = Recorder()
    obj = {"metadata": {"name": "x", "generation": 4}, "status": {"conditions": conditions or []}}
    return ConditionBook.of(obj, recorder), recorder  # type: ignore[arg-type]


async def test_failures_back_off_2_5_10_30_seconds_and_never_end_the_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    slept: list[float] = []

    async def sleep(wakeup: asyncio.Event, stopped: object, seconds: float, answering: object = None) -> None:
        slept.append(seconds)

    monkeypatch.setattr(reconciling, "_sleep", sleep)
    outcomes: list[Any] = [
        errors.KubeError("api down"),
        RuntimeError("a bug"),
        RuntimeError("a bug"),
        RuntimeError("a bug"),
        RuntimeError("a bug"),
        15.0,
        RuntimeError("a bug"),
        None,
    ]

    async def once() -> float | None:
        outcome = outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome  # type: ignore[no-any-return]

    await run_loop(once, asyncio.Event(), NeverStopped(), what="ns/x", logger=logging.getLogger("test"))
    assert slept == [2.0, 5.0, 10.0, 30.0, 30.0, 15.0, 2.0], "a success resets the back-off"
    assert outcomes == [], "the loop ends only when the object is gone"


async def test_a_failure_of_an_api_server_outage_is_not_said_again_and_its_end_retries_at_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The client said the outage once; the loop logs its failure at debug and, instead of waiting out
    its back-off (a minute here), tries again as soon as the API server answers."""
    answering = asyncio.Event()
    outcomes: list[Any] = [errors.Unavailable("no answer from the API server", outage=True), None]

    async def once() -> float | None:
        outcome = outcomes.pop(0)
        if isinstance(outcome, Exception):
            asyncio.get_running_loop().call_later(0.05, answering.set)
            raise outcome
        return None

    caplog.set_level(logging.DEBUG, logger="test")
    started = asyncio.get_running_loop().time()
    await run_loop(
        once,
        asyncio.Event(),
        NeverStopped(),
        what="ns/x",
        logger=logging.getLogger("test"),
        retry_seconds=(60.0,),
        answering=answering,
    )
    assert asyncio.get_running_loop().time() - started < 5
    assert [r.levelno for r in caplog.records if r.name == "test"] == [logging.DEBUG]
    assert errors.said_already(errors.Unavailable("x", outage=True))
    assert not errors.said_already(errors.Unavailable("etcd timed out", status=503))


@pytest.mark.parametrize(
    ("error", "policy"),
    [
        (errors.InvalidSpec("spec.replicas: must be odd"), errors.Retry.WAIT_FOR_CHANGE),
        (errors.Invalid("refused: a Service of that name is headless", status=422), errors.Retry.BACK_OFF),
        (errors.Conflict("stale resourceVersion", status=409), errors.Retry.BACK_OFF),
        (errors.Unavailable("connection refused"), errors.Retry.BACK_OFF),
        (errors.Unavailable("etcd timed out", status=503), errors.Retry.BACK_OFF),
        (errors.Forbidden("RBAC", status=403), errors.Retry.BACK_OFF),
        (errors.NotFound("kind not served", status=404), errors.Retry.BACK_OFF),
        (RuntimeError("a bug"), errors.Retry.BACK_OFF),
    ],
)
def test_permanent_errors_wait_for_a_change_and_temporary_ones_back_off(
    error: Exception, policy: errors.Retry
) -> None:
    assert errors.retry_policy(error) is policy


async def test_a_permanent_error_is_logged_once_and_waits_for_a_change_not_a_timer(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    slept: list[float] = []

    async def sleep(wakeup: asyncio.Event, stopped: object, seconds: float, answering: object = None) -> None:
        slept.append(seconds)

    monkeypatch.setattr(reconciling, "_sleep", sleep)
    outcomes: list[Any] = [
        errors.InvalidSpec("spec.x: bad"),
        errors.InvalidSpec("spec.x: bad"),
        errors.Conflict("raced"),
        None,
    ]

    async def once() -> float | None:
        outcome = outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome  # type: ignore[no-any-return]

    await run_loop(once, asyncio.Event(), NeverStopped(), what="ns/x", logger=logging.getLogger("test"))
    assert slept == [reconciling.WAIT_FOR_CHANGE, reconciling.WAIT_FOR_CHANGE, 2.0]
    permanent = [r for r in caplog.records if "cannot be reconciled until it changes" in r.getMessage()]
    assert len(permanent) == 1, "the same permanent error is logged once, not on every wake"
    assert all(r.exc_info is None for r in caplog.records), "known errors need no traceback"


async def test_waiting_for_a_change_ends_only_when_woken() -> None:
    wakeup = asyncio.Event()
    waiting = asyncio.ensure_future(reconciling._sleep(wakeup, NeverStopped(), reconciling.WAIT_FOR_CHANGE))
    await asyncio.sleep(0.05)
    assert not waiting.done()
    wakeup.set()
    await asyncio.wait_for(waiting, timeout=1)


async def test_a_wakeup_cuts_the_wait_short() -> None:
    wakeups = Wakeups()
    calls = 0

    async def once() -> float | None:
        nonlocal calls
        calls += 1
        return 3600.0 if calls == 1 else None

    loop = asyncio.ensure_future(
        run_loop(once, wakeups.register(("ns", "x")), NeverStopped(), what="x", logger=logging.getLogger())
    )
    await asyncio.sleep(0.05)
    wakeups.wake(("ns", "other"))
    wakeups.wake((None, None))
    await asyncio.sleep(0.05)
    assert calls == 1, "another object's change wakes nothing here"
    wakeups.wake(("ns", "x"))
    await asyncio.wait_for(loop, timeout=2)
    assert calls == 2


async def test_wakeups_that_come_together_make_one_pass() -> None:
    wakeup, calls = asyncio.Event(), 0

    async def once() -> float | None:
        nonlocal calls
        calls += 1
        return 3600.0 if calls < 3 else None

    loop = asyncio.ensure_future(
        run_loop(once, wakeup, NeverStopped(), what="x", logger=logging.getLogger(), batch_seconds=0.2)
    )
    await asyncio.sleep(0.05)
    for _ in range(3):  # a StatefulSet's status, then its pods
        wakeup.set()
        await asyncio.sleep(0.02)
    await asyncio.sleep(0.3)
    assert calls == 2, "three changes within the batch window: one pass"
    wakeup.set()
    await asyncio.wait_for(loop, timeout=2)


class OneObjectKube:
    """Answers every get with a fresh copy of one object (a unit-test stand-in for the adapter)."""

    cache = None
    answering = asyncio.Event()

    async def get(self, api_version: str, kind: str, name: str, namespace: str) -> dict[str, Any]:
        return {"metadata": {"name": name, "namespace": namespace}}


THING = CustomResource(group="g", version="v1", kind="Thing", plural="things", spec_model=ApiModel)


def object_loop(reconcile: Any, name: str = "thing", **options: Any) -> asyncio.Future[None]:
    """The loop of one Thing in namespace ns, over a client that holds it."""
    return asyncio.ensure_future(
        reconciling.run_object_loop(
            OneObjectKube(),  # type: ignore[arg-type]
            THING,
            name,
            "ns",
            reconcile,
            Wakeups(),
            NeverStopped(),
            logger=logging.getLogger("test"),
            **options,
        )
    )


async def test_object_loops_take_turns_through_the_gate() -> None:
    """Many objects at once reconcile a few at a time: no API burst, no memory peak per object."""
    gate = asyncio.Semaphore(2)
    running = most = 0
    done: set[str] = set()
    all_done = asyncio.Event()

    async def reconcile(obj: dict[str, Any]) -> float:
        nonlocal running, most
        running += 1
        most = max(most, running)
        await asyncio.sleep(0.01)
        running -= 1
        done.add(obj["metadata"]["name"])
        if len(done) == 10:
            all_done.set()
        return 3600.0

    loops = [object_loop(reconcile, f"thing-{i}", gate=gate) for i in range(10)]
    try:
        await asyncio.wait_for(all_done.wait(), timeout=5)
    finally:
        for loop in loops:
            loop.cancel()
        await asyncio.gather(*loops, return_exceptions=True)
    assert most == 2


async def test_a_pass_kept_waiting_for_a_turn_says_so_and_a_pass_says_what_it_took(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Every turn taken by a long reconcile: the object that waited for one warns how long (a change to it
    waited that long); each pass says at debug what it took and when it looks next."""
    monkeypatch.setattr(reconciling, "LONG_TURN_WAIT_SECONDS", 0.05)
    gate = asyncio.Semaphore(1)
    reconciled = asyncio.Event()

    async def reconcile(obj: dict[str, Any]) -> float:
        reconciled.set()
        return reconciling.WAIT_FOR_CHANGE

    caplog.set_level(logging.DEBUG, logger="test")
    async with gate:  # a long reconcile holds the only turn
        loop = object_loop(reconcile, gate=gate)
        await asyncio.sleep(0.1)
    try:
        await asyncio.wait_for(reconciled.wait(), timeout=5)
        await asyncio.sleep(0)
    finally:
        loop.cancel()
        await asyncio.gather(loop, return_exceptions=True)
    said = [(r.levelno, r.getMessage()) for r in caplog.records]
    assert any(level == logging.WARNING and "for a turn" in text for level, text in said), said
    assert any(level == logging.DEBUG and "next look when woken" in text for level, text in said), said


async def test_an_object_loop_books_what_its_object_names_and_forgets_it_when_it_ends() -> None:
    book = References(lambda obj: [("Secret", f"{obj['metadata']['name']}-key")])
    reconciled = asyncio.Event()

    async def reconcile(obj: dict[str, Any]) -> float:
        assert book.holders("Secret", "ns", "thing-key") == {"thing"}  # booked before the pass
        reconciled.set()
        return 3600.0

    loop = object_loop(reconcile, references=book)
    await asyncio.wait_for(reconciled.wait(), timeout=5)
    loop.cancel()
    await asyncio.gather(loop, return_exceptions=True)
    assert book.holders("Secret", "ns", "thing-key") == set()


async def test_steps_run_in_order_until_one_stops_and_status_is_written_after_all() -> None:
    ran: list[str] = []
    finished: list[bool] = []

    def step(name: str, outcome: Outcome | None) -> Any:
        async def run(scope: list[str]) -> Outcome:
            scope.append(name)
            if outcome is None:
                raise RuntimeError("a bug")
            return outcome

        return run

    async def finish(scope: list[str], completed: bool) -> None:
        finished.append(completed)

    await run_steps([step("a", Outcome.CONTINUE), step("b", Outcome.CONTINUE)], ran, finish=finish)
    steps = [step("c", Outcome.CONTINUE), step("d", Outcome.STOP), step("e", Outcome.CONTINUE)]
    await run_steps(steps, ran, finish=finish)
    with pytest.raises(RuntimeError):
        await run_steps([step("f", None), step("g", Outcome.CONTINUE)], ran, finish=finish)
    assert ran == ["a", "b", "c", "d", "f"]
    assert finished == [True, False, False], "only a reconcile that ran every step completed"


async def test_a_step_that_stops_with_an_apply_has_the_apply_step_run_first_and_nothing_after_it() -> None:
    ran: list[str] = []
    finished: list[bool] = []

    def step(name: str, outcome: Outcome) -> Any:
        async def run(scope: list[str]) -> Outcome:
            scope.append(name)
            return outcome

        run.__name__ = name
        return run

    async def finish(scope: list[str], completed: bool) -> None:
        finished.append(completed)

    apply = step("apply", Outcome.CONTINUE)
    steps = [
        step("observe", Outcome.CONTINUE),
        step("wait", Outcome.APPLY_AND_STOP),
        apply,
        step("roll", Outcome.CONTINUE),
    ]
    await run_steps(steps, ran, finish=finish, apply=apply)
    assert ran == ["observe", "wait", "apply"]
    assert finished == [False], "a reconcile that stopped early did not complete"
    with pytest.raises(RuntimeError, match="wait asked for an apply"):
        await run_steps(steps[:2], [], finish=finish)


async def test_a_warning_only_when_a_condition_newly_turns_bad() -> None:
    book, recorder = a_book()
    assert await book.set("Config", "False", "Broken", "fix it", warn=Reason.BROKEN) is True
    assert await book.set("Config", "False", "Broken", "fix it", warn=Reason.BROKEN) is False
    assert recorder.events == [("Warning", "Broken", "fix it")]
    condition = book.get("Config")
    assert condition is not None
    assert condition.observed_generation == 4


@pytest.mark.parametrize(
    ("before", "now", "events"),
    [
        (None, "False", []),
        (None, "True", [("Normal", "Ready", "up")]),
        ("False", "True", [("Normal", "Ready", "up")]),
        ("True", "False", [("Warning", "NotReady", "up")]),
        ("True", "True", []),
        ("False", "False", []),
        ("Unknown", "False", []),
        ("Unknown", "True", [("Normal", "Ready", "up")]),
        ("True", "Unknown", [("Warning", "NotReady", "up")]),
    ],
)
async def test_ready_is_worth_an_event_only_when_it_turns_true_or_leaves_true(
    before: str | None, now: str, events: list[tuple[str, str, str]]
) -> None:
    earlier = [
        {
            "type": "Ready",
            "status": before,
            "reason": "R",
            "message": "",
            "lastTransitionTime": "2026-01-01T00:00:00Z",
        }
    ]
    book, recorder = a_book(earlier if before else None)
    await book.set_ready(now, "R", "up", became_ready=Reason.READY, became_not_ready=Reason.NOT_READY)  # type: ignore[arg-type]
    assert recorder.events == events


async def test_status_is_written_only_when_the_patch_says_something() -> None:
    class Kube:
        def __init__(self) -> None:
            self.patches: list[tuple[Any, ...]] = []

        async def patch_status(self, *args: Any) -> None:
            self.patches.append(args)

    resource = CustomResource(
        group="example.com", version="v1", kind="Widget", plural="widgets", spec_model=ApiModel
    )
    kube = Kube()
    obj = {"metadata": {"name": "w", "namespace": "ns"}}
    await write_status(kube, resource, obj, {})  # type: ignore[arg-type]
    assert kube.patches == []
    await write_status(kube, resource, obj, {"phase": "Up"})  # type: ignore[arg-type]
    assert kube.patches == [("example.com/v1", "Widget", "w", "ns", {"phase": "Up"})]


def test_references_wake_only_the_instances_that_name_an_object_in_their_namespace() -> None:
    book = References(lambda obj: ())
    book.remember("a", "demo", [("Secret", "tokens"), ("ConfigMap", "config")])
    book.remember("b", "demo", [("Secret", "tokens")])
    book.remember("a", "other", [("Secret", "tokens")])
    assert book.holders("Secret", "a", "tokens") == {"demo", "other"}
    assert book.holders("ConfigMap", "a", "tokens") == set()

    # An instance renames its reference: the old name no longer wakes it; the same name elsewhere still does.
    book.remember("a", "demo", [("Secret", "rotated")])
    assert book.holders("Secret", "a", "tokens") == {"other"}
    assert book.holders("Secret", "a", "rotated") == {"demo"}
    assert book.holders("ConfigMap", "a", "config") == set()
    assert book.holders("Secret", "b", "tokens") == {"demo"}

    book.forget("a", "other")
    assert book.holders("Secret", "a", "tokens") == set()
    assert book.holders("Secret", "b", "tokens") == {"demo"}


async def test_a_failure_while_the_operator_stops_ends_the_loop_quietly(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """At exit the client is closed under loops that are still running: that is no crash to report."""

    class Stopping:
        def __bool__(self) -> bool:
            return stopping

        async def wait(self) -> None:
            await asyncio.Event().wait()

    stopping = False

    async def once() -> float | None:
        nonlocal stopping
        stopping = True
        raise RuntimeError("Cannot send a request, as the client has been closed.")

    await asyncio.wait_for(
        run_loop(once, asyncio.Event(), Stopping(), what="ns/thing", logger=logging.getLogger("test")), 1
    )
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
