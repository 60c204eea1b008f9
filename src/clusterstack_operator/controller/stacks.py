"""The ClusterStack controller: which releases exist, their provider objects, and the stack's status.

One reconcile reads everything from the watch caches (the stack's ClusterStackReleases, the
Clusters of its namespace, its provider template) and the source's last listing (shared by every
stack, refreshed each poll interval), lets :func:`~clusterstack_operator.releases.decide.plan_releases`
decide, then creates what is missing (a release deleted by accident comes back), deletes what is no
longer kept, and reports. A reconcile where nothing changed writes nothing.

It also plays upstream's ClusterAddonCreate controller for its own releases: every Cluster whose
ClusterClass is one of them gets its ClusterAddon (``cluster-addon-<cluster>``, owned by the Cluster).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from clusterstack_operator.api.reasons import ConditionType, EventReason, Reason
from clusterstack_operator.api.v1alpha1 import CLUSTER_ADDON, CLUSTER_STACK, CLUSTER_STACK_RELEASE
from clusterstack_operator.controller.common import (
    capi_book,
    clusters_by_class,
    clusters_of,
    write_capi_status,
)
from clusterstack_operator.controller.runtime import RUNTIME, StackRuntime
from clusterstack_operator.releases.decide import ExistingRelease, clusters_without_addon, plan_releases
from clusterstack_operator.releases.versions import InvalidVersion, ReleaseName
from clusterstack_operator.resources import (
    MANAGED_BY,
    InvalidTemplate,
    Release,
    Stack,
    build_cluster_addon,
    build_cluster_stack_release,
    build_provider_release,
    check_template,
    cluster_addon_name,
    provider_reference,
    release_summary,
    usable_versions,
)
from clusterstack_operator.sources.base import SourceError
from operator_core import errors
from operator_core.cache import WatchedKind
from operator_core.children import MANAGED_BY_LABEL
from operator_core.conditions import summarize_ready
from operator_core.reconciling import Context
from operator_core.steps import ConditionBook

__all__ = ["provider_template_of", "reconcile_stack"]

SOURCE_RETRY_SECONDS = 15.0


def provider_template_of(obj: Mapping[str, Any]) -> list[tuple[str, str]]:
    """What a ClusterStack names: its provider template (its change wakes the stack)."""
    reference = (obj.get("spec") or {}).get("providerRef") or {}
    return [(reference["kind"], reference["name"])] if reference.get("kind") and reference.get("name") else []


def _parsed(name: str) -> ReleaseName | None:
    try:
        return ReleaseName.parse(name)
    except InvalidVersion:
        return None


async def reconcile_stack(obj: dict[str, Any], context: Context) -> float:
    runtime: StackRuntime = context.extras[RUNTIME]
    kube = context.kube
    stack = Stack.from_object(obj)
    book = capi_book(obj, context.recorder)
    next_look = context.settings.resync_seconds
    required = [ConditionType.CLUSTER_STACK_RELEASES_SYNCED]

    available: list[ReleaseName] = []
    published: dict[ReleaseName, datetime] = {}
    if stack.spec.auto_subscribe:
        required.insert(0, ConditionType.RELEASES_SYNCED)
        try:
            offered, until_next_poll = await runtime.releases()
        except SourceError as error:
            await book.set(
                ConditionType.RELEASES_SYNCED,
                "False",
                Reason.FAILED_TO_SYNC,
                str(error),
                warn=EventReason.RELEASE_SOURCE_FAILED,
                warn_on_new_message=True,
            )
            next_look = min(next_look, SOURCE_RETRY_SECONDS)
        else:
            for offer in offered:
                name = _parsed(offer.tag)
                if name is not None:
                    available.append(name)
                    if offer.published_at is not None:
                        published[name] = offer.published_at
            mine = sum(1 for name in available if stack.identity.owns(name))
            await book.set(
                ConditionType.RELEASES_SYNCED,
                "True",
                Reason.SYNCED,
                f"{runtime.source.description} has {mine} release(s) of this stack",
            )
            next_look = min(next_look, max(until_next_poll, 1.0))

    existing_objects = {
        o["metadata"]["name"]: o
        for o in await kube.list(
            CLUSTER_STACK_RELEASE.api_version,
            CLUSTER_STACK_RELEASE.kind,
            stack.namespace,
            labels=stack.instance_selector(),
        )
    }
    existing = [
        ExistingRelease(name, ready=bool((o.get("status") or {}).get("ready")))
        for o in existing_objects.values()
        if (name := _parsed(o["metadata"]["name"])) is not None
    ]
    clusters = await clusters_of(kube, stack.namespace)
    in_use = clusters_by_class(clusters)
    plan = plan_releases(
        stack.identity,
        listed=stack.spec.versions,
        auto_subscribe=stack.spec.auto_subscribe,
        available=available,
        published=published,
        existing=existing,
        classes_in_use=in_use,
    )

    template = None
    if not stack.spec.no_provider:
        required.append(ConditionType.PROVIDER_RELEASES_SYNCED)
        template = await _provider_template(kube, stack, book)

    # A release whose provider object cannot be made yet is not created: without its providerRef, its
    # controller would take it for one of a provider without an operator and apply at once.
    creatable = stack.spec.no_provider or template is not None
    wanted = [*plan.keep, *(plan.create if creatable else ())]
    created = []
    for release in wanted:
        provider = provider_reference(template, release, stack.namespace) if template is not None else None
        applied = await kube.apply(build_cluster_stack_release(stack, release, provider))
        existing_objects[release.tag] = applied.object
        if applied.created:
            created.append(release.tag)
        if template is not None:
            await _apply_provider_release(kube, template, obj, Release.from_object(applied.object), book)
    if created:
        await book.event("Normal", EventReason.CLUSTER_STACK_RELEASE_CREATED, f"created {', '.join(created)}")
    deleted = []
    for release in plan.delete:
        if (existing_objects.get(release.tag) or {}).get("metadata", {}).get("deletionTimestamp"):
            continue  # going already (its clean-up may wait for a Cluster)
        if await kube.delete(
            CLUSTER_STACK_RELEASE.api_version, CLUSTER_STACK_RELEASE.kind, release.tag, stack.namespace
        ):
            deleted.append(release.tag)
        existing_objects.pop(release.tag, None)
    if deleted:
        await book.event(
            "Normal",
            EventReason.CLUSTER_STACK_RELEASE_DELETED,
            f"deleted {', '.join(deleted)} (no longer kept)",
        )
    await _create_cluster_addons(kube, stack, clusters, book)
    await book.set(
        ConditionType.CLUSTER_STACK_RELEASES_SYNCED,
        "True",
        Reason.SYNCED,
        f"{len(wanted)} release(s) kept: "
        + ", ".join(f"{tag} ({why})" for tag, why in sorted(plan.why_kept.items()))
        if plan.why_kept
        else "no release is wanted yet",
    )

    ready = [
        name
        for name in (_parsed(n) for n, o in existing_objects.items() if (o.get("status") or {}).get("ready"))
        if name
    ]
    if plan.latest is not None:
        await book.set(
            ConditionType.RELEASE_AVAILABLE, "True", Reason.RELEASE_READY, f"{plan.latest.tag} is ready"
        )
    else:
        await book.set(
            ConditionType.RELEASE_AVAILABLE,
            "False",
            Reason.NO_READY_RELEASE,
            "no release of this stack is ready yet",
        )
    required.append(ConditionType.RELEASE_AVAILABLE)
    status, reason, message = summarize_ready(book.conditions, required)
    await book.set_ready(
        status,
        reason,
        message,
        became_ready=EventReason.RELEASE_READY,
        became_not_ready=EventReason.RELEASE_NOT_READY,
    )
    latest_object = existing_objects.get(plan.latest.tag) if plan.latest is not None else None
    latest = None
    if plan.latest is not None and latest_object is not None:
        kubernetes = (latest_object.get("status") or {}).get("kubernetesVersion")
        latest = f"{plan.latest.cluster_class} | {kubernetes}" if kubernetes else plan.latest.cluster_class
    await write_capi_status(
        kube,
        CLUSTER_STACK,
        obj,
        book,
        {
            "latestRelease": latest,
            "usableVersions": usable_versions(ready) or None,
            "summary": [release_summary(o) for _, o in sorted(existing_objects.items())],
            "observedGeneration": obj["metadata"].get("generation"),
        },
    )
    return next_look


async def _create_cluster_addons(
    kube: Any, stack: Stack, clusters: list[dict[str, Any]], book: ConditionBook
) -> None:
    """A ClusterAddon for every Cluster whose ClusterClass is one of this stack's releases, where it has
    none (upstream's ClusterAddonCreate controller): created, not applied, since its spec beyond the
    Cluster's reference is the ClusterAddon controller's to write."""
    # Ours only, from the cache; one made by hand without our labels costs a refused create (409).
    addons = await kube.list(
        CLUSTER_ADDON.api_version, CLUSTER_ADDON.kind, stack.namespace, labels={MANAGED_BY_LABEL: MANAGED_BY}
    )
    wanting = clusters_without_addon(
        stack.identity, clusters, (a["metadata"]["name"] for a in addons), cluster_addon_name
    )
    created = []
    for cluster in wanting:
        try:
            made = await kube.create(build_cluster_addon(cluster, stack))
        except errors.Conflict:
            continue  # made meanwhile (by this reconcile's previous pass, say): there is one, as wanted
        created.append(f"{made['metadata']['name']} for Cluster {cluster['metadata']['name']}")
    if created:
        await book.event("Normal", EventReason.CLUSTER_ADDON_CREATED, f"created {', '.join(created)}")


async def _provider_template(kube: Any, stack: Stack, book: ConditionBook) -> dict[str, Any] | None:
    """The stack's ProviderClusterStackReleaseTemplate, from the cache; None (and why, in a condition)."""
    reference = stack.spec.provider_ref
    assert reference is not None  # the CRD requires it unless noProvider
    namespace = reference.namespace or stack.namespace
    if kube.cache is not None:
        kube.cache.ensure(WatchedKind(reference.api_version, reference.kind))
    try:
        template = await kube.get(reference.api_version, reference.kind, reference.name, namespace)
    except errors.NotFound:
        await book.set(
            ConditionType.PROVIDER_RELEASES_SYNCED,
            "False",
            Reason.PROVIDER_KIND_NOT_SERVED,
            f"kind {reference.kind} of {reference.api_version} is not served: install the provider's CRDs",
            warn=EventReason.PROVIDER_TEMPLATE_NOT_FOUND,
        )
        return None
    if template is None:
        await book.set(
            ConditionType.PROVIDER_RELEASES_SYNCED,
            "False",
            Reason.PROVIDER_TEMPLATE_NOT_FOUND,
            f"{reference.kind} {namespace}/{reference.name} (spec.providerRef) does not exist",
            warn=EventReason.PROVIDER_TEMPLATE_NOT_FOUND,
        )
        return None
    try:
        check_template(template)
    except InvalidTemplate as error:
        await book.set(
            ConditionType.PROVIDER_RELEASES_SYNCED,
            "False",
            Reason.INVALID_PROVIDER_TEMPLATE,
            str(error),
            warn=EventReason.PROVIDER_TEMPLATE_NOT_FOUND,
        )
        return None
    await book.set(
        ConditionType.PROVIDER_RELEASES_SYNCED,
        "True",
        Reason.SYNCED,
        f"provider objects follow {reference.kind} {reference.name}",
    )
    return dict(template)


async def _apply_provider_release(
    kube: Any, template: Mapping[str, Any], stack: Mapping[str, Any], release: Release, book: ConditionBook
) -> None:
    provider = build_provider_release(template, stack, release)  # checked by _provider_template
    if kube.cache is not None:
        kube.cache.ensure(
            WatchedKind(provider["apiVersion"], provider["kind"], {MANAGED_BY_LABEL: MANAGED_BY})
        )
    try:
        applied = await kube.apply(provider)
    except errors.KubeError as error:
        await book.set(
            ConditionType.PROVIDER_RELEASES_SYNCED,
            "False",
            Reason.FAILED_TO_CREATE_OR_UPDATE,
            f"{provider['kind']} {release.name}: {error}",
            warn=EventReason.PROVIDER_TEMPLATE_NOT_FOUND,
            warn_on_new_message=True,
        )
        return
    if applied.written:
        verb = "created" if applied.created else "updated"
        await book.event(
            "Normal", EventReason.CREATE_PROVIDER_STACK_RELEASE, f"{verb} {provider['kind']} {release.name}"
        )
