"""Settings read OPERATOR_SUITE_* variables, keep their defaults otherwise, refuse what they do not allow."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Literal

import pytest

from operator_core.errors import SettingsError
from operator_core.runner import check_settings
from operator_core.settings import KubeSettings, from_env
from operator_testkit.settings import ControlPlaneSettings
from typesense_operator.controller.settings import TypesenseSettings


class Colour(Enum):
    RED = "red"
    BLUE = "blue"


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


@dataclass(frozen=True)
class Chosen:
    mode: Literal["pod-ip", "api-proxy"] = "pod-ip"
    """A choice among words."""
    colour: Colour = Colour.RED
    """A choice among an Enum's values."""
    count: int = 1
    ratio: float = 0.5
    enabled: bool = False


def test_a_literal_or_enum_setting_takes_its_allowed_values() -> None:
    chosen = from_env(Chosen, {"OPERATOR_SUITE_MODE": "api-proxy", "OPERATOR_SUITE_COLOUR": "blue"})
    assert (chosen.mode, chosen.colour) == ("api-proxy", Colour.BLUE)


@pytest.mark.parametrize(
    ("variable", "value", "explained"),
    [
        ("OPERATOR_SUITE_MODE", "api_proxy", "allowed values: pod-ip, api-proxy"),
        ("OPERATOR_SUITE_COLOUR", "green", "allowed values: red, blue"),
        ("OPERATOR_SUITE_COUNT", "many", "expected int"),
        ("OPERATOR_SUITE_RATIO", "1,5", "expected float"),
        ("OPERATOR_SUITE_ENABLED", "sure", "not a boolean"),
    ],
)
def test_a_value_the_setting_does_not_allow_is_refused_with_the_reason(
    variable: str, value: str, explained: str
) -> None:
    with pytest.raises(SettingsError) as refused:
        from_env(Chosen, {variable: value})
    assert str(refused.value).startswith(f"{variable}={value!r} is not a valid value")
    assert explained in str(refused.value)


def test_the_typesense_probe_route_is_one_of_two_words() -> None:
    with pytest.raises(SettingsError, match="allowed values: pod-ip, api-proxy"):
        from_env(TypesenseSettings, {"OPERATOR_SUITE_PROBE_VIA": "api_proxy"})


def test_a_bad_setting_stops_the_operator_before_anything_else(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped, _environment(OPERATOR_SUITE_RESYNC_SECONDS="soon"):
        check_settings("some-operator", ())
    assert stopped.value.code == 2
    assert (
        "some-operator: OPERATOR_SUITE_RESYNC_SECONDS='soon' is not a valid value" in capsys.readouterr().err
    )


@contextlib.contextmanager
def _environment(**variables: str) -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        for name, value in variables.items():
            patch.setenv(name, value)
        yield
