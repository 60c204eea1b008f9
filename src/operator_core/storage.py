"""Growing the volumes of a StatefulSet: whether a larger size can be had, and the patches that ask
for it. Pure but for :func:`expansion_allowed`, the one read of a StorageClass: the controllers read the
claims, and apply what is decided here.

Kubernetes grows a bound PersistentVolumeClaim when its StorageClass says
``allowVolumeExpansion: true``; a StatefulSet's ``volumeClaimTemplates`` never change, so an operator
that wants the template to say the new size as well must recreate the StatefulSet (orphaning its
pods). Who calls it: the Monocle and Typesense controllers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from enum import Enum
from typing import Any, Protocol

from operator_core.children import Manifest
from operator_core.quantity import BINARY_SUFFIXES, parse_quantity

__all__ = [
    "AutoGrowth",
    "AutoGrowthPlan",
    "Expansion",
    "ExpansionPlan",
    "Reader",
    "VolumeUsage",
    "claim_expansion",
    "claim_template_size",
    "decide_auto_growth",
    "decide_expansion",
    "expansion_allowed",
    "format_bytes",
    "requested_size",
    "smaller",
]


def _bytes(size: str) -> Decimal:
    value = parse_quantity(size)
    if value is None:
        raise ValueError(f"not a Kubernetes quantity: {size!r}")
    return value


def smaller(size: str, than: str) -> bool:
    """Whether the quantity ``size`` is less than ``than`` (``1024Mi`` is not less than ``1Gi``)."""
    return _bytes(size) < _bytes(than)


class Expansion(Enum):
    NONE = "none"
    """The volume already has the size asked for (or more), or does not exist yet."""
    EXPAND = "expand"
    """Ask the claims for the new size."""
    NOT_EXPANDABLE = "not-expandable"
    """A larger size was asked for but the StorageClass does not allow expansion."""


@dataclass(frozen=True)
class ExpansionPlan:
    action: Expansion
    size: str
    """The size the volume has (NONE, NOT_EXPANDABLE) or is to get (EXPAND)."""
    message: str = ""


def decide_expansion(
    wanted: str,
    claimed: str | None,
    storage_class: str | None,
    allows: bool,
    *,
    field: str,
    volume: str,
) -> ExpansionPlan:
    """What to do with a volume of size ``claimed`` when ``field`` of the spec asks for ``wanted``."""
    if claimed is None or not smaller(claimed, wanted):
        return ExpansionPlan(Expansion.NONE, claimed or wanted)
    if not allows:
        where = f"StorageClass {storage_class}" if storage_class else "the claim's StorageClass"
        return ExpansionPlan(
            Expansion.NOT_EXPANDABLE,
            claimed,
            f"{field} asks for {wanted} but the volume has {claimed} and {where} does not "
            "allow volume expansion (allowVolumeExpansion: true)",
        )
    return ExpansionPlan(Expansion.EXPAND, wanted, f"growing the {volume} from {claimed} to {wanted}")


@dataclass(frozen=True)
class VolumeUsage:
    """One volume's file system as the application reports it (Typesense's disk metrics)."""

    volume: str
    """Whose it is, as a message names it ("node 2")."""
    used_bytes: int
    total_bytes: int

    @property
    def percent(self) -> float:
        return 100.0 * self.used_bytes / self.total_bytes if self.total_bytes > 0 else 0.0


class AutoGrowth(Enum):
    NONE = "none"
    """Every volume is below the threshold, or the last growth has not reached the file systems yet."""
    GROW = "grow"
    """Grow every claim to :attr:`AutoGrowthPlan.size`."""
    AT_MAX = "at-max"
    """A volume is past the threshold and the claims have the maximum size already."""


@dataclass(frozen=True)
class AutoGrowthPlan:
    action: AutoGrowth
    size: str
    """The size to grow to (GROW), or the claims' size."""
    message: str = ""
    """What was seen and what is done, with the figures: for an Event."""
    condition: str = ""
    """The same without the figures, which move with every write: for a condition, written only when
    it changes."""


FILE_SYSTEM_SHOWS = Decimal("0.9")
"""A file system counts as showing a claim's size from this share of it on: a real one keeps some of its
volume for itself (ext4's metadata, a few percent), and a growth not yet made on the node shows the old
size, which is what must not be grown from again."""


def format_bytes(value: Decimal) -> str:
    """A byte count as the largest binary quantity that says it exactly ("3Gi", "1536Mi", "1000")."""
    whole = int(value)
    for suffix in ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki"):
        unit = int(BINARY_SUFFIXES[suffix])
        if whole >= unit and whole % unit == 0:
            return f"{whole // unit}{suffix}"
    return str(whole)


def _about(count: int) -> str:
    """A byte count for a person to read: "870.2 MiB"."""
    for suffix in ("Ti", "Gi", "Mi", "Ki"):
        unit = BINARY_SUFFIXES[suffix]
        if count >= unit:
            return f"{count / unit:.1f} {suffix}B"
    return f"{count} B"


def decide_auto_growth(
    usages: Sequence[VolumeUsage],
    current: str,
    *,
    threshold_percent: int,
    step: str,
    max_size: str,
) -> AutoGrowthPlan:
    """Whether claims of size ``current`` are to grow by ``step`` (no further than ``max_size``) because a
    volume's file system is ``threshold_percent`` full or more.

    A volume whose file system does not show ``current`` yet (the last growth is still being made on its
    node) holds every growth back: it would be grown again from a reading of the old size.
    """
    size = _bytes(current)
    full = [u for u in usages if u.total_bytes > 0 and u.percent >= threshold_percent]
    if not full:
        return AutoGrowthPlan(AutoGrowth.NONE, current)
    behind = [u.volume for u in usages if 0 < u.total_bytes < size * FILE_SYSTEM_SHOWS]
    if behind:
        return AutoGrowthPlan(
            AutoGrowth.NONE,
            current,
            f"waiting for the file systems of {', '.join(behind)} to show the claims' {current}",
        )
    fullest = max(full, key=lambda u: u.percent)
    past = f"{fullest.volume}'s volume is past autoGrow.thresholdPercent ({threshold_percent}%)"
    why = (
        f"{fullest.volume}'s volume is {fullest.percent:.0f}% full ({_about(fullest.used_bytes)} of "
        f"{_about(fullest.total_bytes)}; autoGrow.thresholdPercent is {threshold_percent})"
    )
    limit = _bytes(max_size)
    if size >= limit:
        at_max = (
            f"the volumes have autoGrow.maxSize ({max_size}) already: raise autoGrow.maxSize, or make room "
            "in the data"
        )
        return AutoGrowthPlan(AutoGrowth.AT_MAX, current, f"{why} and {at_max}", f"{past} and {at_max}")
    grown = format_bytes(min(size + _bytes(step), limit))
    growing = f"growing every claim from {current} to {grown} (autoGrow.maxSize {max_size})"
    return AutoGrowthPlan(AutoGrowth.GROW, grown, f"{why}: {growing}", f"{past}: {growing}")


class Reader(Protocol):
    """What :func:`expansion_allowed` reads through (an ``operator_core.kube.Kube``): named by shape, so that
    the pure ``resources`` rooms, which build the claim patches here, stay clear of the API adapter."""

    async def get(
        self, api_version: str, kind: str, name: str, namespace: str | None = None
    ) -> Mapping[str, Any] | None: ...


async def expansion_allowed(kube: Reader, class_name: str | None) -> bool:
    """Whether StorageClass ``class_name`` says ``allowVolumeExpansion: true`` (no class, or one that is
    not there, does not)."""
    if not class_name:
        return False
    storage_class = await kube.get("storage.k8s.io/v1", "StorageClass", class_name)
    return bool((storage_class or {}).get("allowVolumeExpansion"))


def requested_size(claim_spec: Mapping[str, Any] | None) -> str | None:
    """``resources.requests.storage`` of a claim's (or a claim template's) spec."""
    return (((claim_spec or {}).get("resources") or {}).get("requests") or {}).get("storage")


def claim_template_size(statefulset: Mapping[str, Any] | None) -> str | None:
    """The size in a live StatefulSet's (first) claim template; None without a StatefulSet or template."""
    templates = ((statefulset or {}).get("spec") or {}).get("volumeClaimTemplates") or []
    return requested_size(templates[0].get("spec")) if templates else None


def claim_expansion(name: str, namespace: str, size: str) -> Manifest:
    """The server-side apply that asks a claim for ``size``, and nothing else.

    The claim is made by the StatefulSet's volumeClaimTemplates, not by the operator, so the patch
    names only the one field the operator owns on it.
    """
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"resources": {"requests": {"storage": size}}},
    }
