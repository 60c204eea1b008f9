"""Whether a pod's container that waits to start will start without someone acting (pure).

The sandbox asks it of the pods it waits for, so that it says which pod cannot start and why within
seconds instead of waiting out its time-out. A kubelet keeps a container ``waiting`` with a reason:

==============================  ===================================================================
``ErrImagePull``,               the image is not on the node; these nodes reach no registry, so a
``ImagePullBackOff``,           pull never succeeds: stuck at once
``ErrImageNeverPull``,
``InvalidImageName``
``CreateContainerConfigError``  a Secret, ConfigMap or key it names is missing: an operator may be
                                about to create it, so stuck once it has lasted
                                :data:`CONFIG_PATIENCE_SECONDS`
``CreateContainerError``,       the runtime could not create or start it: the same patience
``RunContainerError``
``CrashLoopBackOff``            it starts and dies over and over; a server may crash while its peers
                                come up, so stuck after :data:`CRASH_PATIENCE_SECONDS`
==============================  ===================================================================

``ContainerCreating`` and ``PodInitializing`` are the way to running, never stuck.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "CONFIG_PATIENCE_SECONDS",
    "CRASH_PATIENCE_SECONDS",
    "StuckContainer",
    "WaitingKey",
    "stuck_containers",
    "waiting_since",
]

Manifest = Mapping[str, Any]
CONFIG_PATIENCE_SECONDS = 20.0
CRASH_PATIENCE_SECONDS = 90.0
_NEVER_STARTS = frozenset({"ErrImagePull", "ImagePullBackOff", "ErrImageNeverPull", "InvalidImageName"})
_PATIENCE = {
    "CreateContainerConfigError": CONFIG_PATIENCE_SECONDS,
    "CreateContainerError": CONFIG_PATIENCE_SECONDS,
    "RunContainerError": CONFIG_PATIENCE_SECONDS,
    "CrashLoopBackOff": CRASH_PATIENCE_SECONDS,
}

WaitingKey = tuple[str, str, str]
"""(pod uid, container, reason): one spell of waiting for one reason."""


@dataclass(frozen=True)
class StuckContainer:
    """A container of a pod that will not start without someone acting."""

    pod: str  # namespace/name
    container: str
    reason: str
    message: str

    def describe(self) -> str:
        return f"pod {self.pod}: container {self.container} cannot start: {self.reason}: {self.message}"


def _waiting(pod: Manifest) -> list[tuple[WaitingKey, StuckContainer]]:
    metadata, status = pod.get("metadata") or {}, pod.get("status") or {}
    name = f"{metadata.get('namespace', '')}/{metadata.get('name', '')}"
    found = []
    for container in [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]:
        waiting = (container.get("state") or {}).get("waiting") or {}
        reason, message = str(waiting.get("reason", "")), str(waiting.get("message", ""))
        if reason:
            key = (str(metadata.get("uid", name)), str(container.get("name", "")), reason)
            found.append((key, StuckContainer(name, key[1], reason, message)))
    return found


def waiting_since(
    pods: Sequence[Manifest], before: Mapping[WaitingKey, float], now: float
) -> dict[WaitingKey, float]:
    """When each container now waiting began to wait for its present reason (first seen by the caller)."""
    return {key: before.get(key, now) for pod in pods for key, _ in _waiting(pod)}


def stuck_containers(
    pods: Sequence[Manifest], since: Mapping[WaitingKey, float], now: float
) -> list[StuckContainer]:
    """The containers that will not start without someone acting, in the order of ``pods``."""
    stuck = []
    for pod in pods:
        for key, container in _waiting(pod):
            lasted = now - since.get(key, now)
            patience = _PATIENCE.get(container.reason)
            if container.reason in _NEVER_STARTS or (patience is not None and lasted >= patience):
                stuck.append(container)
    return stuck
