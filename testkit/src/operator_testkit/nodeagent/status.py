"""Pod status from the agent's view of its containers (pure), in the shape the kubelet writes.

:func:`pod_phase` follows the kubelet: Pending until every init container has
succeeded and a container has started; Running while any container runs or
will be restarted; Succeeded or Failed once every container has terminated
for good. :func:`pod_status` builds the whole status: phase, pod and host
addresses, the PodReadyToStartContainers, Initialized, ContainersReady, Ready
and PodScheduled conditions (keeping a condition's transition time while its
status holds), and the container statuses.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

__all__ = ["ContainerSnapshot", "pod_phase", "pod_status", "timestamp"]

Manifest = Mapping[str, Any]


def timestamp(moment: datetime) -> str:
    """An RFC 3339 time with second precision, as the API stores metav1.Time."""
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class ContainerSnapshot:
    """One container as the agent sees it at one moment."""

    name: str
    image: str
    state: str  # "waiting" | "running" | "terminated"
    reason: str = ""
    message: str = ""
    started_at: datetime | None = None
    finished_at: datetime | None = None
    exit_code: int | None = None
    restart_count: int = 0
    ready: bool = False
    started: bool = False
    will_restart: bool = False  # terminated now, but restartPolicy brings it back
    container_id: str = ""
    last_state: Manifest | None = None  # the previous run's terminated state, if any

    def as_status(self) -> dict[str, Any]:
        state: dict[str, Any]
        if self.state == "running":
            state = {"running": {"startedAt": timestamp(self.started_at)} if self.started_at else {}}
        elif self.state == "terminated":
            terminated: dict[str, Any] = {"exitCode": self.exit_code or 0, "reason": self.reason}
            if self.started_at:
                terminated["startedAt"] = timestamp(self.started_at)
            if self.finished_at:
                terminated["finishedAt"] = timestamp(self.finished_at)
            if self.container_id:
                terminated["containerID"] = self.container_id
            if self.message:
                terminated["message"] = self.message
            state = {"terminated": terminated}
        else:
            state = {"waiting": {"reason": self.reason or "ContainerCreating"}}
            if self.message:
                state["waiting"]["message"] = self.message
        status: dict[str, Any] = {
            "name": self.name,
            "image": self.image,
            "imageID": f"nodeagent://{self.image}",
            "state": state,
            "lastState": dict(self.last_state) if self.last_state else {},
            "ready": self.ready,
            "started": self.started,
            "restartCount": self.restart_count,
        }
        if self.container_id:
            status["containerID"] = self.container_id
        return status


def pod_phase(init_containers: Sequence[ContainerSnapshot], containers: Sequence[ContainerSnapshot]) -> str:
    """The pod's phase from its containers, as the kubelet computes it."""
    for init in init_containers:
        if init.state == "terminated" and init.exit_code not in (0, None) and not init.will_restart:
            return "Failed"
        if not (init.state == "terminated" and init.exit_code == 0):
            return "Pending"
    if not containers:
        return "Pending"
    if any(c.state == "running" or c.will_restart for c in containers):
        return "Running"
    if all(c.state == "terminated" for c in containers):
        return "Succeeded" if all(c.exit_code == 0 for c in containers) else "Failed"
    if any(c.state == "terminated" or c.restart_count for c in containers):
        return "Running"
    return "Pending"


def _condition(
    kind: str, true: bool, previous: Mapping[str, Manifest], now: str, reason: str = ""
) -> Manifest:
    status = "True" if true else "False"
    before = previous.get(kind)
    transition = before.get("lastTransitionTime") if before and before.get("status") == status else None
    condition: dict[str, Any] = {"type": kind, "status": status, "lastTransitionTime": transition or now}
    if not true and reason:
        condition["reason"] = reason
    return condition


def pod_status(
    *,
    previous: Manifest,
    pod_ip: str | None,
    host_ip: str,
    start_time: datetime,
    now: datetime,
    init_containers: Sequence[ContainerSnapshot],
    containers: Sequence[ContainerSnapshot],
) -> dict[str, Any]:
    """The full status to write; ``previous`` is the pod's current status (for transition times)."""
    stamp = timestamp(now)
    before = {c["type"]: c for c in previous.get("conditions") or []}
    initialized = all(c.state == "terminated" and c.exit_code == 0 for c in init_containers)
    containers_ready = initialized and bool(containers) and all(c.ready for c in containers)
    phase = pod_phase(init_containers, containers)
    if phase in ("Succeeded", "Failed"):
        containers_ready = False
    not_ready = "PodCompleted" if phase in ("Succeeded", "Failed") else "ContainersNotReady"
    conditions = [
        _condition("PodReadyToStartContainers", pod_ip is not None, before, stamp),
        _condition("Initialized", initialized, before, stamp, "ContainersNotInitialized"),
        _condition("Ready", containers_ready, before, stamp, not_ready),
        _condition("ContainersReady", containers_ready, before, stamp, not_ready),
        _condition("PodScheduled", True, before, stamp),
    ]
    status: dict[str, Any] = {
        "phase": phase,
        "hostIP": host_ip,
        "hostIPs": [{"ip": host_ip}],
        "startTime": timestamp(start_time),
        "conditions": conditions,
        "containerStatuses": [c.as_status() for c in containers],
    }
    if pod_ip:
        status["podIP"] = pod_ip
        status["podIPs"] = [{"ip": pod_ip}]
    if init_containers:
        status["initContainerStatuses"] = [c.as_status() for c in init_containers]
    return status
