"""Inputs and checks for the unit layer's table and golden-file tests of builders and status decisions.

- :func:`conditions`: a list of conditions at a fixed time, one per keyword;
- :func:`by_kind_and_name`: manifests keyed ``Kind/name``;
- :func:`assert_golden`: manifests compared with a YAML file in the repository,
  rewritten instead when ``UPDATE_GOLDEN`` is set (then review the diff).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from operator_core.conditions import Condition, ConditionStatus, set_condition

__all__ = ["T0", "assert_golden", "by_kind_and_name", "conditions"]

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def conditions(**states: ConditionStatus) -> list[Condition]:
    """``conditions(Ready="False")``: each with reason ``<type>Reason`` and message ``<type> message``."""
    result: list[Condition] = []
    for name, status in states.items():
        result = set_condition(result, name, status, f"{name}Reason", f"{name} message", now=T0)
    return result


def by_kind_and_name(manifests: Iterable[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {f"{m['kind']}/{m['metadata']['name']}": m for m in manifests}


def assert_golden(manifests: Iterable[Mapping[str, Any]], path: Path) -> None:
    """The manifests, as sorted YAML documents, equal the file at ``path`` (UPDATE_GOLDEN=1 rewrites it)."""
    text = yaml.safe_dump_all(list(manifests), sort_keys=True)
    if os.environ.get("UPDATE_GOLDEN"):
        path.write_text(text)
    assert path.exists(), f"no golden file {path}; run with UPDATE_GOLDEN=1 and review it"
    assert text == path.read_text(), f"{path.name} differs; if intended, regenerate with UPDATE_GOLDEN=1"
