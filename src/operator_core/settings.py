"""Settings, one small dataclass per concern, each read from the environment.

Every field is documented where it is declared. ``from_env`` reads
``OPERATOR_SUITE_<FIELD>`` (upper case) for each field, so a deployment can
tune a setting without code, and an unset variable keeps the default. A value
the field's type does not allow stops the operator at start, before it connects
to any cluster, with a message that names the variable and what is allowed.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any, Literal, TypeVar, get_args, get_origin, get_type_hints

from operator_core.errors import SettingsError

__all__ = ["KubeSettings", "from_env", "variable_name"]

T = TypeVar("T")

_PREFIX = "OPERATOR_SUITE_"


@dataclass(frozen=True)
class KubeSettings:
    """How the operators talk to the API server."""

    field_manager: str = "operator-suite"
    """The one server-side apply field manager every write uses."""
    request_timeout: float = 10.0
    """Seconds before a single API call is abandoned."""
    max_concurrent_reconciles: int = 12
    """Reconciles that may run at once in one operator process. Many objects created together
    (or an operator start with many to catch up) then come in turns: the API server sees no burst,
    and the process's memory follows the turns, not the number of objects. 12, not more: each
    reconcile writes its children at once (6 for a plain Typesense cluster), and the HTTP client
    keeps at most 100 connections, a dozen of them held by the watches. A cold start over 1,000
    clusters took 61.5 s with 8, 52.1 s with 12 and 52.9 s with 16 (bench/scale.py), at the same
    peak memory."""
    batch_seconds: float = 0.1
    """Once a change wakes an object, how long its loop waits for more before it reconciles: the
    StatefulSet controller's few updates of a new StatefulSet, and its pods, then cost one reconcile
    and one status write, not one each."""
    resync_seconds: float = 600.0
    """A full reconcile of each object this often even when nothing was seen to change: the safety
    net under the watches that wake an object when it, its children or what it names change."""


_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def _parse_bool(raw: str) -> bool:
    word = raw.strip().lower()
    if word not in _TRUE + _FALSE:
        raise ValueError(f"not a boolean; allowed: {', '.join(_TRUE + _FALSE)}")
    return word in _TRUE


def _parser(annotation: Any) -> Callable[[str], Any]:
    """How to read a field's variable: a number, a path, a boolean, or one of a Literal's or Enum's values."""
    if get_origin(annotation) is Literal:
        allowed = tuple(str(value) for value in get_args(annotation))

        def one_of(raw: str) -> str:
            if raw not in allowed:
                raise ValueError(f"allowed values: {', '.join(allowed)}")
            return raw

        return one_of
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        enum_type = annotation

        def member(raw: str) -> Any:
            try:
                return enum_type(raw)
            except ValueError:
                allowed = ", ".join(str(item.value) for item in enum_type)
                raise ValueError(f"allowed values: {allowed}") from None

        return member
    parsers: dict[Any, Callable[[str], Any]] = {
        str: str,
        float: float,
        int: int,
        Path: Path,
        bool: _parse_bool,
    }
    if annotation not in parsers:
        raise TypeError(f"no parser for settings of type {annotation!r}")
    return parsers[annotation]


def variable_name(field_name: str) -> str:
    """The environment variable that overrides a setting."""
    return _PREFIX + field_name.upper()


def from_env(settings_type: type[T], environ: Mapping[str, str] | None = None) -> T:
    """An instance of ``settings_type`` with fields overridden by OPERATOR_SUITE_* variables.

    A value the field's type does not allow (an unknown word for a Literal or an Enum, a number
    that does not parse, a boolean that is neither yes nor no) raises :class:`SettingsError`,
    which names the variable, the value and what is allowed.
    """
    source = os.environ if environ is None else environ
    hints = get_type_hints(settings_type)
    overrides: dict[str, Any] = {}
    for item in dataclasses.fields(settings_type):  # type: ignore[arg-type]
        name = variable_name(item.name)
        raw = source.get(name)
        if raw is None:
            continue
        try:
            overrides[item.name] = _parser(hints[item.name])(raw)
        except ValueError as error:
            detail = str(error) if "allowed" in str(error) else f"expected {hints[item.name].__name__}"
            raise SettingsError(f"{name}={raw!r} is not a valid value: {detail}") from None
    return settings_type(**overrides)
