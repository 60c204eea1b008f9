"""What every operator reads of the Jobs it runs: whether a Job ended, and what its pod said at its end
(the termination message: a command's result, or, with ``FallbackToLogsOnError``, its last lines of log
when it failed)."""

from __future__ import annotations

from typing import Any

from operator_core.kube import Kube

__all__ = ["job_state", "termination_message"]


def job_state(job: dict[str, Any] | None) -> str | None:
    """ "Complete" or "Failed" once the Job ended, else None."""
    for condition in ((job or {}).get("status") or {}).get("conditions") or []:
        if condition.get("type") in ("Complete", "Failed") and condition.get("status") == "True":
            return str(condition["type"])
    return None


async def termination_message(kube: Kube, namespace: str, job_name: str) -> str:
    """The last ended pod's termination message, or empty."""
    pods = await kube.list("v1", "Pod", namespace, labels={"job-name": job_name})
    ended = []
    for pod in pods:
        for status in (pod.get("status") or {}).get("containerStatuses") or []:
            terminated = (status.get("state") or {}).get("terminated")
            if terminated:
                ended.append((terminated.get("finishedAt") or "", terminated.get("message") or ""))
    return max(ended)[1].strip() if ended else ""
