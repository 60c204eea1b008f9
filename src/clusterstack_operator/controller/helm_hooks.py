"""An addon chart's Helm hooks, run in the workload cluster as ``helm install`` and ``helm upgrade`` run
them (the rules: :mod:`clusterstack_operator.releases.hooks`; docs/clusterstack-hooks.md).

An install or an upgrade of the addons is a run of three parts: the pre hooks, each made and waited
for in Helm's order; the chart's ordinary objects; the post hooks. A hook Job can take minutes, so a
reconcile never waits for one: the run is kept in ``status.helmHooks`` (the event it is in, the hooks
done, the one it waits for) and each reconcile moves it on, looking again in a few seconds while a
hook runs. A failed hook ends the run: its name and its Job's reason are in HelmChartApplied and a
Warning Event, and nothing after it is applied until the addons change again.

Hooks are never among ``status.resources``: they are neither kept against drift nor pruned.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from clusterstack_operator.api.reasons import ConditionType, EventReason, Reason
from clusterstack_operator.controller.charts import applied_message
from clusterstack_operator.releases.hooks import (
    DeletePolicy,
    Hook,
    HookEvent,
    HookState,
    HookVerdict,
    SplitChart,
    deleted_after,
    hooks_for,
    judge_hook,
)
from operator_core import errors
from operator_core.kube import Kube
from operator_core.reconciling import WAIT_FOR_CHANGE
from operator_core.steps import ConditionBook

__all__ = [
    "DELETION",
    "HOOK_POLL_SECONDS",
    "RETRY_ANNOTATION",
    "RUN_DONE",
    "HookRun",
    "RunStep",
    "named",
    "retry_of",
    "run_and_report",
    "run_done",
    "run_uninstall",
    "run_with_hooks",
]

RETRY_ANNOTATION = "clusterstack.x-k8s.io/retry-helm-hooks"
"""On a ClusterAddon: set to a new value (a timestamp, say) to run a failed hook again, with the hooks
of its event before it, once whatever made it fail is fixed."""
HOOK_POLL_SECONDS = 3.0
"""How soon a reconcile looks again at a hook that runs (or an old hook object still being deleted)."""
RUN_DONE = "done"
"""The event of a run kept in status once every hook of it ran."""
DELETION = "deletion"
"""The version of an uninstall's run in status.helmHooks (an install's or upgrade's is what it applies)."""
FAILED_DELETE_HOOK_RECHECK_SECONDS = 60.0
"""How often a deletion held by a failed delete hook looks again (the retry annotation wakes it at once)."""


class RunStep(StrEnum):
    WAITING = "Waiting"
    """A hook runs, or the ordinary objects were not all applied: look again soon."""
    FAILED = "Failed"
    DONE = "Done"


@dataclass
class HookRun:
    """``status.helmHooks``: one install or upgrade of addon ``version`` and where it stands."""

    version: str
    event: str
    """The event whose hooks run now, or ``done``."""
    completed: list[str] = field(default_factory=list)
    """The hooks of that event that succeeded, by "Kind namespace/name"."""
    running: str | None = None
    failed: str | None = None
    retried: str | None = None
    """The value of :data:`RETRY_ANNOTATION` that last started a failed event over."""
    restarted: bool = False
    """This reconcile started the failed event over (not kept in the status)."""

    @classmethod
    def of(
        cls, status: Mapping[str, Any] | None, version: str, first: HookEvent, retry: str | None = None
    ) -> HookRun:
        """The run kept in the status when it is of ``version``; a new one from ``first`` otherwise.

        A failed run stays failed, as a failed ``helm upgrade`` does, until the addons change or
        ``retry`` (the ClusterAddon's :data:`RETRY_ANNOTATION`) is a value it has not retried with:
        then the event that failed starts over from its first hook, as running helm again would."""
        if status and status.get("version") == version:
            run = cls(
                version,
                str(status.get("event") or first),
                list(status.get("completed") or []),
                status.get("running"),
                status.get("failed"),
                status.get("retried"),
            )
            if run.failed is not None and retry and retry != run.retried:
                run.completed, run.running, run.failed, run.retried = [], None, None, retry
                run.restarted = True
            return run
        return cls(version, first.value, retried=retry)

    def wire(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "event": self.event,
            "completed": list(self.completed),
            "running": self.running,
            "failed": self.failed,
            "retried": self.retried,
        }


def named(hook: Hook) -> str:
    """A hook as status and messages name it: "Kind namespace/name"."""
    where = f"{hook.namespace}/" if hook.namespace else ""
    return f"{hook.kind} {where}{hook.name}"


def _where(hook: Hook) -> tuple[str, str, str, str | None]:
    """(apiVersion, kind, name, namespace): how the workload cluster's client names a hook's object."""
    return str(hook.manifest.get("apiVersion", "")), hook.kind, hook.name, hook.namespace


def retry_of(obj: Mapping[str, Any]) -> str | None:
    """The object's :data:`RETRY_ANNOTATION`, if set."""
    return ((obj.get("metadata") or {}).get("annotations") or {}).get(RETRY_ANNOTATION)


async def _delete(workload: Kube, hooks: Iterable[Hook]) -> None:
    """Delete each hook's object (a Job's Pods with it)."""
    for hook in hooks:
        await workload.delete(*_where(hook))


async def _gone_before_creation(workload: Kube, hook: Hook) -> bool:
    """Delete a hook's object before it is made again; whether it is gone already."""
    await _delete(workload, [hook])
    return await workload.get_live(*_where(hook)) is None


async def _run_event(
    workload: Kube, book: ConditionBook, hooks: tuple[Hook, ...], event: HookEvent, run: HookRun
) -> RunStep:
    ordered = hooks_for(hooks, event)
    done = [hook for hook in ordered if named(hook) in run.completed]
    for hook in ordered:
        name = named(hook)
        if name in run.completed:
            continue
        verdict: HookVerdict | None = None
        if run.running != name:
            if hook.deleted_on(DeletePolicy.BEFORE_HOOK_CREATION) and not await _gone_before_creation(
                workload, hook
            ):
                return RunStep.WAITING  # the old one is still being deleted
            try:
                await workload.apply(hook.manifest)
            except (errors.Invalid, errors.Forbidden, errors.NotFound) as refused:
                # As helm: a hook the API server does not take has failed (retrying cannot help).
                verdict = HookVerdict(HookState.FAILED, f"the API server refused it: {refused}")
            run.running = name
        if verdict is None:
            live = await workload.get_live(*_where(hook))
            verdict = judge_hook(hook, live)
        if verdict.state is HookState.RUNNING:
            await book.set(
                ConditionType.HELM_CHART_APPLIED,
                "False",
                Reason.HOOK_RUNNING,
                f"{event} hook {name} runs; {_what_waits(event)}",
            )
            return RunStep.WAITING
        if verdict.state is HookState.FAILED:
            await _delete(workload, deleted_after([*done, hook], failed=hook))
            run.running, run.failed = None, f"{event} hook {name} failed: {verdict.reason}"
            message = f"{run.failed}; {_what_stops(event)}"
            # A retry that fails as before leaves the condition as it was: the Warning is said anyway.
            warn = None if run.restarted else EventReason.HOOK_FAILED
            await book.set(ConditionType.HELM_CHART_APPLIED, "False", Reason.HOOK_FAILED, message, warn=warn)
            if run.restarted:
                await book.event("Warning", EventReason.HOOK_FAILED, message)
            return RunStep.FAILED
        run.completed.append(name)
        run.running = None
        done.append(hook)
    await _delete(workload, deleted_after(done))
    if done:
        await book.event(
            "Normal", EventReason.HOOKS_RAN, f"{event} hooks ran: {', '.join(named(h) for h in done)}"
        )
    return RunStep.DONE


def _what_waits(event: HookEvent) -> str:
    if event in (HookEvent.PRE_INSTALL, HookEvent.PRE_UPGRADE):
        return "the chart's objects are applied once every pre hook has succeeded"
    return "the chart's objects are applied; its post hooks run"


def _what_stops(event: HookEvent) -> str:
    if event in (HookEvent.PRE_INSTALL, HookEvent.PRE_UPGRADE):
        return "the chart's objects are not applied, as helm would not apply them"
    return "the chart's objects are applied, the hooks after it did not run"


async def _in_scope(workload: Kube, hooks: tuple[Hook, ...]) -> tuple[Hook, ...]:
    """The hooks as the workload cluster scopes them: a cluster-scoped one (a ClusterRole) loses the
    namespace every rendered object is given, so that it is named as it is ("ClusterRole x"). A kind
    the workload cluster does not serve is left as it is: applying it fails the hook, saying why."""
    scoped = []
    for hook in hooks:
        if hook.namespace is not None:
            try:
                namespaced = await workload.namespaced((str(hook.manifest.get("apiVersion", "")), hook.kind))
            except errors.NotFound:
                namespaced = True
            if not namespaced:
                metadata = {
                    k: v for k, v in (hook.manifest.get("metadata") or {}).items() if k != "namespace"
                }
                hook = dataclasses.replace(hook, manifest={**hook.manifest, "metadata": metadata})
        scoped.append(hook)
    return tuple(scoped)


async def run_with_hooks(
    workload: Kube,
    book: ConditionBook,
    chart: SplitChart,
    events: tuple[HookEvent, HookEvent],
    run: HookRun,
    apply_ordinary: Callable[[], Awaitable[bool]],
) -> RunStep:
    """Move an install or upgrade (``events``: its pre and post event) on as far as it goes now:
    the pre hooks, the ordinary objects (``apply_ordinary``: whether all were applied), the post hooks.
    ``run`` is changed in place; the caller writes it to the status."""
    pre, post = events
    if run.failed is not None:
        return RunStep.FAILED
    hooks = await _in_scope(workload, chart.hooks)
    if run.restarted:
        await book.event(
            "Normal",
            EventReason.HOOKS_RETRIED,
            f"running the {run.event} hooks of addon version {run.version} again "
            f"({RETRY_ANNOTATION}={run.retried})",
        )
    if run.event == pre:
        step = await _run_event(workload, book, hooks, pre, run)
        if step is not RunStep.DONE:
            return step
        run.event, run.completed = post.value, []
    if run.event == post:
        if not await apply_ordinary():
            return RunStep.WAITING
        step = await _run_event(workload, book, hooks, post, run)
        if step is not RunStep.DONE:
            return step
        run.event, run.completed = RUN_DONE, []
    return RunStep.DONE


async def run_and_report(
    workload: Kube,
    book: ConditionBook,
    chart: SplitChart,
    events: tuple[HookEvent, HookEvent],
    run: HookRun,
    apply_ordinary: Callable[[], Awaitable[bool]],
    chart_name: str,
) -> float | None:
    """:func:`run_with_hooks` for a whole chart: None once the run is over (HelmChartApplied then says
    its objects are applied and its hooks ran, as every later look finds it: :func:`applied_message`;
    the HooksRan Events say which), else the seconds until the next look: soon while a hook
    runs, at the next change once one failed."""
    step = await run_with_hooks(workload, book, chart, events, run, apply_ordinary)
    if step is RunStep.WAITING:
        return HOOK_POLL_SECONDS
    if step is RunStep.FAILED:
        return WAIT_FOR_CHANGE
    await book.set(
        ConditionType.HELM_CHART_APPLIED,
        "True",
        Reason.APPLIED,
        applied_message(len(chart.ordinary), chart_name, hooks_ran=True),
    )
    return None


def run_done(kept: Mapping[str, Any] | None, version: str) -> bool:
    """Whether the run kept in the status (status.helmHooks) is ``version``'s, and over."""
    return kept is not None and kept.get("version") == version and kept.get("event") == RUN_DONE


async def run_uninstall(
    workload: Kube,
    book: ConditionBook,
    chart: SplitChart,
    kept: Mapping[str, Any] | None,
    retry: str | None,
    delete_ordinary: Callable[[], Awaitable[bool]],
    save: Callable[[dict[str, Any]], Awaitable[None]],
) -> float | None:
    """Delete a chart's objects (``delete_ordinary``) with its delete hooks around them, as ``helm
    uninstall`` runs them: None once done, else the seconds until the finalizer looks again (a hook
    runs, or failed: the deletion waits, as a failed uninstall keeps the release). The run (``kept``:
    the one in status.helmHooks) is handed to ``save`` while it is not over; a finished one is not
    written (the object goes, and a write would only make the finalizer's own patch conflict)."""
    run = HookRun.of(kept, DELETION, HookEvent.PRE_DELETE, retry)
    step = await run_with_hooks(
        workload, book, chart, (HookEvent.PRE_DELETE, HookEvent.POST_DELETE), run, delete_ordinary
    )
    if step is not RunStep.DONE:
        await save(run.wire())
    if step is RunStep.WAITING:
        return HOOK_POLL_SECONDS
    if step is RunStep.FAILED:
        return FAILED_DELETE_HOOK_RECHECK_SECONDS
    return None
