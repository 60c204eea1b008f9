"""Shared test set-up: the control-plane fixtures, and a marker per layer taken from the directory."""

from __future__ import annotations

from typing import Any

import pytest

from typesense_samples import SAMPLES, load_sample

pytest_plugins = ["operator_core.testing.fixtures", "operator_core.testing.nodeagent.fixtures"]

_LAYERS = ("unit", "integration", "e2e")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        for layer in _LAYERS:
            if f"/tests/{layer}/" in str(item.path):
                item.add_marker(getattr(pytest.mark, layer))


@pytest.fixture(scope="session")
def typesense_samples() -> dict[str, list[dict[str, Any]]]:
    """Every manifest in deploy/samples/, by file name without .yaml."""
    return {path.stem: load_sample(path.stem) for path in sorted(SAMPLES.glob("*.yaml"))}
