"""Every operator's sandbox entry names a console script, an RBAC file and samples that exist."""

from __future__ import annotations

from importlib.metadata import entry_points
from pathlib import Path

import pytest

from operator_testkit.sandbox import ENTRY_POINT_GROUP, SandboxEntry

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", ["monocle", "typesense"])
def test_sandbox_entry_points_at_files_that_exist(name: str) -> None:
    (found,) = [e for e in entry_points(group=ENTRY_POINT_GROUP) if e.name == name]
    entry = found.load()
    assert isinstance(entry, SandboxEntry)
    assert (ROOT / entry.rbac).is_file()
    assert all((ROOT / sample).is_file() for sample in entry.samples)
    assert entry.script in {e.name for e in entry_points(group="console_scripts")}


def test_monocle_runs_in_the_sandbox_without_samples() -> None:
    from operator_testkit.drivers.monocle import SANDBOX

    assert SANDBOX.samples == ()
