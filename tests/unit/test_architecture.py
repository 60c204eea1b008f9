"""The code as docs/architecture.md and the README draw it: every package and module of src/ and of the
test kit is named in the map, every package in the README's layout, no module
imports itself back through another (type-only imports included), and no module of a controller room
grows past 500 lines."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ROOT / "src"
TEST_KIT = ROOT / "testkit" / "src" / "operator_testkit"
CONTROLLER_LINES_AT_MOST = 500


def packages() -> list[str]:
    """Every package under src/, as the map names it: ``typesense_operator/quorum/``."""
    return sorted(f"{init.parent.relative_to(SOURCES).as_posix()}/" for init in SOURCES.rglob("__init__.py"))


def test_every_package_under_src_is_named_in_the_architecture_map() -> None:
    text = (ROOT / "docs" / "architecture.md").read_text()
    missing = [package for package in packages() if package not in text]
    assert not missing, f"docs/architecture.md does not name {', '.join(missing)}"


def test_every_package_of_the_test_kit_is_named_in_the_architecture_map() -> None:
    """The kit's map lists its packages under ``operator_testkit/``, indented: ``  nodes/``."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    kit = text[text.index("\noperator_testkit/") :]
    missing = [
        package
        for package in sorted(
            init.parent.name for init in TEST_KIT.rglob("__init__.py") if init.parent != TEST_KIT
        )
        if f"\n  {package}/ " not in kit
    ]
    assert not missing, f"docs/architecture.md's test kit map does not name {', '.join(missing)}"


def test_every_module_is_named_in_the_architecture_map() -> None:
    text = (ROOT / "docs" / "architecture.md").read_text()
    modules = [*SOURCES.rglob("*.py"), *TEST_KIT.rglob("*.py")]
    missing = sorted(
        str(path.relative_to(ROOT))
        for path in modules
        if path.name != "__init__.py" and path.name not in text
    )
    assert not missing, f"docs/architecture.md does not name {', '.join(missing)}"


def test_the_readmes_layout_names_every_package() -> None:
    """Each operator's line of the README's layout names its packages; the kit's line, the kit's."""
    readme = (ROOT / "README.md").read_text()
    layout = readme[readme.index("## Layout") :]
    layout = layout[: layout.index("```", layout.index("```") + 3)]
    lines: dict[str, str] = {}
    current = ""
    for line in layout.splitlines():
        if line and not line.startswith(" "):
            current = line.split()[0]
        lines[current] = lines.get(current, "") + " " + line
    missing = []
    for package in packages():
        top, _, rest = package.partition("/")
        said = lines.get(f"src/{top}/", "")
        if not said or (rest and not re.search(rf"(?<![\w/]){re.escape(rest)}", said)):
            missing.append(package)
    kit = lines.get("testkit/src/operator_testkit/", "")
    missing += [
        f"operator_testkit/{init.parent.name}/"
        for init in TEST_KIT.rglob("__init__.py")
        if init.parent != TEST_KIT and f"{init.parent.name}/" not in kit
    ]
    assert not missing, f"the README's layout does not name {', '.join(sorted(missing))}"


def _module_name(path: Path) -> str:
    parts = path.relative_to(SOURCES).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """Module -> the modules of src/ it imports, wherever the import stands (under TYPE_CHECKING too)."""
    paths = {_module_name(path): path for path in SOURCES.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in paths.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        imported: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*parts, *([base] if base else [])])
                for alias in node.names:
                    full = f"{base}.{alias.name}"
                    imported.add(full if full in paths else base)
            elif isinstance(node, ast.Import):
                imported.update(alias.name for alias in node.names)
        graph[name] = {module for module in imported if module in paths and module != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = len(index)
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(sorted(graph[successor]))))
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        group.append(member)
                        if member == node:
                            break
                    if len(group) > 1:
                        found.append(sorted(group))
    return found


def test_no_module_imports_itself_back_through_others() -> None:
    assert cycles(import_graph()) == []


def test_the_cycle_finder_finds_a_cycle_through_three_modules() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_module_of_a_controller_room_is_over_500_lines() -> None:
    long = {
        path.relative_to(SOURCES).as_posix(): lines
        for path in SOURCES.glob("*/controller/*.py")
        if (lines := len(path.read_text().splitlines())) > CONTROLLER_LINES_AT_MOST
    }
    assert long == {}


def test_status_is_patched_through_one_function() -> None:
    """Every status write goes through ``operator_core.steps.write_status`` (the end of a reconcile, a
    step's progress, a record made before an action, a finalizer's): only it asks the client."""
    callers = sorted(
        str(path.relative_to(SOURCES))
        for path in SOURCES.rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "patch_status"
    )
    assert callers == ["operator_core/steps.py"], callers
