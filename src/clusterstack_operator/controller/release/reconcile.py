"""The ClusterStackRelease controller: download, wait for the provider, render, apply, report; and clean up.

A reconcile is a :class:`ReleaseScope` and three steps (:data:`STEPS`); it stops at the first that
cannot go on, saying why in its condition, and writes status once: the release's assets (downloaded
whole or not at all), its provider object's ``status.ready`` (none with no provider), then the
cluster-class chart rendered by ``helm template`` and every rendered object applied, its sync status
recorded in ``status.resources``. The
applied objects are held in the watch caches (an informer per kind, made when first needed): one
edited or deleted by hand wakes its release, and the next apply restores it.

On deletion (finalizer ``clusterstackrelease.clusterstack.x-k8s.io``, upstream's), the release waits
while a Cluster uses its ClusterClass, saying so; then it deletes what it applied.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import yaml

from clusterstack_operator.api.reasons import ConditionType, EventReason, Reason
from clusterstack_operator.api.v1alpha1 import CLUSTER_STACK_RELEASE
from clusterstack_operator.controller.charts import apply_and_record, delete_applied, report_template_failure
from clusterstack_operator.controller.clusters import clusters_by_class, clusters_using
from clusterstack_operator.controller.helm_hooks import (
    HookRun,
    retry_of,
    run_and_report,
    run_done,
    run_uninstall,
)
from clusterstack_operator.controller.scope import StackScope, ready_report
from clusterstack_operator.helm import HelmError
from clusterstack_operator.releases.assets import InvalidRelease
from clusterstack_operator.releases.decide import incomplete_release_retry_seconds
from clusterstack_operator.releases.hooks import HookEvent, SplitChart, split_hooks
from clusterstack_operator.releases.versions import InvalidVersion, ReleaseName
from clusterstack_operator.resources import (
    MANAGED_BY,
    Release,
    applied_objects,
    rendered_objects,
    source_key_of,
)
from clusterstack_operator.sources.base import SourceError
from operator_core import errors
from operator_core.cache import WatchedKind
from operator_core.children import MANAGED_BY_LABEL
from operator_core.clock import utcnow
from operator_core.kube import Kube
from operator_core.reconciling import WAIT_FOR_CHANGE, Context
from operator_core.steps import Finalizing, Outcome, Steps

__all__ = ["FINALIZER", "finalize_release", "reconcile_release"]

FINALIZER = "clusterstackrelease.clusterstack.x-k8s.io"
APPLY_RETRY_SECONDS = 20.0
IN_USE_RECHECK_SECONDS = 15.0
"""How soon a release whose deletion waits for a Cluster looks again without being woken. A Cluster's
change wakes it at once; this bounds what a missed wake-up costs (one CI run of the journey waited past
90 s for two releases after their Cluster had gone, which was not reproduced). Only cache reads."""
REQUIRED = (ConditionType.DOWNLOADED, ConditionType.PROVIDER_READY, ConditionType.HELM_CHART_APPLIED)


@dataclass(kw_only=True)
class ReleaseScope(StackScope):
    """One reconcile of one ClusterStackRelease."""

    release: Release
    name: ReleaseName
    store_key: str | None = None
    """Where its assets are kept, for its stack's source and credentials (:attr:`BoundSource.key`):
    found by the download step."""

    @classmethod
    def of(cls, obj: dict[str, Any], context: Context) -> ReleaseScope:
        release = Release.from_object(obj)
        try:
            name = ReleaseName.parse(release.name)
        except InvalidVersion as error:
            raise errors.InvalidSpec(f"ClusterStackRelease {release.name}: {error}") from None
        return cls(**StackScope.parts(obj, context), release=release, name=name)


async def download(scope: ReleaseScope) -> Outcome:
    """The release's assets, downloaded whole or not at all, with its stack's source and credentials:
    a download made with other credentials is never served (:mod:`.stack_sources`). Broken ones are
    said in a condition (and the next look downloads them afresh); a failed download is raised, for the
    loop's back-off, after saying so."""
    runtime, book, name = scope.runtime, scope.book, scope.name
    bound = None
    try:
        bound = await runtime.sources.of_release(scope.kube, scope.obj)
        store = runtime.store(bound.key)
        if store.has(name):
            metadata = store.metadata(name)
        else:
            await book.set(
                ConditionType.DOWNLOADED,
                "False",
                Reason.NOT_DOWNLOADED_YET,
                f"downloading from {bound.source.description}",
            )
            metadata = await store.fetch(name, bound.source)
    except SourceError as error:
        where = "its source"
        if bound is not None:
            where = bound.source.description
            await runtime.sources.failed(bound)
        await book.set(
            ConditionType.DOWNLOADED,
            "False",
            Reason.NOT_DOWNLOADED_YET,
            f"download from {where} failed, retrying: {error}",
            warn=EventReason.DOWNLOAD_FAILED,
            warn_on_new_message=True,
        )
        raise
    except InvalidRelease as error:
        # The store kept nothing of it: the next look downloads it afresh (its assets still being
        # uploaded, or a release fixed on the source), soon at first, then less and less often.
        await book.set(
            ConditionType.DOWNLOADED,
            "False",
            Reason.ISSUE_WITH_ASSETS,
            str(error),
            warn=EventReason.VALIDATE_HELM_CHART_FAILED,
            warn_on_new_message=True,
        )
        since = book.get(ConditionType.DOWNLOADED)
        broken_for = (utcnow() - since.last_transition_time).total_seconds() if since is not None else 0.0
        scope.next_look = incomplete_release_retry_seconds(broken_for)
        return Outcome.STOP
    scope.store_key = bound.key
    await book.set(ConditionType.DOWNLOADED, "True", Reason.DOWNLOADED, f"release {name.tag} is downloaded")
    scope.status["kubernetesVersion"] = metadata.kubernetes_version
    return Outcome.CONTINUE


async def wait_for_provider(scope: ReleaseScope) -> Outcome:
    """The provider object's ``status.ready`` (none with no provider); its change wakes the release."""
    release, book, kube = scope.release, scope.book, scope.kube
    reference = release.spec.provider_ref
    if reference is None:
        await book.set(
            ConditionType.PROVIDER_READY, "True", Reason.NO_PROVIDER, "the stack has no provider object"
        )
        return Outcome.CONTINUE
    if kube.cache is not None:
        kube.cache.ensure(WatchedKind(reference.api_version, reference.kind, {MANAGED_BY_LABEL: MANAGED_BY}))
    what = f"{reference.kind} {reference.name}"
    try:
        provider = await kube.get(reference.api_version, reference.kind, reference.name, release.namespace)
    except errors.NotFound:
        provider = None
        what = f"{what} (its kind is not served: install the provider's CRDs)"
    if provider is None:
        message = f"{what} does not exist yet"
    elif (provider.get("status") or {}).get("ready") is not True:
        message = f"{what} is not ready yet (status.ready)"
    else:
        await book.set(ConditionType.PROVIDER_READY, "True", Reason.PROVIDER_READY, f"{what} is ready")
        return Outcome.CONTINUE
    await book.set(ConditionType.PROVIDER_READY, "False", Reason.PROCESS_ONGOING, message)
    scope.next_look = WAIT_FOR_CHANGE
    return Outcome.STOP


async def apply_cluster_class(scope: ReleaseScope) -> Outcome:
    """Render the cluster-class chart and apply its objects, each on its own: one refused does not hold
    up the others, and each one's outcome is in ``status.resources``. A chart with install hooks runs
    them around its objects the first time, as ``helm install`` would
    (:func:`~clusterstack_operator.controller.helm_hooks.run_with_hooks`); a release never changes, so
    it is never upgraded."""
    release, name, book = scope.release, scope.name, scope.book
    try:
        chart = await _class_chart(scope)
    except (HelmError, yaml.YAMLError) as error:
        await report_template_failure(book, error)
        scope.next_look = APPLY_RETRY_SECONDS
        return Outcome.STOP
    ordinary = applied_objects([dict(obj) for obj in chart.ordinary], release)

    kept = (scope.obj.get("status") or {}).get("helmHooks")
    has_hooks = _runs(chart, HookEvent.PRE_INSTALL, HookEvent.POST_INSTALL)

    async def apply_ordinary() -> bool:
        resources, failed = await apply_and_record(
            scope.kube,
            ordinary,
            book,
            name.cluster_class_chart,
            watch=True,
            hooks_ran=has_hooks and run_done(kept, name.tag),
        )
        scope.status["resources"] = resources
        return not failed

    if has_hooks and not run_done(kept, name.tag):
        run = HookRun.of(kept, name.tag, HookEvent.PRE_INSTALL, retry_of(scope.obj))
        install = (HookEvent.PRE_INSTALL, HookEvent.POST_INSTALL)
        later = await run_and_report(
            scope.kube, book, chart, install, run, apply_ordinary, name.cluster_class_chart
        )
        scope.status["helmHooks"] = run.wire()
        if later is not None:
            scope.next_look = later
            return Outcome.STOP
        return Outcome.CONTINUE
    if not await apply_ordinary():
        scope.next_look = APPLY_RETRY_SECONDS
        return Outcome.STOP
    return Outcome.CONTINUE


async def _class_chart(scope: ReleaseScope) -> SplitChart:
    """The cluster-class chart as rendered: its ordinary objects, and its hooks (neither labelled nor
    owned: as helm leaves them, a hook outlives the release unless its delete policy says otherwise)."""
    if scope.store_key is None:
        scope.store_key = (await scope.runtime.sources.of_release(scope.kube, scope.obj)).key
    rendered = await scope.runtime.rendered(scope.name, scope.release.namespace, scope.store_key)
    return split_hooks(rendered_objects(rendered, scope.release.namespace))


def _runs(chart: SplitChart, *events: HookEvent) -> bool:
    return any(event in hook.events for hook in chart.hooks for event in events)


STEPS = Steps(
    CLUSTER_STACK_RELEASE,
    ReleaseScope.of,
    (download, wait_for_provider, apply_cluster_class),
    ready_report(
        lambda _: REQUIRED,
        ready_message="ClusterClass applied",
        became_ready=EventReason.RELEASE_READY,
        became_not_ready=EventReason.RELEASE_NOT_READY,
    ),
)
reconcile_release = STEPS.reconcile


async def _held_elsewhere(kube: Kube, namespace: str, tag: str, source_key: str) -> bool:
    """Whether a ClusterStackRelease of the same tag and source lives on in another namespace: the
    download and the rendered charts, kept once per tag and source, are its too."""
    return any(
        other["metadata"]["name"] == tag
        and source_key_of(other) == source_key
        and other["metadata"].get("namespace") != namespace
        and not other["metadata"].get("deletionTimestamp")
        for other in await kube.list(CLUSTER_STACK_RELEASE.api_version, CLUSTER_STACK_RELEASE.kind, "*")
    )


async def _uninstall(scope: ReleaseScope, delete_ordinary: Callable[[], Awaitable[bool]]) -> float | None:
    """Delete what the release applied, with the cluster-class chart's delete hooks around it as
    ``helm uninstall`` runs them: None once done, else the seconds until the finalizer looks again (a
    hook runs, or failed: the deletion waits, as a failed uninstall keeps the release)."""
    try:
        chart = await _class_chart(scope)
    except (HelmError, yaml.YAMLError, SourceError):
        chart = None  # its chart cannot be rendered (its assets or its stack are gone): no hook can run
    if chart is None or not _runs(chart, HookEvent.PRE_DELETE, HookEvent.POST_DELETE):
        await delete_ordinary()
        return None

    async def save(run: dict[str, Any]) -> None:
        await scope.write_progress(CLUSTER_STACK_RELEASE, {"ready": False, "helmHooks": run})

    kept = (scope.obj.get("status") or {}).get("helmHooks")
    return await run_uninstall(
        scope.kube, scope.book, chart, kept, retry_of(scope.obj), delete_ordinary, save
    )


async def wait_while_in_use(scope: ReleaseScope) -> Outcome:
    """A release whose ClusterClass a Cluster uses is not deleted: said, and looked at again."""
    release, name = scope.release, scope.name
    in_use = clusters_by_class(await clusters_using(scope.kube, release.namespace), release.namespace)
    users = sorted(in_use.get(name.cluster_class, set()) | in_use.get(name.tag, set()))
    if not users:
        return Outcome.CONTINUE
    await scope.book.set(
        ConditionType.READY,
        "False",
        Reason.IN_USE,
        f"deletion waits: ClusterClass {name.cluster_class} is used by Cluster {', '.join(users)}",
        warn=EventReason.DELETION_BLOCKED,
    )
    await scope.write_progress(CLUSTER_STACK_RELEASE, {"ready": False})
    return scope.retry_in(IN_USE_RECHECK_SECONDS)


async def delete_what_it_applied(scope: ReleaseScope) -> Outcome:
    """What the release applied deleted, with its class chart's delete hooks around it, its provider
    object, and its download once no other release holds it."""
    obj, release, name, kube = scope.obj, scope.release, scope.name, scope.kube
    deleted: list[str] = []

    async def delete_ordinary() -> bool:
        deleted.extend(await delete_applied(kube, (obj.get("status") or {}).get("resources") or []))
        return True

    waiting = await _uninstall(scope, delete_ordinary)
    if waiting is not None:
        return scope.retry_in(waiting)
    reference = release.spec.provider_ref
    if reference is not None:
        with contextlib.suppress(errors.NotFound):  # its kind is no longer served
            await kube.delete(reference.api_version, reference.kind, reference.name, release.namespace)
    key = source_key_of(obj)
    if not await _held_elsewhere(kube, release.namespace, name.tag, key):
        scope.runtime.forget(name, key)
    if deleted:
        # Awaited, not in the background: the object goes once the finalizer does.
        await scope.book.recorder.emit(
            obj, "Normal", EventReason.OBJECTS_DELETED, f"deleted {', '.join(deleted)}"
        )
    return Outcome.CONTINUE


FINALIZING = Finalizing(ReleaseScope.of, [wait_while_in_use, delete_what_it_applied])
"""Wait while a Cluster uses the release's ClusterClass; then delete what the release applied."""
finalize_release = FINALIZING.finalize
