"""The Jobs the operator runs (backups, removals, restores): whether a Job ended, the one-line JSON result
its command wrote as the pod's termination message, and the ended Job let go once its result is kept."""

from __future__ import annotations

import json
from typing import Any

from operator_core.clock import parse_wire_time, utcnow
from operator_core.jobs import job_state, termination_message
from operator_core.kube import Kube

__all__ = ["delete_ended_job", "job_result", "no_image_message"]

_MESSAGE_GRACE_SECONDS = 15.0
"""How long after its Job's end a pod's termination message is waited for."""


def no_image_message(jobs: str) -> str:
    """What a backup or restore says when the operator has no image for its ``jobs`` Jobs."""
    return (
        f"the operator has no image for {jobs} Jobs: set OPERATOR_SUITE_BACKUP_IMAGE to this suite's "
        "image (the chart sets it to the operator's own)"
    )


async def delete_ended_job(kube: Kube, name: str, namespace: str) -> None:
    """An ended Job goes once its result is in the status, and its pod with it: an ended pod that
    mounted a claim would keep that claim from being deleted, ever."""
    if await kube.get("batch/v1", "Job", name, namespace) is not None:
        await kube.delete("batch/v1", "Job", name, namespace)


def _ended_recently(job: dict[str, Any]) -> bool:
    ended = (job.get("status") or {}).get("completionTime")
    if not ended:
        return True
    moment = parse_wire_time(str(ended))
    return moment is None or (utcnow() - moment).total_seconds() < _MESSAGE_GRACE_SECONDS


async def job_result(kube: Kube, job: dict[str, Any]) -> dict[str, Any] | None:
    """An ended Job's result: the command's JSON line, or ``{"error": reason}``; None while its pod's
    termination message may still be on its way (the Job's end can reach the watch before its pod's
    last status does)."""
    metadata = job["metadata"]
    message = await termination_message(kube, metadata["namespace"], metadata["name"])
    if not message and job_state(job) == "Complete" and _ended_recently(job):
        return None
    return _result(message)


def _result(message: str) -> dict[str, Any]:
    try:
        parsed = json.loads(message.splitlines()[-1]) if message else {}
    except ValueError:
        return {"error": message}
    return parsed if isinstance(parsed, dict) else {"error": message}
