"""Staged cluster addons: a release's ``clusteraddon.yaml`` run stage by stage in the workload cluster.

Called by the ClusterAddon controller (:mod:`clusterstack_operator.controller.addon.reconcile`) once the
workload cluster answers and the release is downloaded. A hook's stages run in order; a stage waits
for its pre-condition, applies (or deletes) its chart's objects, then waits for its post-condition
before the next one starts. Where each stage stands is written to the ClusterAddon's status at
every step (``status.hook``, ``status.hookRelease``, ``status.stages``) before the next step is
taken, so that an operator restarted at any point resumes where it stopped: a stage done is never
run again, and a stage cut off while applying is applied again (server-side apply makes that
harmless). Waiting for a condition looks again every :data:`CONDITION_RETRY_SECONDS`.

Once every stage of the hook is done, what the previous addons had and the new ones lack is deleted,
and ``spec.clusterStack``/``spec.version`` say what is applied. Afterwards each look at the workload
cluster applies the objects the hook left (drift is corrected) without running stages again.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from clusterstack_operator.api.reasons import ConditionType, EventReason, Reason
from clusterstack_operator.controller.charts import (
    apply_and_record,
    delete_applied,
    report_template_failure,
    resource_entry,
)
from clusterstack_operator.controller.helm_hooks import HOOK_POLL_SECONDS, HookRun, RunStep, run_with_hooks
from clusterstack_operator.controller.runtime import ADDON_NAMESPACE, StackRuntime
from clusterstack_operator.helm import HelmError, RegistryAccess
from clusterstack_operator.releases.addons import AddonChange, identity
from clusterstack_operator.releases.hooks import HookEvent, SplitChart, split_hooks
from clusterstack_operator.releases.stage_conditions import InvalidCondition, check_condition, judge
from clusterstack_operator.releases.stages import (
    AFTER_CONTROL_PLANE_INITIALIZED,
    BEFORE_CLUSTER_UPGRADE,
    STAGES_FILE,
    InvalidStages,
    Phase,
    Stage,
    StagesConfig,
    WaitFor,
    hook_to_run,
    kept_after,
    parse_stages,
    stage_progress,
    stages_to_run,
)
from clusterstack_operator.releases.versions import ReleaseName
from clusterstack_operator.resources import addon_objects, rendered_objects
from operator_core import errors
from operator_core.kube import Kube
from operator_core.reconciling import WAIT_FOR_CHANGE
from operator_core.steps import ConditionBook

__all__ = ["CONDITION_RETRY_SECONDS", "StagedRun", "has_stages", "run_stages"]

CONDITION_RETRY_SECONDS = 5.0
"""A stage's condition that does not hold yet is evaluated again this soon (the workload cluster's
objects are read, not watched)."""

Manifest = dict[str, Any]
STAGE_HOOK_EVENTS = {
    AFTER_CONTROL_PLANE_INITIALIZED: (HookEvent.PRE_INSTALL, HookEvent.POST_INSTALL),
    BEFORE_CLUSTER_UPGRADE: (HookEvent.PRE_UPGRADE, HookEvent.POST_UPGRADE),
}
"""Which Helm hooks a stage's chart runs: its hook's stages install the addons when the control plane
is first up, and upgrade them before the Cluster moves to another release."""


@dataclass
class StagedRun:
    """One reconcile's view of a ClusterAddon whose release is staged, and how to record progress."""

    name: str
    """The ClusterAddon's name (its objects are labelled with it)."""
    release: ReleaseName
    addon_version: str
    kubernetes_version: str
    cluster: dict[str, Any]
    workload: Kube
    runtime: StackRuntime
    book: ConditionBook
    status: dict[str, Any]
    """The status being built; :attr:`save` writes it (with the book's conditions) at each step."""
    save: Callable[[], Awaitable[None]]
    template_data: Callable[[], Awaitable[Mapping[str, Any]]]
    """What a stage's overwrite.yaml reads: the Cluster and the objects it references."""
    source_key: str = ""
    """Where the release's assets are kept: its stack's source and credentials
    (:attr:`~clusterstack_operator.controller.stack_sources.BoundSource.key`)."""
    retry: str | None = None
    """The ClusterAddon's retry annotation (:data:`.helm_hooks.RETRY_ANNOTATION`): reruns failed hooks."""
    registry: RegistryAccess | None = None
    """How helm fetches a stage chart's dependencies from the release source's OCI registry."""

    async def chart(self, stage: Stage) -> SplitChart:
        """The stage's chart rendered: its ordinary objects and its Helm hooks."""
        rendered = await self.runtime.rendered_addons(
            self.release,
            self.addon_version,
            self.kubernetes_version,
            self.cluster,
            stage.name,
            source_key=self.source_key,
            registry=self.registry,
            template_data=self.template_data,
        )
        return split_hooks(addon_objects(rendered_objects(rendered, ADDON_NAMESPACE), self.name))

    async def objects(self, stage: Stage) -> list[Manifest]:
        """The stage's ordinary objects: what it applies, keeps against drift or deletes (never its
        hooks, which run once per install or upgrade)."""
        return [dict(obj) for obj in (await self.chart(stage)).ordinary]


def has_stages(runtime: StackRuntime, release: ReleaseName, source_key: str = "") -> bool:
    return (runtime.store(source_key).path(release) / STAGES_FILE).exists()


async def run_stages(
    run: StagedRun, applied: dict[str, Any], applied_version: str | None, change: AddonChange
) -> tuple[float, bool]:
    """Bring the workload cluster to the release's staged addons: the seconds until the next look,
    and whether the addons are now those of the release (every stage done, or nothing to run).
    ``applied``: the ClusterAddon's current status; ``applied_version``: its ``spec.version``;
    ``change``: what moving to the release means."""
    config = await _valid_config(run)
    if config is None:
        return WAIT_FOR_CHANGE, False
    if not change.new_addons:
        return await _correct_drift(run, config, applied)
    hook, stages = stages_to_run(config, hook_to_run(applied_version))
    run.status |= {
        "hook": hook,
        "hookRelease": run.release.tag,
        "stages": stage_progress(stages, hook, run.release.tag, applied),
        "resources": list(applied.get("resources") or []),
    }
    await run.save()
    for number, stage in enumerate(stages, start=1):
        record = run.status["stages"][number - 1]
        where = f"stage {number} of {len(stages)} ({stage.name}) of {hook}"
        if record["phase"] in (Phase.PENDING, Phase.WAITING_FOR_PRE_CONDITION):
            if not await _holds(run, stage.wait_for_pre_condition, where, "pre"):
                record["phase"] = Phase.WAITING_FOR_PRE_CONDITION.value
                await run.save()
                return CONDITION_RETRY_SECONDS, False
            record["phase"] = Phase.APPLYING_OR_DELETING.value
            await run.save()
        if record["phase"] == Phase.APPLYING_OR_DELETING:
            retry = await _apply_or_delete(run, stage, where, record, hook)
            if retry is not None:
                await run.save()
                return retry, False
            record["phase"] = Phase.WAITING_FOR_POST_CONDITION.value
            await run.save()
        if record["phase"] == Phase.WAITING_FOR_POST_CONDITION:
            if not await _holds(run, stage.wait_for_post_condition, where, "post"):
                await run.save()
                return CONDITION_RETRY_SECONDS, False
            record["phase"] = Phase.DONE.value
            await run.save()
    await _remove_what_the_hook_left_out(run, stages)
    await run.book.set(
        ConditionType.HELM_CHART_APPLIED,
        "True",
        Reason.APPLIED,
        f"every stage of {hook} of {run.release.tag} is done ({', '.join(s.name for s in stages) or 'none'})",
    )
    return run.runtime.settings.addon_check_seconds, True


async def _valid_config(run: StagedRun) -> StagesConfig | None:
    """The release's clusteraddon.yaml when it can be followed: parsed, every stage's chart present,
    every condition compiling. Otherwise None, with ClusterAddonConfigValidated False saying why."""
    text = (run.runtime.store(run.source_key).path(run.release) / STAGES_FILE).read_text()
    try:
        config = parse_stages(text)
        charts = await run.runtime.stage_names(run.release, run.addon_version, run.source_key)
        for hook, stages in config.addon_stages.items():
            for stage in stages:
                if stage.name not in charts:
                    raise _MissingChart(
                        f"stage {stage.name} of {hook} has no chart folder in "
                        f"{run.release.cluster_addon_chart(run.addon_version)} "
                        f"(it has {', '.join(sorted(charts)) or 'none'})"
                    )
                for wait in (stage.wait_for_pre_condition, stage.wait_for_post_condition):
                    if wait.waits:
                        check_condition(wait.conditions)
    except (InvalidStages, InvalidCondition, HelmError, _MissingChart) as error:
        reason = (
            Reason.HELM_CHART_MISSING
            if isinstance(error, _MissingChart)
            else Reason.INVALID_CONDITION
            if isinstance(error, InvalidCondition)
            else Reason.CONFIG_FAILED
        )
        await run.book.set(
            ConditionType.CONFIG_VALIDATED,
            "False",
            reason,
            f"{run.release.tag}: {error}",
            warn=EventReason.CONFIG_FAILED,
            warn_on_new_message=True,
        )
        return None
    await run.book.set(
        ConditionType.CONFIG_VALIDATED,
        "True",
        Reason.CONFIG_VALID,
        f"{STAGES_FILE} of {run.release.tag} is valid",
    )
    return config


class _MissingChart(ValueError):
    """A stage names a chart folder the cluster-addon archive lacks."""


async def _holds(run: StagedRun, wait: WaitFor, where: str, which: str) -> bool:
    """Whether ``wait`` (a stage's pre- or post-condition) holds now; EvaluatedCEL says what it waits for."""
    if not wait.waits:
        return True
    objects: dict[str, dict[str, Any] | None] = {}
    for wanted in wait.objects:
        try:
            objects[wanted.key] = await run.workload.get(
                wanted.api_version, wanted.kind, wanted.name, wanted.namespace
            )
        except errors.NotFound:
            objects[wanted.key] = None  # its kind is not served (yet): a CRD of a stage still to come
    verdict = judge(wait.conditions, objects)  # compiled before any stage ran
    if verdict.holds:
        await run.book.set(
            ConditionType.EVALUATED_CEL,
            "True",
            Reason.CONDITIONS_HOLD,
            f"the {which}-condition of {where} holds",
        )
        return True
    reason = Reason.PRE_CONDITION_PENDING if which == "pre" else Reason.POST_CONDITION_PENDING
    message = f"{where} waits for its {which}-condition: {verdict.why}"
    await run.book.set(ConditionType.EVALUATED_CEL, "False", reason, message)
    await run.book.set(ConditionType.HELM_CHART_APPLIED, "False", Reason.STAGES_RUNNING, message)
    return False


async def _apply_or_delete(
    run: StagedRun, stage: Stage, where: str, record: dict[str, Any], hook: str
) -> float | None:
    """Apply (or delete) the stage's objects in the workload cluster, recording them in
    ``status.resources``: None once all of it went through, else the seconds until the next look.

    A stage that applies runs its chart's Helm hooks around its objects as helm runs them
    (:func:`~clusterstack_operator.controller.helm_hooks.run_with_hooks`): install hooks in the
    stages of AfterControlPlaneInitialized, upgrade hooks in those of BeforeClusterUpgrade, the run
    kept in the stage's record. A stage that deletes runs none (helm runs delete hooks on uninstall,
    which a stage is not)."""
    try:
        split = await run.chart(stage)
    except (HelmError, yaml.YAMLError) as error:
        await report_template_failure(run.book, error, where=where)
        return run.runtime.settings.addon_check_seconds
    objects = [dict(obj) for obj in split.ordinary]
    chart = f"{stage.name} ({run.release.tag})"
    recorded = {identity(r): r for r in run.status["resources"]}
    if stage.action == "apply":

        async def apply_ordinary() -> bool:
            nonlocal recorded
            entries, failed = await apply_and_record(run.workload, objects, run.book, chart, watch=False)
            recorded |= {identity(entry): entry for entry in entries}
            run.status["resources"] = list(recorded.values())
            return not failed

        if split.hooks:
            events = STAGE_HOOK_EVENTS.get(hook, STAGE_HOOK_EVENTS[BEFORE_CLUSTER_UPGRADE])
            kept = record.get("helmHooks")
            hook_run = HookRun.of(kept, run.addon_version, events[0], run.retry)
            if kept is None:
                for said in split.skipped:
                    await run.book.event("Warning", EventReason.HOOKS_SKIPPED, f"{where}: {said}")
            step = await run_with_hooks(run.workload, run.book, split, events, hook_run, apply_ordinary)
            record["helmHooks"] = hook_run.wire()
            if step is RunStep.WAITING:
                return HOOK_POLL_SECONDS
            if step is RunStep.FAILED:
                return WAIT_FOR_CHANGE
        elif not await apply_ordinary():
            return run.runtime.settings.addon_check_seconds
        ran = f" and ran its {len(split.hooks)} Helm hooks" if split.hooks else ""
        await run.book.event(
            "Normal", EventReason.STAGE_DONE, f"{where}: applied {len(objects)} objects{ran}"
        )
        return None
    gone = [resource_entry(obj) for obj in objects]
    deleted = await delete_applied(run.workload, gone)
    removed = {identity(entry) for entry in gone}
    run.status["resources"] = [r for key, r in recorded.items() if key not in removed]
    await run.book.event(
        "Normal", EventReason.STAGE_DONE, f"{where}: deleted {', '.join(deleted) or 'nothing (already gone)'}"
    )
    return None


async def _kept(run: StagedRun, stages: tuple[Stage, ...]) -> list[Manifest]:
    """The objects ``stages`` leave applied, in the order their stages apply them."""
    rendered = [(stage, await run.objects(stage)) for stage in stages]
    kept = kept_after((stage, [identity(resource_entry(o)) for o in objects]) for stage, objects in rendered)
    chosen: dict[tuple[str, str, str, str], Manifest] = {}
    for stage, objects in rendered:
        if stage.action == "apply":
            for obj in objects:
                key = identity(resource_entry(obj))
                if key in kept:
                    chosen[key] = obj
    return list(chosen.values())


async def _remove_what_the_hook_left_out(run: StagedRun, stages: tuple[Stage, ...]) -> None:
    """Delete what was applied before (or by this hook) that the hook's stages do not leave applied."""
    kept = {identity(resource_entry(obj)) for obj in await _kept(run, stages)}
    stale = [r for r in run.status["resources"] if identity(r) not in kept]
    deleted = await delete_applied(run.workload, stale)
    run.status["resources"] = [r for r in run.status["resources"] if identity(r) in kept]
    if deleted:
        await run.book.event(
            "Normal",
            EventReason.OBJECTS_DELETED,
            f"deleted from the workload cluster (not in the addons of {run.release.tag}): "
            + ", ".join(deleted),
        )


async def _correct_drift(run: StagedRun, config: StagesConfig, applied: dict[str, Any]) -> tuple[float, bool]:
    """The addons are those of the release: apply what the last hook left, as rendered, so that an
    object deleted or changed in the workload cluster is restored; no stage runs again."""
    hook = applied.get("hook") or AFTER_CONTROL_PLANE_INITIALIZED
    try:
        objects = await _kept(run, config.stages(hook))
    except (HelmError, yaml.YAMLError) as error:
        await report_template_failure(run.book, error)
        return WAIT_FOR_CHANGE, False
    entries, failed = await apply_and_record(
        run.workload, objects, run.book, f"the addons of {hook}", watch=False
    )
    run.status["resources"] = entries
    return run.runtime.settings.addon_check_seconds, not failed
