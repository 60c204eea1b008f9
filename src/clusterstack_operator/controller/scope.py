"""The scope of one reconcile of a Cluster Stack object, its Ready report, and its status writes outside
the reconcile's end.

Each controller's reconcile is the suite's one shape (:class:`operator_core.steps.Steps`): its context
is put into a :class:`StackScope` (or a subclass) once, an ordered list of steps takes it from there,
and :func:`ready_report` says Ready before the status is written once at the end.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, TypeVar

from clusterstack_operator.api.v1alpha1 import CAPI_CONDITIONS
from clusterstack_operator.controller.runtime import StackRuntime
from operator_core.conditions import ConditionShape, summarize_ready
from operator_core.reconciling import Context
from operator_core.steps import Scope

__all__ = ["StackScope", "ready_report"]


@dataclass(kw_only=True)
class StackScope(Scope):
    """One reconcile of one Cluster Stack object (:class:`operator_core.steps.Scope`), with the operator's
    runtime. Each controller's scope adds its own findings."""

    runtime: StackRuntime

    @staticmethod
    def parts(
        obj: dict[str, Any], context: Context, shape: ConditionShape = CAPI_CONDITIONS
    ) -> dict[str, Any]:
        """The fields every scope starts with: the suite's, in Cluster API's condition shape, and the
        runtime the start hook made."""
        return {**Scope.parts(obj, context, shape), "runtime": context.runtime_of(StackRuntime)}


StackScopeT = TypeVar("StackScopeT", bound=StackScope)


def ready_report(
    required: Callable[[StackScopeT], Sequence[str]],
    *,
    ready_message: str,
    became_ready: StrEnum,
    became_not_ready: StrEnum,
) -> Callable[[StackScopeT, bool], Awaitable[None]]:
    """The report of a Cluster Stack object with a ``status.ready``: Ready summarised from the conditions
    ``required`` names, as the steps left them (an Event when it turns), and ``ready`` from it."""

    async def report(scope: StackScopeT, completed: bool) -> None:
        status, reason, message = summarize_ready(
            scope.book.conditions, required(scope), ready_message=ready_message
        )
        await scope.book.set_ready(
            status, reason, message, became_ready=became_ready, became_not_ready=became_not_ready
        )
        scope.status["ready"] = status == "True"

    return report
