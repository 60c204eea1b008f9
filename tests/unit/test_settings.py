"""Settings read OPERATOR_SUITE_* variables and keep their defaults otherwise."""

from __future__ import annotations

from pathlib import Path

from operator_core.settings import ControlPlaneSettings, KubeSettings, from_env


def test_defaults_without_environment() -> None:
    assert from_env(KubeSettings, {}) == KubeSettings()


def test_each_type_is_parsed() -> None:
    settings = from_env(
        ControlPlaneSettings,
        {"OPERATOR_SUITE_CACHE_DIR": "/x/y", "OPERATOR_SUITE_START_TIMEOUT": "5.5"},
    )
    assert settings.cache_dir == Path("/x/y")
    assert settings.start_timeout == 5.5
    assert from_env(KubeSettings, {"OPERATOR_SUITE_FIELD_MANAGER": "me"}).field_manager == "me"
