"""The one way to bring an object's children to the desired set, and to report a spec its model refuses.

:func:`apply_report_prune`: server-side apply each child, all at once in two waves (quiet when the
cached child already matches), one Event per step taken (created, updated, deleted) naming its
children, the ``ChildrenApplied`` condition, and exactly one Warning when a failure starts or
changes, not one per retry; then delete the owner's children that the desired set no longer names.
What a failure then costs (back-off, or waiting for a change) is
:func:`operator_core.errors.retry_policy`'s to say. :func:`report_invalid_spec`: a spec that its model
refuses (:class:`~operator_core.errors.InvalidSpec`) is Ready=False, reason InvalidSpec, and one
Warning; :func:`report_unwatchable`: a kind its controller needs and may not watch
(:class:`~operator_core.errors.Unwatchable`) is Ready=False, reason WatchForbidden, and one Warning.

:func:`apply_each` is the one variant, for objects a chart renders whose outcomes are recorded one
by one (the Cluster Stack operator's): each applied on its own, nothing raised, no prune, no Event.

Who calls it: the operators' ``controller`` rooms.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from operator_core import errors
from operator_core.cache import Informer, WatchedKind, settled_within
from operator_core.children import (
    CHILDREN_APPLIED,
    OWNER_NAMESPACE_LABEL,
    Manifest,
    Owner,
    StepEventReason,
    stale_children,
)
from operator_core.conditions import READY
from operator_core.crdgen import CustomResource
from operator_core.kube import ALL, ApplyResult, Kube
from operator_core.manifests import merge_patch
from operator_core.reconciling import Context
from operator_core.steps import ConditionBook, write_status

__all__ = [
    "RUNS_PODS",
    "UNREAD_BY_STARTING_PODS",
    "WATCH_SETTLE_SECONDS",
    "ObjectApplied",
    "apply_each",
    "apply_report_prune",
    "owned_children",
    "report_invalid_spec",
    "report_unwatchable",
]


async def report_invalid_spec(
    context: Context, resource: CustomResource, obj: dict[str, Any], error: errors.InvalidSpec
) -> None:
    """Ready=False with reason InvalidSpec and the model's complaint, and one Warning when it is new.

    The loop then waits for the object to change (:func:`operator_core.errors.retry_policy`).
    """
    await _report_not_ready(context, resource, obj, StepEventReason.INVALID_SPEC, str(error))


async def report_unwatchable(
    context: Context, resource: CustomResource, obj: dict[str, Any], error: errors.Unwatchable
) -> None:
    """Ready=False with reason WatchForbidden, naming each kind and the API server's refusal (which names
    the missing permission), and one Warning when it is new. The loop backs off and looks again."""
    await _report_not_ready(context, resource, obj, StepEventReason.WATCH_FORBIDDEN, str(error))


async def _report_not_ready(
    context: Context, resource: CustomResource, obj: dict[str, Any], reason: StepEventReason, message: str
) -> None:
    """Ready=False with ``reason`` (also the Warning's) and ``message``; status written only if it changed."""
    book = ConditionBook.of(obj, context.recorder, resource.conditions)
    await book.set(READY, "False", reason.value, message, warn=reason)
    current = (obj.get("status") or {}).get("conditions") or []
    wanted = book.wire()
    if merge_patch({"c": current}, {"c": wanted}):
        await write_status(context.kube, resource, obj, {"conditions": wanted})


RUNS_PODS = frozenset({"Pod", "StatefulSet", "Deployment", "DaemonSet", "ReplicaSet", "Job", "CronJob"})
"""Kinds whose pods read the other children: applied after them."""

UNREAD_BY_STARTING_PODS = frozenset(
    {"Service", "PodDisruptionBudget", "Ingress", "PodMonitor", "ServiceMonitor"}
)
"""Kinds that no pod of ours reads as it starts (they reach it by DNS, or govern it from outside): applied
with the pods, not before them. A Service costs the API server a ClusterIP allocation, often the slowest
write of a reconcile, and the pods need not wait for it. (Our containers read no ``*_SERVICE_HOST``.)"""


async def _outcome(write: Awaitable[ApplyResult]) -> ApplyResult | errors.KubeError:
    """What one child's write came to: its result, or the API server's refusal (reported with the rest)."""
    try:
        return await write
    except errors.KubeError as error:
        return error


async def _create(kube: Kube, manifest: Manifest) -> ApplyResult:
    return ApplyResult(await kube.create(manifest), written=True, created=True)


async def apply_report_prune(
    kube: Kube,
    book: ConditionBook,
    owner: Owner[Any],
    desired: Sequence[Manifest],
    prunable: Iterable[tuple[str, str]],
    prunable_elsewhere: Iterable[tuple[str, str]] = (),
    create_once: Sequence[tuple[Manifest, str]] = (),
) -> None:
    """Apply ``desired``, report it, and delete the owner's children of ``prunable`` kinds it no longer names.

    The children are applied concurrently, each quiet when the cached child already
    matches. One Normal Event per step taken (Created, Updated, Deleted) names its children:
    a dozen children cost one Event, not a dozen. An owner's first apply posts no Created Event:
    making a new owner's children is what its user just asked for, not news, and would cost every new
    object a write (``ChildrenApplied`` says how many were applied); a child made again later (someone
    deleted it) is news and is announced. A failed apply
    sets ``ChildrenApplied=False`` (reason ``ApplyFailed``, the child and the error in
    the message), posts one Warning when that failure starts or changes (not on every
    retry), and is raised again for the loop's error policy. A prunable kind that is not
    served (its CRD is not installed) has nothing to prune. Children of a ``prunable_elsewhere``
    kind live in other namespaces than the owner's: they carry :data:`OWNER_NAMESPACE_LABEL` and are
    looked for in every namespace. ``create_once`` holds children that are created, never applied (a
    generated key's Secret must never be replaced), each with what it is for the Created Event: they
    go with the first wave, and a 409 (made meanwhile by someone else) fails the reconcile like a
    refused apply, so that the next one reads what is there.
    """
    # Children are applied all at once, in two waves: what runs pods comes after what pods read (their
    # ConfigMaps and Secrets), so that no pod starts before its configuration exists.
    later = RUNS_PODS | UNREAD_BY_STARTING_PODS
    waves = [
        [manifest for manifest in desired if manifest["kind"] not in later],
        [manifest for manifest in desired if manifest["kind"] in later],
    ]
    results: list[ApplyResult | errors.KubeError] = []
    applied: list[Manifest] = []
    changed: dict[StepEventReason, list[str]] = {StepEventReason.CREATED: [], StepEventReason.UPDATED: []}
    notes = {id(manifest): f" ({why})" for manifest, why in create_once}
    first_apply = book.get(CHILDREN_APPLIED) is None
    for number, wave in enumerate(waves):
        created = [manifest for manifest, _ in create_once] if number == 0 else []
        results.extend(
            await asyncio.gather(
                *(_outcome(_create(kube, manifest)) for manifest in created),
                *(_outcome(kube.apply(manifest)) for manifest in wave),
            )
        )
        applied.extend([*created, *wave])
        if any(isinstance(result, errors.KubeError) for result in results):
            break
    for manifest, result in zip(applied, results, strict=True):
        what = f"{manifest['kind']} {manifest['metadata']['name']}"
        if isinstance(result, errors.KubeError):
            await book.set(
                CHILDREN_APPLIED,
                "False",
                StepEventReason.APPLY_FAILED,
                f"{what}: {result}",
                warn=StepEventReason.APPLY_FAILED,
                warn_on_new_message=True,
            )
            raise result
        if result.written:
            step = StepEventReason.CREATED if result.created else StepEventReason.UPDATED
            changed[step].append(what + notes.get(id(manifest), ""))
    for reason, children in changed.items():
        if children and not (first_apply and reason is StepEventReason.CREATED):
            await book.event("Normal", reason, _listed(reason, children))
    await book.set(CHILDREN_APPLIED, "True", "Applied", f"{len(desired)} objects applied")
    kinds = list(prunable)
    elsewhere = list(prunable_elsewhere)
    live = await owned_children(kube, owner, kinds) + await owned_children(
        kube, owner, elsewhere, anywhere=True
    )
    deleted = []
    for stale in stale_children(desired, live, kinds + elsewhere):
        metadata = stale["metadata"]
        name, namespace = metadata["name"], metadata.get("namespace", owner.namespace)
        if await kube.delete(stale["apiVersion"], stale["kind"], name, namespace):
            deleted.append(
                f"{stale['kind']} {name}" + ("" if namespace == owner.namespace else f" in {namespace}")
            )
    if deleted:
        await book.event("Normal", StepEventReason.DELETED, _listed(StepEventReason.DELETED, deleted))


WATCH_SETTLE_SECONDS = 5.0
"""How long :func:`apply_each` waits for the cache of a kind it meets for the first time to list (or be
refused): long enough for a first list, so that a kind the operator may not watch is reported on the
first pass, not after a success that was not one."""


@dataclass(frozen=True)
class ObjectApplied:
    """What applying one object of :func:`apply_each` came to."""

    manifest: Manifest
    problems: tuple[str, ...] = ()
    """Why it is not in place (the API server's refusal), or not watched (RBAC forbids its kind's watch);
    none when it is applied and watched."""


async def apply_each(
    kube: Kube, objects: Sequence[Manifest], *, watch_labels: Mapping[str, str] | None = None
) -> list[ObjectApplied]:
    """The variant of :func:`apply_report_prune` for objects that a chart renders (the Cluster Stack
    operator's releases and addons), where each object's outcome is the owner's status, not one
    condition: each is applied on its own, in order, and a refusal is recorded and does not stop the
    others (nothing is raised); there is no prune (the caller knows what it applied before) and no
    Event (the caller's condition says what failed). With ``watch_labels``, the cache holds each kind
    from now on with those labels (an object deleted or changed by hand wakes its owner), and an object
    of a kind that RBAC does not let the operator watch is a problem too, naming the refusal."""
    informers: dict[int, Informer] = {}
    if watch_labels is not None and kube.cache is not None:
        for index, manifest in enumerate(objects):
            wanted = WatchedKind(manifest["apiVersion"], manifest["kind"], dict(watch_labels))
            informers[index] = kube.cache.ensure(wanted)
        await settled_within(informers.values(), WATCH_SETTLE_SECONDS)
    outcomes = []
    for index, manifest in enumerate(objects):
        problems = []
        try:
            await kube.apply(manifest)
        except errors.KubeError as error:
            problems.append(str(error))
        forbidden = informers[index].forbidden if index in informers else None
        if forbidden is not None:
            problems.append(f"the operator may not watch {manifest['kind']} objects: {forbidden}")
        outcomes.append(ObjectApplied(manifest, tuple(problems)))
    return outcomes


async def owned_children(
    kube: Kube, owner: Owner[Any], kinds: Iterable[tuple[str, str]], *, anywhere: bool = False
) -> list[Manifest]:
    """The owner's live children of ``kinds``, each with its apiVersion and kind: in the owner's
    namespace, or (``anywhere``) in every namespace, labelled with the owner's namespace. A kind that
    is not served (its CRD is not installed) has none."""
    selector = owner.instance_selector()
    if anywhere:
        selector = {**selector, OWNER_NAMESPACE_LABEL: owner.namespace}
    live: list[Manifest] = []
    for api_version, kind in kinds:
        try:
            found = await kube.list(api_version, kind, ALL if anywhere else owner.namespace, labels=selector)
        except errors.NotFound:
            continue
        live.extend({**item, "apiVersion": api_version, "kind": kind} for item in found)
    return live


def _listed(reason: StepEventReason, children: Sequence[str]) -> str:
    """One Event's note for every child of one reconcile that took the same step."""
    return f"{reason.lower()} {', '.join(children)}"
