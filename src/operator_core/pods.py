"""What a pod read from the API says of itself: its ordinal in its StatefulSet and a container's status as
its kubelet reports it; pure. Who calls it: the Typesense controller and its status view, which read the
same pods and must agree on them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["container_state", "container_status", "pod_ordinal"]


def pod_ordinal(name: str, statefulset: str | None = None) -> int | None:
    """The ordinal of StatefulSet pod ``name`` (``<statefulset>-<ordinal>``), or None for a name that is
    not one; with ``statefulset``, only a pod of that StatefulSet has one."""
    if statefulset is not None:
        if not name.startswith(f"{statefulset}-"):
            return None
        suffix = name.removeprefix(f"{statefulset}-")
    else:
        suffix = name.rsplit("-", 1)[-1]
    return int(suffix) if suffix.isdigit() else None


def container_status(pod: Mapping[str, Any], container: str, *, init: bool = False) -> Mapping[str, Any]:
    """Container ``container``'s entry of the pod's ``status.containerStatuses`` (``init``: of its
    ``initContainerStatuses``); {} before it has one."""
    key = "initContainerStatuses" if init else "containerStatuses"
    statuses = (pod.get("status") or {}).get(key) or []
    return next((status for status in statuses if status.get("name") == container), {})


def container_state(pod: Mapping[str, Any], container: str) -> Mapping[str, Any]:
    """Container ``container``'s ``state`` (waiting, running or terminated; {} before it has one)."""
    return container_status(pod, container).get("state") or {}
