"""Helm hooks in a rendered addon chart, as ``helm install`` and ``helm upgrade`` run them. Pure.

``helm template`` prints a chart's hooks among its other objects; applied as plain objects, a hook Job
runs beside what it must come before, its delete policy is never honoured, and drift repair makes a
deleted hook again. This module reads the hooks out of the rendered objects and says what Helm 3 does
with them (docs/clusterstack-hooks.md puts the rules side by side with Helm's):

- :func:`split_hooks`: the ordinary objects, the hooks (their events, weight and delete policies), and
  the objects Helm skips (a hook event it does not know);
- :func:`hook_events`: whether a move of the addons is an install, an upgrade, or neither (and
  :func:`events_of`, of a run under way);
- :func:`hooks_for`: the hooks of one event, in the order Helm runs them (by kind, then weight, then
  name);
- :func:`judge_hook`: whether a hook that was made has succeeded, failed, or runs still (a Job until
  its Complete or Failed condition, a Pod until it ends; anything else as soon as it exists);
- :func:`deleted_after`: which hooks go once the event's hooks ran, by their delete policies.

Who calls it: the ClusterAddon controller (the whole chart and each stage).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

__all__ = [
    "DELETE_EVENTS",
    "HOOK_ANNOTATION",
    "DeletePolicy",
    "Hook",
    "HookEvent",
    "HookState",
    "HookVerdict",
    "SplitChart",
    "deleted_after",
    "events_of",
    "hook_events",
    "hooks_for",
    "judge_hook",
    "split_hooks",
]

HOOK_ANNOTATION = "helm.sh/hook"
_WEIGHT_ANNOTATION = "helm.sh/hook-weight"
_DELETE_POLICY_ANNOTATION = "helm.sh/hook-delete-policy"

Manifest = Mapping[str, Any]


class HookEvent(StrEnum):
    """The events of a release's life a hook names (``helm.sh/hook``)."""

    PRE_INSTALL = "pre-install"
    POST_INSTALL = "post-install"
    PRE_UPGRADE = "pre-upgrade"
    POST_UPGRADE = "post-upgrade"
    PRE_DELETE = "pre-delete"
    POST_DELETE = "post-delete"
    PRE_ROLLBACK = "pre-rollback"
    POST_ROLLBACK = "post-rollback"
    TEST = "test"


# Helm 2's name of a test hook, which Helm 3 still reads.
_EVENT_ALIASES = {"test-success": HookEvent.TEST}


class DeletePolicy(StrEnum):
    """When a hook's objects are deleted (``helm.sh/hook-delete-policy``)."""

    BEFORE_HOOK_CREATION = "before-hook-creation"
    HOOK_SUCCEEDED = "hook-succeeded"
    HOOK_FAILED = "hook-failed"


# Helm's install order of kinds: a hook of an earlier kind runs first among hooks of one weight.
_INSTALL_ORDER = (
    "PriorityClass", "Namespace", "NetworkPolicy", "ResourceQuota", "LimitRange", "PodSecurityPolicy",
    "PodDisruptionBudget", "ServiceAccount", "Secret", "SecretList", "ConfigMap", "StorageClass",
    "PersistentVolume", "PersistentVolumeClaim", "CustomResourceDefinition", "ClusterRole",
    "ClusterRoleList", "ClusterRoleBinding", "ClusterRoleBindingList", "Role", "RoleList", "RoleBinding",
    "RoleBindingList", "Service", "DaemonSet", "Pod", "ReplicationController", "ReplicaSet", "Deployment",
    "HorizontalPodAutoscaler", "StatefulSet", "Job", "CronJob", "IngressClass", "Ingress", "APIService",
)  # fmt: skip
_KIND_RANK = {kind: rank for rank, kind in enumerate(_INSTALL_ORDER)}


def _split_list(value: str) -> list[str]:
    return [part.strip().lower() for part in value.split(",") if part.strip()]


@dataclass(frozen=True)
class Hook:
    """One object of a chart that ``helm.sh/hook`` makes a hook."""

    manifest: Manifest
    events: tuple[HookEvent, ...]
    weight: int
    delete_policies: frozenset[DeletePolicy | str]
    """As annotated; ``before-hook-creation`` alone when none is (Helm's default). A policy Helm does
    not know is kept and never matches, as in Helm."""

    @property
    def kind(self) -> str:
        return str(self.manifest.get("kind", ""))

    @property
    def name(self) -> str:
        return str((self.manifest.get("metadata") or {}).get("name", ""))

    @property
    def namespace(self) -> str | None:
        namespace = (self.manifest.get("metadata") or {}).get("namespace")
        return str(namespace) if namespace else None

    @property
    def awaited(self) -> bool:
        """Whether Helm waits for it to end (a Job or a Pod) before the next, rather than only for it
        to exist."""
        return self.kind in ("Job", "Pod")

    def deleted_on(self, policy: DeletePolicy) -> bool:
        """Whether ``policy`` deletes it: never a CustomResourceDefinition (its deletion would take
        every object of its kind with it), as in Helm."""
        return self.kind != "CustomResourceDefinition" and policy in self.delete_policies

    def describe(self) -> str:
        return f"{self.kind} {self.name}"


@dataclass(frozen=True)
class SplitChart:
    """A rendered chart's objects: the ordinary ones, applied (and kept, and pruned) as such; the hooks;
    and what Helm skips, each with why."""

    ordinary: tuple[Manifest, ...]
    hooks: tuple[Hook, ...]
    skipped: tuple[str, ...]


def _weight(annotations: Mapping[str, Any]) -> int:
    """The hook's weight; 0 when it is absent or not an integer, as Helm reads it."""
    try:
        return int(str(annotations.get(_WEIGHT_ANNOTATION, "0")).strip())
    except ValueError:
        return 0


def _policies(annotations: Mapping[str, Any]) -> frozenset[DeletePolicy | str]:
    named = _split_list(str(annotations.get(_DELETE_POLICY_ANNOTATION, "")))
    known = {policy.value: policy for policy in DeletePolicy}
    policies = frozenset(known.get(name, name) for name in named)
    return policies or frozenset({DeletePolicy.BEFORE_HOOK_CREATION})


def split_hooks(objects: Iterable[Manifest]) -> SplitChart:
    """The ordinary objects and the hooks of a rendered chart. An object naming an event Helm does not
    know is skipped whole, as Helm skips it (neither applied nor run), and said."""
    ordinary: list[Manifest] = []
    hooks: list[Hook] = []
    skipped: list[str] = []
    known = {event.value: event for event in HookEvent} | _EVENT_ALIASES
    for obj in objects:
        annotations = (obj.get("metadata") or {}).get("annotations") or {}
        if HOOK_ANNOTATION not in annotations:
            ordinary.append(obj)
            continue
        named = _split_list(str(annotations[HOOK_ANNOTATION]))
        unknown = [name for name in named if name not in known]
        if unknown:
            name = (obj.get("metadata") or {}).get("name", "")
            skipped.append(
                f"{obj.get('kind', '')} {name}: {HOOK_ANNOTATION} names {', '.join(map(repr, unknown))}, "
                f"which Helm does not know (it knows {', '.join(sorted(known))}); skipped, as Helm skips it"
            )
            continue
        events = tuple(dict.fromkeys(known[name] for name in named))
        hooks.append(Hook(obj, events, _weight(annotations), _policies(annotations)))
    return SplitChart(tuple(ordinary), tuple(hooks), tuple(skipped))


_INSTALL = (HookEvent.PRE_INSTALL, HookEvent.POST_INSTALL)
_UPGRADE = (HookEvent.PRE_UPGRADE, HookEvent.POST_UPGRADE)
DELETE_EVENTS = (HookEvent.PRE_DELETE, HookEvent.POST_DELETE)
"""The events of an uninstall: its pre and post event."""


def hook_events(applied_version: str | None, version: str) -> tuple[HookEvent, HookEvent] | None:
    """The (pre, post) events of applying addon ``version``: install when no addons were applied before
    (``applied_version`` None), upgrade when another version was; None when the same version is applied
    again (drift repair, a release with the same addons), which ``helm upgrade`` would not be run for."""
    if applied_version is None:
        return _INSTALL
    if applied_version != version:
        return _UPGRADE
    return None


def events_of(event: str) -> tuple[HookEvent, HookEvent] | None:
    """The (pre, post) events of a run that is at ``event`` (kept in the status); None when done."""
    for pair in (_INSTALL, _UPGRADE, DELETE_EVENTS):
        if event in pair:
            return pair
    return None


def _kind_rank(kind: str) -> tuple[int, str]:
    # Kinds Helm does not order come last, among themselves by name.
    rank = _KIND_RANK.get(kind)
    return (rank, "") if rank is not None else (len(_INSTALL_ORDER), kind)


def hooks_for(hooks: Sequence[Hook], event: HookEvent) -> tuple[Hook, ...]:
    """The hooks of ``event`` in the order Helm runs them: by weight, then by name; among equals, by
    Helm's install order of kinds, then as rendered."""
    chosen = [hook for hook in hooks if event in hook.events]
    by_kind = sorted(chosen, key=lambda hook: _kind_rank(hook.kind))  # stable: as rendered among a kind
    return tuple(sorted(by_kind, key=lambda hook: (hook.weight, hook.name)))


class HookState(StrEnum):
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"


@dataclass(frozen=True)
class HookVerdict:
    state: HookState
    reason: str = ""
    """Why it failed, in the words of its Job's condition or its Pod's status."""


def _condition(obj: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    conditions: list[Mapping[str, Any]] = (obj.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c.get("type") == kind and c.get("status") == "True"), None)


def judge_hook(hook: Hook, live: Mapping[str, Any] | None) -> HookVerdict:
    """Where a hook that was made stands. A Job succeeds with its Complete condition and fails with its
    Failed one; a Pod succeeds or fails with its phase; any other kind succeeds once it exists. One
    that is gone before it ended has failed (deleted by someone else, or by its own TTL)."""
    if live is None:
        return HookVerdict(HookState.FAILED, f"{hook.describe()} is gone before it ended")
    if hook.kind == "Job":
        if _condition(live, "Complete") is not None:
            return HookVerdict(HookState.SUCCEEDED)
        failed = _condition(live, "Failed")
        if failed is not None:
            words = " ".join(part for part in (failed.get("reason"), failed.get("message")) if part)
            return HookVerdict(HookState.FAILED, f"Job {hook.name} failed: {words or 'no reason given'}")
        return HookVerdict(HookState.RUNNING)
    if hook.kind == "Pod":
        status = live.get("status") or {}
        phase = status.get("phase")
        if phase == "Succeeded":
            return HookVerdict(HookState.SUCCEEDED)
        if phase == "Failed":
            words = " ".join(part for part in (status.get("reason"), status.get("message")) if part)
            return HookVerdict(HookState.FAILED, f"Pod {hook.name} failed: {words or 'no reason given'}")
        return HookVerdict(HookState.RUNNING)
    return HookVerdict(HookState.SUCCEEDED)


def deleted_after(ran: Sequence[Hook], failed: Hook | None = None) -> tuple[Hook, ...]:
    """The hooks to delete once an event's hooks ran, as Helm deletes them: when all succeeded, each
    with ``hook-succeeded``, the last run first; when ``failed`` failed, it with ``hook-failed``, and
    the ones that succeeded before it with ``hook-succeeded``. ``ran`` are the hooks run, in order
    (``failed`` last among them when given)."""
    if failed is None:
        return tuple(hook for hook in reversed(ran) if hook.deleted_on(DeletePolicy.HOOK_SUCCEEDED))
    before = [hook for hook in ran if hook is not failed]
    return (
        *((failed,) if failed.deleted_on(DeletePolicy.HOOK_FAILED) else ()),
        *(hook for hook in before if hook.deleted_on(DeletePolicy.HOOK_SUCCEEDED)),
    )
