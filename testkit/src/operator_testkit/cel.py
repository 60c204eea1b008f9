"""CEL rules of a generated CRD schema, evaluated with cel-python: how unit tests check ``cel()`` rules.

The integration tests prove that the API server enforces the same rules; these
helpers let a table test say what each rule accepts without a control plane.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import celpy
from celpy.adapter import json_to_cel

__all__ = ["evaluate", "rules"]


def rules(schema: Mapping[str, Any]) -> list[str]:
    """The ``x-kubernetes-validations`` rules on one node of a schema, in order."""
    return [v["rule"] for v in schema.get("x-kubernetes-validations", [])]


def evaluate(rule: str, activation: Mapping[str, Any]) -> bool:
    """Whether ``rule`` holds for the JSON values in ``activation`` (``self``, ``oldSelf``...)."""
    environment = celpy.Environment()
    program = environment.program(environment.compile(rule))
    return bool(program.evaluate({k: json_to_cel(v) for k, v in activation.items()}))
