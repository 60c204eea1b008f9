"""One MonocleTask, from asked-for to Succeeded or Failed.

Pending: the instance must exist and its engine be ready, and the task's workspace and crawler must be
in its config.yaml (Monocle's janitor would log that it found none and exit 0, having done nothing);
then the Job is made, named after the task (made already by a reconcile that did not get to write its
status: the same Job). Running: the Job's end is awaited (its changes wake the task). Succeeded and
Failed are final: the task is never run, nor written, again, and its Job is kept with it for its log.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

from monocle_operator.api import MONOCLE, MONOCLE_TASK
from monocle_operator.api.reasons import ConditionType, EventReason
from monocle_operator.controller.task.status import COMPLETE, FINAL, job_verdict
from monocle_operator.resources import (
    CONFIG_KEY,
    Instance,
    Task,
    build_task_job,
    check_config,
    janitor_arguments,
    task_target_problem,
)
from operator_core import errors
from operator_core.clock import utcnow, wire_time
from operator_core.conditions import condition_of
from operator_core.jobs import job_state, termination_message
from operator_core.reconciling import WAIT_FOR_CHANGE, Context
from operator_core.steps import Outcome, Scope, Steps

__all__ = ["STEPS", "reconcile_task"]


@dataclass(kw_only=True)
class TaskScope(Scope):
    """One reconcile of one MonocleTask: its status is all its own (:attr:`status` starts as it is)."""

    task: Task
    phase: str | None = None

    @classmethod
    def of(cls, obj: dict[str, Any], context: Context) -> TaskScope:
        status = dict(obj.get("status") or {})
        return cls(
            **Scope.parts(obj, context), task=Task.from_object(obj), phase=status.get("phase"), status=status
        )

    async def pending(self, reason: str, message: str) -> Outcome:
        """Not started: waits for what ``message`` says (the instance's changes wake the task)."""
        self.status["phase"] = "Pending"
        self.status["message"] = message
        await self.book.set(COMPLETE, "False", reason, message)
        self.next_look = WAIT_FOR_CHANGE
        return Outcome.STOP

    async def end(self, phase: str, reason: str, message: str) -> Outcome:
        self.status.update(phase=phase, message=message, completionTime=wire_time(utcnow()))
        await self.book.set(COMPLETE, "True" if phase == "Succeeded" else "False", reason, message)
        if phase == "Succeeded":
            await self.book.event("Normal", EventReason.TASK_SUCCEEDED, message)
        else:
            await self.book.event("Warning", EventReason.TASK_FAILED, message)
        self.next_look = WAIT_FOR_CHANGE
        return Outcome.STOP


async def keep_the_end(scope: TaskScope) -> Outcome:
    """Succeeded and Failed are final: nothing is run or written again."""
    if scope.phase in FINAL:
        scope.next_look = WAIT_FOR_CHANGE
        return Outcome.STOP
    return Outcome.CONTINUE


async def start(scope: TaskScope) -> Outcome:
    """Pending: the instance, its engine and its config are checked, then the one Job is made."""
    if scope.phase == "Running":
        return Outcome.CONTINUE
    task, kube = scope.task, scope.kube
    monocle = await kube.get(MONOCLE.api_version, "Monocle", task.spec.monocle, task.namespace)
    if monocle is None:
        return await scope.pending(
            "MonocleNotFound", f"Monocle {task.spec.monocle} does not exist in namespace {task.namespace}"
        )
    instance = Instance.from_object(monocle)
    engine = condition_of(monocle, ConditionType.ELASTIC_READY)
    if engine is None or engine.get("status") != "True":
        why = engine.get("message") if engine is not None else "not observed yet"
        return await scope.pending(
            "WaitingForEngine", f"Monocle {instance.name}'s engine is not ready: {why}"
        )
    source = f"ConfigMap {instance.config_map_name}"
    config_map = await kube.get("v1", "ConfigMap", instance.config_map_name, instance.namespace)
    text = ((config_map or {}).get("data") or {}).get(CONFIG_KEY)
    checked = check_config(text, source)
    if not checked.valid or text is None:
        return await scope.pending("InvalidConfig", checked.message)
    problem = task_target_problem(text, source, task.spec.workspace, task.spec.crawler)
    if problem is not None:
        reason, message = problem
        return await scope.end("Failed", reason, f"{message}; nothing was run")
    job = build_task_job(task, instance)
    with contextlib.suppress(errors.Conflict):  # made by a reconcile that did not get to write the status
        await kube.create(job)
    # The subcommand and its flags, as the Job runs them (the engine's URL left symbolic).
    message = f"Job {task.name} runs monocle janitor {' '.join(janitor_arguments(task.spec)[2:])}"
    scope.status.update(phase="Running", job=task.name, startTime=wire_time(utcnow()), message=message)
    await scope.book.set(COMPLETE, "False", "Running", message)
    await scope.book.event("Normal", EventReason.TASK_STARTED, message)
    scope.next_look = WAIT_FOR_CHANGE
    return Outcome.STOP


async def follow(scope: TaskScope) -> Outcome:
    """Running: the Job's end, read back; a Job deleted before it ended fails the task (never rerun)."""
    task = scope.task
    job = await scope.kube.get("batch/v1", "Job", task.name, task.namespace, labelled_only=True)
    if job is None:
        return await scope.end(
            "Failed", "JobDeleted", f"Job {task.name} was deleted before it ended; the task is not run again"
        )
    state = job_state(job)
    said = await termination_message(scope.kube, task.namespace, task.name) if state == "Failed" else ""
    verdict = job_verdict(job, state, said)
    if verdict.phase == "Running":
        scope.next_look = WAIT_FOR_CHANGE
        return Outcome.STOP
    return await scope.end(verdict.phase, verdict.reason, verdict.message)


async def report(scope: Scope, completed: bool) -> None:
    """The phase and the condition are set by the steps; nothing more to say."""


STEPS = Steps(MONOCLE_TASK, TaskScope.of, (keep_the_end, start, follow), report)
reconcile_task = STEPS.reconcile
"""Bring one MonocleTask to its end and write its status; returns seconds until the next look."""
