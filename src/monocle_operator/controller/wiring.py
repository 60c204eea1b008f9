"""The Monocle operator, described to the shared core: its ``OPERATOR``, which the runner runs.

Everything is wired by the shared controller step (:mod:`operator_core.controller`):
each Monocle instance, and each MonocleTask, gets one loop that reads the instance, runs
:func:`~monocle_operator.controller.monocle.reconcile.reconcile`, and sleeps until
something changes or the resync interval passes. Events on the children wake
their instance's loop, so a child deleted or edited by hand is restored within
moments, and two reconciles of one instance never run at once. The user's own
Secret and ConfigMap carry none of our labels, so every Secret and ConfigMap
is watched, and only an instance that names one in its spec is woken by it:
a Secret or config edit is acted on at once.
"""

from __future__ import annotations

from typing import Any

from monocle_operator.api import MONOCLE, MONOCLE_TASK
from monocle_operator.controller.monocle.reconcile import reconcile
from monocle_operator.controller.task.reconcile import reconcile_task
from monocle_operator.engine import MonocleRuntime
from monocle_operator.resources import MANAGED_BY
from operator_core.controller import Operator
from operator_core.reconciling import Context

# Children (found by the labels every child carries), held in the watch caches: a change to one wakes its
# instance's loop. Secrets and ConfigMaps are held whole (named kinds below).
_CHILD_KINDS = (
    ("v1", "Service"),
    ("v1", "PersistentVolumeClaim"),
    ("apps/v1", "StatefulSet"),
    ("apps/v1", "Deployment"),
    ("batch/v1", "Job"),
    ("networking.k8s.io/v1", "Ingress"),
)


def _user_objects(obj: dict[str, Any]) -> list[tuple[str, str]]:
    """The user's own Secret and ConfigMap that an instance's spec names."""
    spec = obj.get("spec") or {}
    named = (("Secret", spec.get("secretRef")), ("ConfigMap", spec.get("configMapRef")))
    return [(kind, reference["name"]) for kind, reference in named if reference and reference.get("name")]


async def _start(context: Context) -> MonocleRuntime:
    return MonocleRuntime()


async def _stop(context: Context) -> None:
    if isinstance(context.runtime, MonocleRuntime):  # not when the start hook failed
        await context.runtime.close()


OPERATOR = Operator("monocle-operator", MONOCLE.group, start=_start, stop=_stop)
OPERATOR.controller(
    MONOCLE,
    reconcile,
    managed_by=MANAGED_BY,
    child_kinds=_CHILD_KINDS,
    # The engine's pod, for its address (EngineHealthy asks the engine itself); only its labels and
    # status are held. Pods becoming ready wake their instance.
    observed_kinds=(("v1", "Pod"),),
    named=_user_objects,
    named_kinds=(("v1", "Secret"), ("v1", "ConfigMap")),
)


def _task_instance(obj: dict[str, Any]) -> list[tuple[str, str]]:
    """The Monocle instance a task names: its changes (made, engine ready) wake a pending task."""
    name = (obj.get("spec") or {}).get("monocle")
    return [("Monocle", name)] if name else []


OPERATOR.controller(
    MONOCLE_TASK,
    reconcile_task,
    managed_by=MANAGED_BY,
    # The task's Job (its instance label is the task's name): its end wakes the task.
    child_kinds=(("batch/v1", "Job"),),
    named=_task_instance,
    named_kinds=((MONOCLE.api_version, "Monocle"),),
)
