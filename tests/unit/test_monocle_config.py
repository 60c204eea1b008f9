"""config.yaml is judged before update-idents runs, and the Secret hash follows data only."""

from __future__ import annotations

import pytest

from monocle_operator.resources import DEFAULT_CONFIG, check_config, config_hash, secret_data_hash

SOURCE = "ConfigMap monocle-sample-api"


def test_the_default_config_is_valid_and_holds_the_demo_workspace() -> None:
    verdict = check_config(DEFAULT_CONFIG, SOURCE)
    assert verdict.valid
    assert verdict.message == f"config.yaml in {SOURCE} is valid; workspaces: demo"


@pytest.mark.parametrize(
    ("text", "reason", "message"),
    [
        (None, "ConfigMissing", f"{SOURCE} has no key config.yaml"),
        ("workspaces: [\n  - name: demo", "InvalidYAML", "is not valid YAML at line"),
        ("- just\n- a list\n", "InvalidConfig", "must be a mapping with a list 'workspaces'"),
        ("workspaces:\n  - crawlers: []\n", "InvalidConfig", "workspace 0 has no name"),
        (
            "workspaces:\n  - name: Demo\n",
            "InvalidWorkspaceName",
            "workspace name 'Demo' is not a valid index",
        ),
        ("workspaces:\n  - name: a b\n", "InvalidWorkspaceName", "'a b' is not a valid index name"),
        ("workspaces:\n  - name: _x\n", "InvalidWorkspaceName", "starting with a letter or digit"),
        ("workspaces:\n  - name: x\n  - name: x\n", "InvalidWorkspaceName", "'x' is named twice"),
    ],
)
def test_invalid_configs_say_why(text: str | None, reason: str, message: str) -> None:
    verdict = check_config(text, SOURCE)
    assert not verdict.valid
    assert verdict.reason == reason
    assert message in verdict.message


def test_valid_names_and_an_empty_workspace_list() -> None:
    assert check_config("workspaces:\n  - name: my-ws_1.prod\n", SOURCE).valid
    assert check_config("workspaces: []\n", SOURCE).message.endswith("workspaces: none")


def test_config_hash_is_stable_and_short() -> None:
    assert config_hash(DEFAULT_CONFIG) == config_hash(DEFAULT_CONFIG)
    assert config_hash(DEFAULT_CONFIG) != config_hash(DEFAULT_CONFIG + "\n")
    assert len(config_hash(DEFAULT_CONFIG)) == 16


def test_secret_hash_follows_data_and_is_keyed() -> None:
    generated = {"CRAWLERS_API_KEY": "a2V5"}
    base = secret_data_hash(b"key", generated, None)
    assert base == secret_data_hash(b"key", dict(generated), {})
    assert base != secret_data_hash(b"key", {**generated, "GITHUB_TOKEN": "dG9rZW4="}, None)
    assert base != secret_data_hash(b"key", generated, {"GITHUB_TOKEN": "dG9rZW4="})
    assert base != secret_data_hash(b"other-key", generated, None), "without the key, nothing can be guessed"
