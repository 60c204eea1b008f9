"""Every operator's sandbox entry names a chart, samples and a command that exist."""

from __future__ import annotations

from importlib.metadata import entry_points
from pathlib import Path

import pytest
import yaml

from operator_testkit.sandbox import ENTRY_POINT_GROUP, SandboxEntry

ROOT = Path(__file__).resolve().parents[2]
ENTRIES = {
    "clusterstack": "cluster-stack-operator",
    "monocle": "monocle-operator",
    "typesense": "typesense-operator",
}


@pytest.mark.parametrize(("name", "command"), sorted(ENTRIES.items()))
def test_a_sandbox_entry_names_a_chart_whose_command_is_installed_and_samples_that_exist(
    name: str, command: str
) -> None:
    (found,) = [e for e in entry_points(group=ENTRY_POINT_GROUP) if e.name == name]
    entry = found.load()
    assert isinstance(entry, SandboxEntry)
    values = yaml.safe_load((ROOT / "charts" / entry.chart / "values.yaml").read_text())
    assert values["command"] == command
    assert command in {e.name for e in entry_points(group="console_scripts")}
    assert entry.samples, "the sandbox brings every operator's sample to Ready"
    assert all((ROOT / sample).is_file() for sample in entry.samples)
