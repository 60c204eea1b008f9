"""What a ClusterAddon's move to another release means, and what goes from the workload cluster. Pure.

- :func:`what_changes`: whether a Cluster's new class brings new addons: the cluster-addon versions in
  the two releases' ``metadata.yaml`` decide, not the release names (upstream's rule).
- :func:`stale_resources`: what the previous set applied that the new set lacks (deleted there);
- :func:`template_references`: the objects a Cluster names that its addons' values may read, besides
  the Cluster itself (upstream's ``.ControlPlane`` and ``.InfraCluster``).

Who calls it: the ClusterAddon controller.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "AddonChange",
    "ObjectReference",
    "identity",
    "stale_resources",
    "template_references",
    "unreachable_retry_seconds",
    "what_changes",
]


@dataclass(frozen=True)
class AddonChange:
    """What moving to a release means for the addons, in words for an Event and the status."""

    new_addons: bool
    """Whether the objects may differ from those applied: a first apply, or another addon version."""
    message: str


def what_changes(
    applied_stack: str | None, applied_version: str | None, release: str, addon_version: str
) -> AddonChange:
    """From the release whose addons were applied (``applied_stack``, addon ``applied_version``) to
    ``release`` (addon ``addon_version``)."""
    if applied_stack is None or applied_version is None:
        return AddonChange(True, f"applied cluster addons {addon_version} of {release}")
    if applied_stack == release:
        return AddonChange(applied_version != addon_version, "")
    if applied_version == addon_version:
        return AddonChange(
            False,
            f"{release} has the same cluster addons as {applied_stack} ({addon_version}): nothing re-applied",
        )
    return AddonChange(
        True,
        f"updated cluster addons from {applied_version} ({applied_stack}) to {addon_version} ({release})",
    )


def identity(entry: Mapping[str, Any]) -> tuple[str, str, str, str]:
    """(group, kind, namespace, name) of a ``status.resources`` entry: what stays the same object
    across API versions."""
    return (
        str(entry.get("group") or ""),
        str(entry["kind"]),
        str(entry.get("namespace") or ""),
        str(entry["name"]),
    )


def stale_resources(
    previous: Iterable[Mapping[str, Any]], current: Iterable[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """The ``status.resources`` entries of ``previous`` that ``current`` no longer has (by group, kind,
    namespace and name: a new API version of the same object is the same object)."""
    kept = {identity(entry) for entry in current}
    return [dict(entry) for entry in previous if identity(entry) not in kept]


@dataclass(frozen=True)
class ObjectReference:
    """An object a Cluster names: by API version (v1beta1) or by API group only (v1beta2, whose
    served version the API server is asked for)."""

    kind: str
    name: str
    namespace: str
    api_version: str | None = None
    api_group: str | None = None


TEMPLATE_REFERENCES = (("ControlPlane", "controlPlaneRef"), ("InfraCluster", "infrastructureRef"))
"""The names the values templates know the Cluster's referenced objects by (upstream's), and their fields."""


def template_references(cluster: Mapping[str, Any]) -> dict[str, ObjectReference]:
    """Template name -> the object the Cluster's spec names under it (in the Cluster's namespace unless
    the reference says otherwise); references that name no kind or name are left out."""
    spec = cluster.get("spec") or {}
    namespace = str((cluster.get("metadata") or {}).get("namespace") or "")
    found = {}
    for key, field in TEMPLATE_REFERENCES:
        ref = spec.get(field) or {}
        if not ref.get("kind") or not ref.get("name"):
            continue
        found[key] = ObjectReference(
            kind=str(ref["kind"]),
            name=str(ref["name"]),
            namespace=str(ref.get("namespace") or namespace),
            api_version=ref.get("apiVersion") or None,
            api_group=None if ref.get("apiVersion") else str(ref.get("apiGroup") or ""),
        )
    return found


UNREACHABLE_FIRST_RETRY_SECONDS = 5.0
UNREACHABLE_LAST_RETRY_SECONDS = 60.0


def unreachable_retry_seconds(waited: float) -> float:
    """When to ask a workload API server that does not answer again, after ``waited`` seconds of it:
    5 s at first (a control plane coming up answers soon), then half the time waited so far, at most
    a minute (one that stays down is not asked every few seconds for ever). Derived from the
    condition's transition time, so a restarted operator backs off as far as the one before it."""
    return min(UNREACHABLE_LAST_RETRY_SECONDS, max(UNREACHABLE_FIRST_RETRY_SECONDS, waited / 2))
