"""No state of the runtime lives in a module (issue 69): what a process learns while it runs (an API
server's outage, whether it leads, errors it met) belongs to an object that the process made and
passes on, so that two operators, or a test and an operator, in one process never share it by accident.

Read from the sources (no import): a function of ``src/`` never rebinds or mutates a name of its
module's top level, and what the top level makes is a constant or one of the kinds below.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

SRC = Path(__file__).resolve().parents[2] / "src"

MUTATING_METHODS = frozenset(
    {"add", "append", "extend", "insert", "update", "pop", "popitem", "clear", "setdefault", "remove"}
    | {"discard"}
)
"""The methods of dict, list, set and Counter that change them."""

KINDS_MADE_AT_IMPORT = frozenset(
    {
        "CustomResource",  # a kind's definition, read only
        "Steps",  # a controller's steps, read only
        "Finalizing",  # a controller's finalizer, read only
        "Operator",  # the process's operator, which the runner imports by name: its state is its own
        "ConditionShape",
        "SetKind",
        "TypeVar",
        "ContextVar",  # one value per task, not per module
        "Decoder",
        "Path",
        "Decimal",
    }
)
"""What a module's top level may make by calling a class: definitions nothing writes afterwards."""

PROMETHEUS_KINDS = frozenset({"Counter", "Gauge", "Histogram"})
"""prometheus_client's metric families: the process's /metrics registry is one per process by design."""

PROCESS_WIDE = {
    ("operator_core/secrets.py", "_secrets"): "every secret the process read is scrubbed from every log "
    "record, Event and exception, wherever it is written: logging is the process's",
    ("operator_core/secrets.py", "_lock"): "guards _secrets",
}
"""Module state on purpose, with the reason."""


def _modules() -> Iterator[tuple[str, ast.Module]]:
    for path in sorted(SRC.rglob("*.py")):
        yield str(path.relative_to(SRC)), ast.parse(path.read_text(), filename=str(path))


def _top_level_bindings(module: ast.Module) -> dict[str, ast.expr | None]:
    bound: dict[str, ast.expr | None] = {}
    for statement in module.body:
        if isinstance(statement, ast.Assign):
            for target in statement.targets:
                if isinstance(target, ast.Name):
                    bound[target.id] = statement.value
        elif isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
            bound[statement.target.id] = statement.value
    return bound


def _top_level_names(module: ast.Module) -> set[str]:
    return set(_top_level_bindings(module)) - {"__all__"}


def _prometheus_names(module: ast.Module) -> set[str]:
    return {
        alias.asname or alias.name
        for statement in module.body
        if isinstance(statement, ast.ImportFrom) and statement.module == "prometheus_client"
        for alias in statement.names
    }


def _called_name(value: ast.expr) -> str | None:
    if isinstance(value, ast.Call):
        function = value.func
        if isinstance(function, ast.Name):
            return function.id
        if isinstance(function, ast.Attribute):
            return function.attr
    return None


def _base_name(node: ast.expr) -> str | None:
    while isinstance(node, (ast.Subscript, ast.Attribute)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _locals(function: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """Parameters and names the function binds itself (which hide the module's)."""
    arguments = function.args
    names = {argument.arg for argument in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs)}
    names |= {argument.arg for argument in (arguments.vararg, arguments.kwarg) if argument is not None}
    for node in ast.walk(function):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
    return names


def _writes_to_module_names(module: ast.Module, top_level: set[str]) -> Iterator[tuple[int, str, str]]:
    """(line, the module's name written, how) for each write into a top-level name from a function."""
    for function in ast.walk(module):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        module_names = top_level - _locals(function)
        for node in ast.walk(function):
            if isinstance(node, ast.Global):
                for global_name in node.names:
                    yield node.lineno, global_name, "global"
            targets: list[ast.expr] = []
            if isinstance(node, ast.Assign):
                targets = node.targets
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
                targets = [node.target]
            elif isinstance(node, ast.Delete):
                targets = node.targets
            for target in targets:
                written = _base_name(target)
                if isinstance(target, (ast.Subscript, ast.Attribute)) and written in module_names:
                    yield node.lineno, written, "an item or attribute assigned or deleted"
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in MUTATING_METHODS
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id in module_names
            ):
                yield node.lineno, node.func.value.id, f".{node.func.attr}(...)"


def test_no_function_writes_into_its_modules_top_level() -> None:
    found = sorted(
        {  # a nested function's write is seen from each function around it: once is enough
            f"{name}:{line}: {written}: {how}"
            for name, module in _modules()
            for line, written, how in _writes_to_module_names(module, _top_level_names(module))
            if (name, written) not in PROCESS_WIDE
        }
    )
    assert not found, "state written at run time belongs to an object the process made:\n" + "\n".join(found)


def test_what_a_modules_top_level_makes_is_a_definition() -> None:
    found = []
    for name, module in _modules():
        prometheus = _prometheus_names(module)
        for binding, value in _top_level_bindings(module).items():
            if value is None or (name, binding) in PROCESS_WIDE:
                continue
            made = _called_name(value)
            if made is None:
                continue
            if made in KINDS_MADE_AT_IMPORT or made in prometheus & PROMETHEUS_KINDS:
                continue
            if made[:1].isupper() or made in {"dict", "list", "set", "defaultdict", "deque"}:
                found.append(f"{name}: {binding} = {made}(...)")
    said = "a module's top level makes only definitions (or say why in PROCESS_WIDE):\n"
    assert not found, said + "\n".join(found)
