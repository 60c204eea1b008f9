"""Pure: what a MonocleTask's Job says of the task, and the words of its status."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["COMPLETE", "FINAL", "TaskVerdict", "job_verdict"]

COMPLETE = "Complete"
"""The task's one condition: True once it succeeded; False, with the reason, otherwise."""
FINAL = ("Succeeded", "Failed")
"""Final phases: a task in one of them is never run, nor written, again."""
_MOST_MESSAGE = 600
"""The status keeps the end of a long termination message (the last lines of a failed command's log)."""


@dataclass(frozen=True)
class TaskVerdict:
    phase: str
    reason: str
    message: str


def job_verdict(job: Mapping[str, Any], state: str | None, said: str) -> TaskVerdict:
    """The task from its Job: ``state`` is ``Complete``, ``Failed`` or None (running); ``said`` the pod's
    termination message (with FallbackToLogsOnError, a failed command's last lines of log)."""
    name = job["metadata"]["name"]
    look = f"kubectl logs job/{name} shows what Monocle said"
    if state == "Complete":
        return TaskVerdict("Succeeded", "Succeeded", f"Job {name} completed; {look}")
    if state == "Failed":
        conditions: list[dict[str, Any]] = (job.get("status") or {}).get("conditions") or []
        failed: dict[str, Any] = next((c for c in conditions if c.get("type") == "Failed"), {})
        why = failed.get("reason") or "Failed"
        tail = said[-_MOST_MESSAGE:].strip()
        ending = f": {tail}" if tail else f"; {look}"
        return TaskVerdict("Failed", why, f"Job {name} failed ({why}), and is not run again{ending}")
    return TaskVerdict("Running", "Running", f"Job {name} is running")
