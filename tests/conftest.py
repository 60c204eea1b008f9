"""Shared test set-up: the control-plane fixtures, and a marker per layer taken from the directory."""

from __future__ import annotations

import pytest

pytest_plugins = ["operator_core.testing.fixtures"]

_LAYERS = ("unit", "integration", "e2e")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        for layer in _LAYERS:
            if f"/tests/{layer}/" in str(item.path):
                item.add_marker(getattr(pytest.mark, layer))
