"""The ClusterAddon controller: a Cluster's addons, applied in its workload cluster.

A paused Cluster (``spec.paused``, or the ``cluster.x-k8s.io/paused`` annotation on it or on the
ClusterAddon, as ``clusterctl move`` and Cluster API's controllers honour them) gets no write: its
ClusterAddon says ``Paused`` and does nothing else until the pause ends.

One reconcile (an :class:`AddonScope` and its :data:`STEPS`) reads the Cluster, its class and the
release behind it from the watch caches, waits for what is not there yet (the release's assets, the
kubeconfig Secret, an API server that answers), each time saying why in a condition, then renders
the release's cluster-addon chart (its ``cluster-addon-values.yaml`` first, over the Cluster) and
applies every object in the workload cluster, CRDs first, recording each one's status. Objects of
the previously applied set that the new one lacks are deleted there. A release with the same
cluster-addon version as the one applied renders the same objects, so moving a Cluster to it writes
nothing in the workload cluster; an Event says so. What it applied is in ``spec.clusterStack`` and
``spec.version``, as upstream keeps it.

The workload cluster is not watched (yet): every ``addon_check_seconds`` a reconcile looks at the
objects there, which restores one deleted or changed by hand. Such a look renders nothing again:
the runtime keeps a Cluster's rendered addons until the release or the Cluster changes.

A release with ``clusteraddon.yaml`` applies its addons stage by stage instead
(:mod:`clusterstack_operator.controller.addon.stages`), with the stages' state in the status.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import yaml

from clusterstack_operator.api.reasons import ConditionType, EventReason, Reason
from clusterstack_operator.api.v1alpha1 import CLUSTER_ADDON, CLUSTER_STACK_RELEASE
from clusterstack_operator.controller.addon.stages import StagedRun, has_stages, run_stages
from clusterstack_operator.controller.charts import (
    apply_and_record,
    delete_applied,
    report_template_failure,
    values_template_data,
)
from clusterstack_operator.controller.clusters import clusters_of
from clusterstack_operator.controller.helm_hooks import HookRun, named, retry_of, run_and_report, run_done
from clusterstack_operator.controller.runtime import ADDON_NAMESPACE
from clusterstack_operator.controller.scope import StackScope, ready_report
from clusterstack_operator.helm import HelmError, RegistryAccess
from clusterstack_operator.releases.addons import (
    AddonChange,
    stale_resources,
    unreachable_retry_seconds,
    what_changes,
)
from clusterstack_operator.releases.assets import InvalidRelease, ReleaseMetadata
from clusterstack_operator.releases.decide import class_namespace_of, cluster_class_of, is_paused
from clusterstack_operator.releases.hooks import (
    DELETE_EVENTS,
    HookEvent,
    SplitChart,
    events_of,
    hook_events,
    split_hooks,
)
from clusterstack_operator.releases.versions import InvalidVersion, ReleaseName
from clusterstack_operator.resources import Addon, addon_objects, rendered_objects
from clusterstack_operator.sources.base import SourceError
from clusterstack_operator.workload import kubeconfig_secret_name
from operator_core import errors
from operator_core.kube import Kube
from operator_core.reconciling import WAIT_FOR_CHANGE, Context
from operator_core.steps import ConditionBook, Outcome, Steps

__all__ = [
    "STEPS_BEFORE_THE_APPLY",
    "AddonScope",
    "addon_references",
    "reconcile_addon",
    "rendered_chart",
]

ASSETS_RETRY_SECONDS = 5.0
"""A release whose assets are being downloaded (after a restart, say) is looked at again this soon."""
REQUIRED = (
    ConditionType.CLUSTER_READY,
    ConditionType.DOWNLOADED,
    ConditionType.HELM_CHART_APPLIED,
)


def addon_references(obj: Mapping[str, Any]) -> list[tuple[str, str]]:
    """What a ClusterAddon names in its namespace: its Cluster, and the kubeconfig Secret of it (their
    changes wake it: a class changed, a kubeconfig written at last)."""
    cluster = ((obj.get("spec") or {}).get("clusterRef") or {}).get("name")
    return [("Cluster", cluster), ("Secret", kubeconfig_secret_name(cluster))] if cluster else []


@dataclass(kw_only=True)
class AddonScope(StackScope):
    """One reconcile of one ClusterAddon: what it found so far on its way to the workload cluster."""

    addon: Addon
    baseline: dict[str, Any]
    """The object with the status on the server: a staged release writes its progress at every step of
    its stages."""
    cluster: dict[str, Any] | None = None
    release: ReleaseName | None = None
    """The release whose ClusterClass the Cluster uses."""
    source_key: str = ""
    """Where the release's assets are kept: the store key of its stack's source and credentials
    (:attr:`~clusterstack_operator.controller.stack_sources.BoundSource.key`)."""
    registry: RegistryAccess | None = None
    """How helm fetches chart dependencies from the release source's OCI registry (its stack's
    credentials: :attr:`~clusterstack_operator.controller.stack_sources.BoundSource.registry_access`)."""
    workload: Kube | None = None
    """A client of the workload cluster, once its API server answers."""
    metadata: ReleaseMetadata | None = None

    @classmethod
    def of(cls, obj: dict[str, Any], context: Context) -> AddonScope:
        return cls(
            **StackScope.parts(obj, context),
            addon=Addon.from_object(obj),
            baseline={**obj, "status": dict(obj.get("status") or {})},
        )

    def found(self) -> tuple[dict[str, Any], ReleaseName, Kube, ReleaseMetadata]:
        """The Cluster, its release, the workload cluster's client and the release's metadata, which the
        steps before the apply found."""
        if self.cluster is None or self.release is None or self.workload is None or self.metadata is None:
            raise RuntimeError("the steps before the apply find the Cluster, its release and its workload")
        return self.cluster, self.release, self.workload, self.metadata


async def find_cluster(scope: AddonScope) -> Outcome:
    """The Cluster, and the release of the ClusterClass it uses; their change wakes the addon."""
    book, namespace = scope.book, scope.addon.namespace
    cluster_name = scope.addon.spec.cluster_ref.name
    clusters = await clusters_of(scope.kube, namespace)
    scope.cluster = next((c for c in clusters if c["metadata"]["name"] == cluster_name), None)
    # Until the apply, what stops a step is fixed by a change that wakes the addon (the Cluster, its
    # Secret, the release): no timer, unless a step sets one.
    scope.next_look = WAIT_FOR_CHANGE
    if scope.cluster is None:
        await book.set(
            ConditionType.CLUSTER_READY,
            "False",
            Reason.CLUSTER_NOT_FOUND,
            f"Cluster {cluster_name} does not exist",
        )
        return Outcome.STOP
    if is_paused(scope.cluster, scope.obj):
        await book.set(
            ConditionType.PAUSED,
            "True",
            Reason.PAUSED,
            f"Cluster {cluster_name} is paused: nothing is written for it until it is unpaused",
        )
        return Outcome.STOP
    if book.get(ConditionType.PAUSED) is not None:
        await book.set(ConditionType.PAUSED, "False", Reason.NOT_PAUSED)
    class_name = cluster_class_of(scope.cluster)
    try:
        scope.release = ReleaseName.parse(class_name or "")
    except InvalidVersion:
        await book.set(
            ConditionType.CLUSTER_READY,
            "False",
            Reason.NO_CLUSTER_STACK_CLASS,
            f"Cluster {cluster_name} uses {class_name or 'no ClusterClass'}, "
            "which is no cluster stack release's",
        )
        return Outcome.STOP
    release_object = await scope.kube.get(
        CLUSTER_STACK_RELEASE.api_version,
        CLUSTER_STACK_RELEASE.kind,
        scope.release.tag,
        class_namespace_of(scope.cluster),
    )
    try:
        # Its stack's source and credentials say where its assets are (never the release's annotation).
        bound = await scope.runtime.sources.of_release(scope.kube, release_object or {})
    except SourceError as error:
        await book.set(
            ConditionType.DOWNLOADED,
            "False",
            Reason.NOT_DOWNLOADED_YET,
            f"release {scope.release.tag} cannot be read: {error}",
        )
        scope.next_look = ASSETS_RETRY_SECONDS
        return Outcome.STOP
    scope.source_key, scope.registry = bound.key, bound.registry_access
    return Outcome.CONTINUE


async def reach_workload_cluster(scope: AddonScope) -> Outcome:
    """The workload cluster: its kubeconfig Secret (its creation wakes the addon), then an API server
    that answers (looked at again sooner at first, then less often)."""
    book, namespace = scope.book, scope.addon.namespace
    cluster_name = scope.addon.spec.cluster_ref.name
    secret_name = kubeconfig_secret_name(cluster_name)
    secret = await scope.kube.get("v1", "Secret", secret_name, namespace)
    if secret is None:
        await book.set(
            ConditionType.CLUSTER_READY,
            "False",
            Reason.WAITING_FOR_KUBECONFIG,
            f"waiting for Secret {secret_name}, "
            "which Cluster API writes once the control plane has its certificates",
        )
        return Outcome.STOP
    try:
        workload = await scope.runtime.workloads.client(namespace, cluster_name, secret)
        await workload.server_version()
    except errors.InvalidKubeconfig as error:
        await book.set(
            ConditionType.CLUSTER_READY,
            "False",
            Reason.INVALID_KUBECONFIG,
            str(error),
            warn=EventReason.INVALID_KUBECONFIG,
        )
        return Outcome.STOP
    except errors.KubeError as error:
        await book.set(
            ConditionType.CLUSTER_READY,
            "False",
            Reason.CONTROL_PLANE_NOT_READY,
            f"the workload cluster's API server does not answer yet: {error}",
        )
        down = book.get(ConditionType.CLUSTER_READY)
        waited = (datetime.now(UTC) - down.last_transition_time).total_seconds() if down else 0.0
        scope.next_look = unreachable_retry_seconds(waited)
        return Outcome.STOP
    scope.workload = workload
    await book.set(
        ConditionType.CLUSTER_READY, "True", Reason.CLUSTER_READY, "the workload cluster's API server answers"
    )
    return Outcome.CONTINUE


async def check_release_assets(scope: AddonScope) -> Outcome:
    """The release's assets: the ClusterStackRelease controller downloads them; after a restart they may
    be on their way again, which is worth a short wait, not a failure."""
    book, runtime, release = scope.book, scope.runtime, scope.release
    assert release is not None  # found by find_cluster
    store = runtime.store(scope.source_key)
    if not store.has(release):
        await book.set(
            ConditionType.DOWNLOADED,
            "False",
            Reason.NOT_DOWNLOADED_YET,
            f"waiting for release {release.tag} to be downloaded (its ClusterStackRelease fetches it)",
        )
        scope.next_look = ASSETS_RETRY_SECONDS
        return Outcome.STOP
    try:
        scope.metadata = store.metadata(release)
    except InvalidRelease as error:
        await book.set(
            ConditionType.DOWNLOADED,
            "False",
            Reason.ISSUE_WITH_ASSETS,
            str(error),
            warn=EventReason.DOWNLOAD_FAILED,
        )
        return Outcome.STOP
    await book.set(
        ConditionType.DOWNLOADED, "True", Reason.DOWNLOADED, f"release {release.tag} is downloaded"
    )
    return Outcome.CONTINUE


async def apply_addons(scope: AddonScope) -> Outcome:
    """Render and apply the release's addons in the workload cluster: the whole chart, or stage by
    stage; then record what is applied."""
    cluster, release, workload, metadata = scope.found()
    addon, book, kube, runtime = scope.addon, scope.book, scope.kube, scope.runtime
    addon_version = metadata.cluster_addon_version.dot
    change = what_changes(addon.spec.cluster_stack, addon.spec.version, release.tag, addon_version)
    scope.next_look = runtime.settings.addon_check_seconds
    if has_stages(runtime, release, scope.source_key):
        scope.status["deleteHooks"] = None  # a staged release's charts are not uninstalled (docs)

        async def save() -> None:
            await scope.write_progress(CLUSTER_ADDON)

        run = StagedRun(
            addon.name,
            release,
            addon_version,
            metadata.kubernetes_version,
            cluster,
            workload,
            runtime,
            book,
            scope.status,
            save,
            lambda: values_template_data(kube, cluster),
            scope.source_key,
            retry_of(scope.obj),
            scope.registry,
        )
        scope.next_look, done = await run_stages(
            run, dict(scope.obj.get("status") or {}), addon.spec.version, change
        )
        if not done:
            return Outcome.STOP
        await _record_applied(kube, addon, release.tag, addon_version, change, book)
        return Outcome.CONTINUE
    _forget_stages(scope.obj, scope.status)
    try:
        split = await rendered_chart(scope)
    except (HelmError, yaml.YAMLError) as error:
        await report_template_failure(book, error)
        scope.next_look = WAIT_FOR_CHANGE
        return Outcome.STOP
    chart = release.cluster_addon_chart(addon_version)
    ordinary = [dict(obj) for obj in split.ordinary]
    kept = (scope.obj.get("status") or {}).get("helmHooks")
    events = _hook_events(scope.obj, addon.spec.version, addon_version)
    if events is not None and split.hooks:
        hook_run = HookRun.of(kept, addon_version, events[0], retry_of(scope.obj))
        if kept is None or kept.get("version") != addon_version:
            for said in split.skipped:
                await book.event("Warning", EventReason.HOOKS_SKIPPED, said)

        async def apply_ordinary() -> bool:
            resources, failed = await apply_and_record(workload, ordinary, book, chart, watch=False)
            scope.status["resources"] = resources
            return not failed

        later = await run_and_report(workload, book, split, events, hook_run, apply_ordinary, chart)
        scope.status["helmHooks"] = hook_run.wire()
        if later is not None:
            scope.next_look = later
            return Outcome.STOP
    else:
        hooks_ran = bool(split.hooks) and run_done(kept, addon_version)
        resources, failed = await apply_and_record(
            workload, ordinary, book, chart, watch=False, hooks_ran=hooks_ran
        )
        scope.status["resources"] = resources
        if failed:
            return Outcome.STOP
    # What the finalizer needs to uninstall the addons as helm would (only a chart with delete hooks
    # carries it): the hooks' names, their manifests rendered again from the Cluster then.
    delete_hooks = [named(hook) for hook in split.hooks if set(hook.events) & set(DELETE_EVENTS)]
    scope.status["deleteHooks"] = delete_hooks or None
    previous = (scope.obj.get("status") or {}).get("resources") or []
    resources = scope.status["resources"]
    deleted = await delete_applied(workload, stale_resources(previous, resources))
    if deleted:
        await book.event(
            "Normal",
            EventReason.OBJECTS_DELETED,
            f"deleted from the workload cluster (no longer in {chart}): {', '.join(deleted)}",
        )
    await _record_applied(kube, addon, release.tag, addon_version, change, book)
    return Outcome.CONTINUE


async def rendered_chart(scope: AddonScope) -> SplitChart:
    """The release's cluster-addon chart (a chart without stages), rendered for the Cluster: its
    ordinary objects and its hooks. Raises what rendering raises (HelmError, yaml.YAMLError)."""
    cluster, release, _, metadata = scope.found()
    kube = scope.kube
    return split_hooks(
        addon_objects(
            rendered_objects(
                await scope.runtime.rendered_addons(
                    release,
                    metadata.cluster_addon_version.dot,
                    metadata.kubernetes_version,
                    cluster,
                    source_key=scope.source_key,
                    registry=scope.registry,
                    template_data=lambda: values_template_data(kube, cluster),
                ),
                ADDON_NAMESPACE,
            ),
            scope.addon.name,
        )
    )


def _hook_events(
    obj: Mapping[str, Any], spec_version: str | None, version: str
) -> tuple[HookEvent, HookEvent] | None:
    """The events whose hooks applying addon ``version`` runs: those of the run under way for it (kept
    in status.helmHooks, a failed one included, which says so again), else install when nothing was
    applied before, upgrade when another version was (the last run's, or spec.version once objects
    were applied: a ClusterAddon is made with spec.version set, before anything is applied)."""
    status = obj.get("status") or {}
    kept = status.get("helmHooks") or {}
    if kept.get("version") == version:
        return events_of(str(kept.get("event")))
    applied = kept.get("version") or (spec_version if status.get("resources") else None)
    return hook_events(applied, version)


def _required(scope: AddonScope) -> tuple[str, ...]:
    """With a staged release (its clusteraddon.yaml was judged), its config's validity too."""
    staged = scope.book.get(ConditionType.CONFIG_VALIDATED) is not None
    return (*REQUIRED[:2], ConditionType.CONFIG_VALIDATED, *REQUIRED[2:]) if staged else REQUIRED


STEPS_BEFORE_THE_APPLY = (find_cluster, reach_workload_cluster, check_release_assets)
"""What an install, an upgrade and an uninstall need first: the Cluster and its release, a workload
cluster that answers, the release's assets."""
STEPS = Steps(
    CLUSTER_ADDON,
    AddonScope.of,
    (*STEPS_BEFORE_THE_APPLY, apply_addons),
    ready_report(
        _required,
        ready_message="the cluster addons are applied in the workload cluster",
        became_ready=EventReason.ADDONS_READY,
        became_not_ready=EventReason.ADDONS_NOT_READY,
    ),
)
reconcile_addon = STEPS.reconcile


async def _record_applied(
    kube: Kube, addon: Addon, release: str, addon_version: str, change: AddonChange, book: ConditionBook
) -> None:
    """The addons of ``release`` are applied: ``spec`` says so (as upstream keeps it), and an Event
    tells what the move meant."""
    if change.message and not change.new_addons:
        await book.set(ConditionType.HELM_CHART_APPLIED, "True", Reason.APPLIED, change.message)
    if (addon.spec.cluster_stack, addon.spec.version) != (release, addon_version):
        await kube.patch(
            CLUSTER_ADDON.api_version,
            CLUSTER_ADDON.kind,
            addon.name,
            addon.namespace,
            {"spec": {"clusterStack": release, "version": addon_version}},
        )
        if change.message:
            await book.event("Normal", EventReason.ADDONS_APPLIED, change.message)


def _forget_stages(obj: Mapping[str, Any], status: dict[str, Any]) -> None:
    """A release without stages: the stage record of an earlier staged release goes from the status."""
    current = obj.get("status") or {}
    status |= {key: None for key in ("hook", "hookRelease", "stages") if current.get(key) is not None}
