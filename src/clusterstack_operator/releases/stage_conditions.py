"""A stage's pre- or post-condition: a CEL expression over objects of the workload cluster. Pure.

Evaluated with cel-python (decision 15), as upstream evaluates it with cel-go: each object of the
condition is a variable named by its ``key``, a map of the object as the API server returns it,
and the expression must be true. Unlike upstream, a field the object does not have yet (say,
``status.readyReplicas`` of a new Deployment) and an object that does not exist yet are "not yet",
not a failure: a stage waits for them. An expression that does not compile, or that is not a
boolean, is :class:`InvalidCondition`, with the expression and the reason, since no wait mends it.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import celpy
from celpy.adapter import json_to_cel
from celpy.celparser import CELParseError
from celpy.celtypes import BoolType
from celpy.evaluation import CELEvalError

__all__ = ["InvalidCondition", "Verdict", "check_condition", "judge"]


class InvalidCondition(ValueError):
    """A condition that can never hold: it does not compile, or it is not a boolean."""


@dataclass(frozen=True)
class Verdict:
    holds: bool
    why: str
    """What the condition is waiting for, in words for the ClusterAddon's status (empty once it holds)."""


@functools.lru_cache(maxsize=256)
def _program(expression: str) -> Any:
    environment = celpy.Environment()
    try:
        return environment.program(environment.compile(expression))
    except CELParseError as error:
        where = f"line {error.line}, column {error.column}" if error.line is not None else "its end"
        raise InvalidCondition(
            f"the condition {expression!r} does not compile: syntax error at {where}"
        ) from None


def _reason(error: Exception) -> str:
    """cel-python's own words, without the activation it appends (which may hold whole objects)."""
    return str(error.args[0]) if error.args else type(error).__name__


def check_condition(expression: str) -> None:
    """Raise :class:`InvalidCondition` when ``expression`` does not compile."""
    _program(expression)


def judge(expression: str, objects: Mapping[str, Mapping[str, Any] | None]) -> Verdict:
    """Whether ``expression`` holds over ``objects`` (key -> the object, or None while it does not
    exist); raises :class:`InvalidCondition` for an expression no object can make hold."""
    program = _program(expression)
    missing = sorted(key for key, obj in objects.items() if obj is None)
    if missing:
        return Verdict(False, f"waiting for {', '.join(missing)} to exist, for {expression!r}")
    activation = {key: json_to_cel(dict(obj)) for key, obj in objects.items() if obj is not None}
    try:
        result = program.evaluate(activation)
    except CELEvalError as error:
        result = error
    if isinstance(result, CELEvalError):
        reason = _reason(result)
        if reason.startswith("undeclared reference"):
            names = ", ".join(sorted(objects)) or "none"
            raise InvalidCondition(
                f"the condition {expression!r} names what is not one of its objects' keys ({names})"
            )
        return Verdict(False, f"{expression!r} cannot be evaluated yet: {reason}")
    if not isinstance(result, BoolType):
        kind = type(result).__name__.removesuffix("Type").lower()
        raise InvalidCondition(f"the condition {expression!r} evaluates to a value of type {kind}, not bool")
    return Verdict(True, "") if result else Verdict(False, f"{expression!r} is false")
