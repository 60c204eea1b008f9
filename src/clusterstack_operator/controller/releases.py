"""The ClusterStackRelease controller: download, wait for the provider, render, apply, report; and clean up.

A reconcile goes step by step, and stops at the first that cannot go on, saying why in its
condition: the release's assets (downloaded whole or not at all), its provider object's
``status.ready`` (none with no provider), the cluster-class chart rendered by ``helm template``,
then every rendered object applied and its sync status recorded in ``status.resources``. The
applied objects are held in the watch caches (an informer per kind, made when first needed): one
edited or deleted by hand wakes its release, and the next apply restores it.

On deletion (finalizer ``clusterstackrelease.clusterstack.x-k8s.io``, upstream's), the release waits
while a Cluster uses its ClusterClass, saying so; then it deletes what it applied.
"""

from __future__ import annotations

import contextlib
from typing import Any

import yaml

from clusterstack_operator.api.reasons import ConditionType, EventReason, Reason
from clusterstack_operator.api.v1alpha1 import CLUSTER_STACK_RELEASE
from clusterstack_operator.controller.common import (
    apply_and_record,
    capi_book,
    clusters_by_class,
    clusters_of,
    delete_applied,
    report_template_failure,
    write_capi_status,
    write_ready_status,
)
from clusterstack_operator.controller.runtime import RUNTIME, StackRuntime
from clusterstack_operator.helm import HelmError
from clusterstack_operator.releases.assets import InvalidRelease, ReleaseMetadata
from clusterstack_operator.releases.versions import InvalidVersion, ReleaseName
from clusterstack_operator.resources import MANAGED_BY, Release, applied_objects, rendered_objects
from clusterstack_operator.sources.base import SourceError
from operator_core import errors
from operator_core.cache import WatchedKind
from operator_core.children import MANAGED_BY_LABEL
from operator_core.controller import FINALIZED
from operator_core.reconciling import WAIT_FOR_CHANGE, Context
from operator_core.steps import ConditionBook

__all__ = ["FINALIZER", "finalize_release", "reconcile_release"]

FINALIZER = "clusterstackrelease.clusterstack.x-k8s.io"
APPLY_RETRY_SECONDS = 20.0
IN_USE_RECHECK_SECONDS = 60.0
REQUIRED = (ConditionType.DOWNLOADED, ConditionType.PROVIDER_READY, ConditionType.HELM_CHART_APPLIED)


def _release_of(obj: dict[str, Any]) -> tuple[Release, ReleaseName]:
    release = Release.from_object(obj)
    try:
        return release, ReleaseName.parse(release.name)
    except InvalidVersion as error:
        raise errors.InvalidSpec(f"ClusterStackRelease {release.name}: {error}") from None


async def reconcile_release(obj: dict[str, Any], context: Context) -> float:
    runtime: StackRuntime = context.extras[RUNTIME]
    release, name = _release_of(obj)
    book = capi_book(obj, context.recorder)
    fields: dict[str, Any] = {"observedGeneration": obj["metadata"].get("generation")}
    delay = context.settings.resync_seconds
    try:
        metadata = await _download(runtime, name, book)
        if metadata is None:
            return delay
        fields["kubernetesVersion"] = metadata.kubernetes_version
        if not await _provider_ready(context, release, book):
            return WAIT_FOR_CHANGE  # the provider object's change wakes the release
        resources, failed = await _apply(context, runtime, release, name, book)
        fields["resources"] = resources
        if failed:
            delay = APPLY_RETRY_SECONDS
        return delay
    finally:
        await write_ready_status(
            context.kube,
            CLUSTER_STACK_RELEASE,
            obj,
            book,
            fields,
            REQUIRED,
            ready_message="ClusterClass applied",
            became_ready=EventReason.RELEASE_READY,
            became_not_ready=EventReason.RELEASE_NOT_READY,
        )


async def _download(runtime: StackRuntime, name: ReleaseName, book: ConditionBook) -> ReleaseMetadata | None:
    """The release's metadata once its assets are here whole; None when they are broken (said in a
    condition). A failed download is raised, for the loop's back-off, after saying so."""
    try:
        if runtime.store.has(name):
            metadata = runtime.store.metadata(name)
        else:
            await book.set(
                ConditionType.DOWNLOADED,
                "False",
                Reason.NOT_DOWNLOADED_YET,
                f"downloading from {runtime.source.description}",
            )
            metadata = await runtime.store.fetch(name, runtime.source)
    except SourceError as error:
        await book.set(
            ConditionType.DOWNLOADED,
            "False",
            Reason.NOT_DOWNLOADED_YET,
            f"download from {runtime.source.description} failed, retrying: {error}",
            warn=EventReason.DOWNLOAD_FAILED,
            warn_on_new_message=True,
        )
        raise
    except InvalidRelease as error:
        # The store kept nothing of it: the next look downloads it afresh (a release fixed on the source).
        await book.set(
            ConditionType.DOWNLOADED,
            "False",
            Reason.ISSUE_WITH_ASSETS,
            str(error),
            warn=EventReason.VALIDATE_HELM_CHART_FAILED,
            warn_on_new_message=True,
        )
        return None
    await book.set(ConditionType.DOWNLOADED, "True", Reason.DOWNLOADED, f"release {name.tag} is downloaded")
    return metadata


async def _provider_ready(context: Context, release: Release, book: ConditionBook) -> bool:
    reference = release.spec.provider_ref
    if reference is None:
        await book.set(
            ConditionType.PROVIDER_READY, "True", Reason.NO_PROVIDER, "the stack has no provider object"
        )
        return True
    kube = context.kube
    if kube.cache is not None:
        kube.cache.ensure(WatchedKind(reference.api_version, reference.kind, {MANAGED_BY_LABEL: MANAGED_BY}))
    what = f"{reference.kind} {reference.name}"
    try:
        provider = await kube.get(reference.api_version, reference.kind, reference.name, release.namespace)
    except errors.NotFound:
        provider = None
        what = f"{what} (its kind is not served: install the provider's CRDs)"
    if provider is None:
        await book.set(
            ConditionType.PROVIDER_READY, "False", Reason.PROCESS_ONGOING, f"{what} does not exist yet"
        )
        return False
    if (provider.get("status") or {}).get("ready") is not True:
        await book.set(
            ConditionType.PROVIDER_READY,
            "False",
            Reason.PROCESS_ONGOING,
            f"{what} is not ready yet (status.ready)",
        )
        return False
    await book.set(ConditionType.PROVIDER_READY, "True", Reason.PROVIDER_READY, f"{what} is ready")
    return True


async def _apply(
    context: Context, runtime: StackRuntime, release: Release, name: ReleaseName, book: ConditionBook
) -> tuple[list[dict[str, Any]], bool]:
    """Render and apply the chart's objects, each on its own: one refused does not hold up the others."""
    kube = context.kube
    try:
        rendered = await runtime.rendered(name, release.namespace)
        objects = applied_objects(rendered_objects(rendered, release.namespace), release)
    except (HelmError, yaml.YAMLError) as error:
        await report_template_failure(book, error)
        return [], True
    return await apply_and_record(kube, objects, book, name.cluster_class_chart, watch=True)


async def finalize_release(obj: dict[str, Any], context: Context) -> float:
    """Wait while a Cluster uses the release's ClusterClass; then delete what the release applied."""
    runtime: StackRuntime = context.extras[RUNTIME]
    release, name = _release_of(obj)
    kube = context.kube
    in_use = clusters_by_class(await clusters_of(kube, release.namespace))
    users = sorted(in_use.get(name.cluster_class, set()) | in_use.get(name.tag, set()))
    if users:
        book = capi_book(obj, context.recorder)
        await book.set(
            ConditionType.READY,
            "False",
            Reason.IN_USE,
            f"deletion waits: ClusterClass {name.cluster_class} is used by Cluster {', '.join(users)}",
            warn=EventReason.DELETION_BLOCKED,
        )
        await write_capi_status(kube, CLUSTER_STACK_RELEASE, obj, book, {"ready": False})
        return IN_USE_RECHECK_SECONDS
    deleted = await delete_applied(kube, (obj.get("status") or {}).get("resources") or [])
    reference = release.spec.provider_ref
    if reference is not None:
        with contextlib.suppress(errors.NotFound):  # its kind is no longer served
            await kube.delete(reference.api_version, reference.kind, reference.name, release.namespace)
    runtime.forget(name)
    if deleted:
        await context.recorder.emit(
            obj, "Normal", EventReason.OBJECTS_DELETED, f"deleted {', '.join(deleted)}"
        )
    return FINALIZED
