"""The ClusterStack controller: which releases exist, their provider objects, and the stack's status.

One reconcile (a :class:`StackReconcile` and its :data:`STEPS`) reads everything from the watch
caches (the stack's ClusterStackReleases, the Clusters of its namespace, its provider template) and
the source's last listing (shared by every stack, refreshed each poll interval), lets
:func:`~clusterstack_operator.releases.decide.plan_releases` decide, then creates what is missing (a
release deleted by accident comes back), deletes what is no longer kept, and reports. A reconcile
where nothing changed writes nothing.

It also plays upstream's ClusterAddonCreate controller for its own releases: every Cluster whose
ClusterClass is one of them gets its ClusterAddon (``cluster-addon-<cluster>``, owned by the Cluster).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from clusterstack_operator.api.reasons import ConditionType, EventReason, Reason
from clusterstack_operator.api.v1alpha1 import CLUSTER_ADDON, CLUSTER_STACK, CLUSTER_STACK_RELEASE
from clusterstack_operator.controller.clusters import clusters_by_class, clusters_using
from clusterstack_operator.controller.scope import StackScope, ready_report
from clusterstack_operator.releases.decide import (
    WANTED,
    ExistingRelease,
    ReleasePlan,
    cluster_in,
    clusters_without_addon,
    plan_releases,
)
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
from operator_core.conditions import condition_of
from operator_core.reconciling import Context
from operator_core.steps import ConditionBook, Outcome, Steps

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


def _is_of(release: Mapping[str, Any], stack: Stack) -> bool:
    """Whether ``release`` is ``stack``'s: it carries the stack's labels, or the stack owns it."""
    metadata = release.get("metadata") or {}
    labels = metadata.get("labels") or {}
    if all(labels.get(key) == value for key, value in stack.instance_selector().items()):
        return True
    return any(reference.get("uid") == stack.uid for reference in metadata.get("ownerReferences") or [])


def _timestamp(text: str | None) -> datetime | None:
    return datetime.fromisoformat(text) if text else None


@dataclass(kw_only=True)
class StackReconcile(StackScope):
    """One reconcile of one ClusterStack."""

    stack: Stack
    available: list[ReleaseName] = field(default_factory=list)
    """The source's releases (with auto-subscribe)."""
    published: dict[ReleaseName, datetime] = field(default_factory=dict)
    existing: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Its ClusterStackReleases by name, as read, then as applied."""
    clusters: list[dict[str, Any]] = field(default_factory=list)
    plan: ReleasePlan | None = None
    template: dict[str, Any] | None = None
    """Its provider template, once found valid (None: no provider, or none usable)."""

    @classmethod
    def of(cls, obj: dict[str, Any], context: Context) -> StackReconcile:
        return cls(**StackScope.parts(obj, context), stack=Stack.from_object(obj))

    @property
    def required(self) -> list[str]:
        """The conditions Ready is summarised from: which ones, the spec says (a source's listing only
        with auto-subscribe, provider objects only with a provider), whatever step a reconcile stopped at."""
        spec = self.stack.spec
        return [
            *([ConditionType.RELEASES_SYNCED] if spec.auto_subscribe else []),
            ConditionType.CLUSTER_STACK_RELEASES_SYNCED,
            *([] if spec.no_provider else [ConditionType.PROVIDER_RELEASES_SYNCED]),
            ConditionType.RELEASE_AVAILABLE,
            ConditionType.RELEASES_READY,
        ]

    @property
    def planned(self) -> ReleasePlan:
        """The plan the ``plan`` step made (the steps after it read it)."""
        if self.plan is None:
            raise RuntimeError("the releases are planned by an earlier step")
        return self.plan


async def list_source(scope: StackReconcile) -> Outcome:
    """With auto-subscribe, what the stack's source offers (its last listing: the operator's own source's
    is shared by every stack following it); a source that fails is said in a condition of this stack
    alone, looked at again soon, and the rest goes on with what exists."""
    if not scope.stack.spec.auto_subscribe:
        return Outcome.CONTINUE
    runtime, book = scope.runtime, scope.book
    bound = None
    try:
        bound = await runtime.sources.of_stack(scope.kube, scope.obj)
        offered, until_next_poll = await runtime.releases(bound)
    except SourceError as error:
        if bound is not None:
            await runtime.sources.failed(bound)  # its Secrets are read again at the retry
        await book.set(
            ConditionType.RELEASES_SYNCED,
            "False",
            Reason.FAILED_TO_SYNC,
            str(error),
            warn=EventReason.RELEASE_SOURCE_FAILED,
            warn_on_new_message=True,
        )
        scope.next_look = min(scope.next_look, SOURCE_RETRY_SECONDS)
        return Outcome.CONTINUE
    for offer in offered:
        name = _parsed(offer.tag)
        if name is not None:
            scope.available.append(name)
            if offer.published_at is not None:
                scope.published[name] = offer.published_at
    mine = sum(1 for name in scope.available if scope.stack.identity.owns(name))
    await book.set(
        ConditionType.RELEASES_SYNCED,
        "True",
        Reason.SYNCED,
        f"{bound.source.description} has {mine} release(s) of this stack",
    )
    scope.next_look = min(scope.next_look, max(until_next_poll, 1.0))
    return Outcome.CONTINUE


async def plan(scope: StackReconcile) -> Outcome:
    """Which releases to keep, create and delete (:func:`plan_releases`), from its releases and the
    Clusters of its namespace, read from the caches."""
    stack, kube = scope.stack, scope.kube
    # Its releases: labelled as its own, or owned by it without the labels (made by the upstream
    # operator, which labels nothing: taken over, they are labelled when next applied).
    scope.existing = {
        o["metadata"]["name"]: o
        for o in await kube.list(
            CLUSTER_STACK_RELEASE.api_version, CLUSTER_STACK_RELEASE.kind, stack.namespace
        )
        if _is_of(o, stack)
    }
    existing = [
        ExistingRelease(
            name,
            ready=bool((o.get("status") or {}).get("ready")),
            created=_timestamp(o["metadata"].get("creationTimestamp")),
        )
        for o in scope.existing.values()
        if (name := _parsed(o["metadata"]["name"])) is not None
    ]
    scope.clusters = await clusters_using(kube, stack.namespace)
    scope.plan = plan_releases(
        stack.identity,
        listed=stack.spec.versions,
        auto_subscribe=stack.spec.auto_subscribe,
        available=scope.available,
        published=scope.published,
        existing=existing,
        classes_in_use=clusters_by_class(scope.clusters, stack.namespace),
    )
    return Outcome.CONTINUE


async def find_provider_template(scope: StackReconcile) -> Outcome:
    """The provider template, unless the stack has no provider."""
    if not scope.stack.spec.no_provider:
        scope.template = await _provider_template(scope.kube, scope.stack, scope.book)
    return Outcome.CONTINUE


async def sync_releases(scope: StackReconcile) -> Outcome:
    """Apply the releases kept (and their provider objects), create the new ones, delete the rest."""
    stack, kube, book, template, planned = scope.stack, scope.kube, scope.book, scope.template, scope.planned
    # A release whose provider object cannot be made yet is not created: without its providerRef, its
    # controller would take it for one of a provider without an operator and apply at once.
    creatable = stack.spec.no_provider or template is not None
    wanted = [*planned.keep, *(planned.create if creatable else ())]
    created = []
    for release in wanted:
        provider = provider_reference(template, release, stack.namespace) if template is not None else None
        applied = await kube.apply(build_cluster_stack_release(stack, release, provider))
        scope.existing[release.tag] = applied.object
        if applied.created:
            created.append(release.tag)
        if template is not None:
            await _apply_provider_release(
                kube, template, scope.obj, Release.from_object(applied.object), book
            )
    if created:
        await book.event("Normal", EventReason.CLUSTER_STACK_RELEASE_CREATED, f"created {', '.join(created)}")
    deleted = []
    for release in planned.delete:
        if (scope.existing.get(release.tag) or {}).get("metadata", {}).get("deletionTimestamp"):
            continue  # going already (its clean-up may wait for a Cluster)
        if await kube.delete(
            CLUSTER_STACK_RELEASE.api_version, CLUSTER_STACK_RELEASE.kind, release.tag, stack.namespace
        ):
            deleted.append(release.tag)
        scope.existing.pop(release.tag, None)
    if deleted:
        await book.event(
            "Normal",
            EventReason.CLUSTER_STACK_RELEASE_DELETED,
            f"deleted {', '.join(deleted)} (no longer kept)",
        )
    await book.set(
        ConditionType.CLUSTER_STACK_RELEASES_SYNCED,
        "True",
        Reason.SYNCED,
        f"{len(wanted)} release(s) kept: "
        + ", ".join(f"{tag} ({why})" for tag, why in sorted(planned.why_kept.items()))
        if planned.why_kept
        else "no release is wanted yet",
    )
    return Outcome.CONTINUE


async def create_cluster_addons(scope: StackReconcile) -> Outcome:
    await _create_cluster_addons(scope.kube, scope.stack, scope.clusters, scope.book)
    return Outcome.CONTINUE


async def report_releases(scope: StackReconcile) -> Outcome:
    """The newest ready release, the usable versions and each release's summary."""
    planned, book = scope.planned, scope.book
    ready = [
        name
        for name in (_parsed(n) for n, o in scope.existing.items() if (o.get("status") or {}).get("ready"))
        if name
    ]
    if planned.latest is not None:
        await book.set(
            ConditionType.RELEASE_AVAILABLE, "True", Reason.RELEASE_READY, f"{planned.latest.tag} is ready"
        )
    else:
        await book.set(
            ConditionType.RELEASE_AVAILABLE,
            "False",
            Reason.NO_READY_RELEASE,
            "no release of this stack is ready yet",
        )
    waiting = releases_not_ready(planned, scope.existing)
    if waiting:
        await book.set(
            ConditionType.RELEASES_READY,
            "False",
            waiting[0][1],
            "; ".join(f"{tag}: {message}" for tag, _, message in waiting),
        )
    else:
        await book.set(ConditionType.RELEASES_READY, "True", Reason.RELEASES_READY)
    latest_object = scope.existing.get(planned.latest.tag) if planned.latest is not None else None
    latest = None
    if planned.latest is not None and latest_object is not None:
        kubernetes = (latest_object.get("status") or {}).get("kubernetesVersion")
        latest = (
            f"{planned.latest.cluster_class} | {kubernetes}" if kubernetes else planned.latest.cluster_class
        )
    scope.status |= {
        "latestRelease": latest,
        "usableVersions": usable_versions(ready) or None,
        "summary": [release_summary(o) for _, o in sorted(scope.existing.items())],
    }
    return Outcome.CONTINUE


def releases_not_ready(
    planned: ReleasePlan, existing: Mapping[str, Mapping[str, Any]]
) -> list[tuple[str, str, str]]:
    """The wanted releases that are not ready, each with its Ready condition's reason and message: a
    stack whose newest release is broken says so, even while an older one serves its Clusters."""
    wanted = sorted(
        {tag for tag, why in planned.why_kept.items() if why in WANTED} | {r.tag for r in planned.create}
    )
    waiting = []
    for tag in wanted:
        release = existing.get(tag) or {}
        if (release.get("status") or {}).get("ready"):
            continue
        ready = condition_of(release, ConditionType.READY) or {}
        waiting.append(
            (tag, ready.get("reason") or Reason.PROCESS_ONGOING, ready.get("message") or "not reconciled yet")
        )
    return waiting


STEPS = Steps(
    CLUSTER_STACK,
    StackReconcile.of,
    (list_source, plan, find_provider_template, sync_releases, create_cluster_addons, report_releases),
    ready_report(
        lambda scope: scope.required,
        ready_message="",
        became_ready=EventReason.RELEASE_READY,
        became_not_ready=EventReason.RELEASE_NOT_READY,
    ),
)
reconcile_stack = STEPS.reconcile


async def _create_cluster_addons(
    kube: Any, stack: Stack, clusters: list[dict[str, Any]], book: ConditionBook
) -> None:
    """A ClusterAddon for every Cluster whose ClusterClass is one of this stack's releases, where it has
    none (upstream's ClusterAddonCreate controller): created, not applied, since its spec beyond the
    Cluster's reference is the ClusterAddon controller's to write."""
    # Ours only, from the cache, beside each Cluster (a tenant's too); one made by hand without our
    # labels costs a refused create (409).
    addons = await kube.list(
        CLUSTER_ADDON.api_version, CLUSTER_ADDON.kind, "*", labels={MANAGED_BY_LABEL: MANAGED_BY}
    )
    wanting = clusters_without_addon(
        stack.identity,
        clusters,
        ((a["metadata"]["namespace"], a["metadata"]["name"]) for a in addons),
        cluster_addon_name,
    )
    created = []
    for cluster in wanting:
        try:
            made = await kube.create(build_cluster_addon(cluster, stack))
        except errors.Conflict:
            continue  # made meanwhile (by this reconcile's previous pass, say): there is one, as wanted
        created.append(f"{made['metadata']['name']} for Cluster {cluster_in(cluster, stack.namespace)}")
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
