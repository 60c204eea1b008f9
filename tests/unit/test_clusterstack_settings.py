"""The Cluster Stack operator's settings: ours, upstream's variable names, and a readable refusal."""

from __future__ import annotations

from pathlib import Path

import pytest

from clusterstack_operator.controller.settings import release_source, settings_from_environment
from clusterstack_operator.sources.github import GitHubReleases
from clusterstack_operator.sources.local import LocalDirectory
from clusterstack_operator.sources.oci import OciRegistry
from operator_core.errors import SettingsError


def test_upstreams_github_variables_select_and_name_the_source() -> None:
    environ = {
        "GIT_PROVIDER": "github",
        "GIT_ORG_NAME": "sovereigncloudstack",
        "GIT_REPOSITORY_NAME": "stacks",
    }
    settings = settings_from_environment(environ)
    assert (settings.release_source, settings.github_organisation, settings.github_repository) == (
        "github",
        "sovereigncloudstack",
        "stacks",
    )
    source = release_source(settings, {**environ, "GIT_ACCESS_TOKEN": "ghp_secret"})
    assert isinstance(source, GitHubReleases)
    assert "ghp_secret" not in source.description


async def test_upstreams_oci_variables_select_the_registry_and_encode_the_token() -> None:
    environ = {"OCI_REGISTRY": "registry.scs.community", "OCI_REPOSITORY": "registry.scs.community/kaas/cs"}
    settings = settings_from_environment(environ)
    assert settings.release_source == "oci"
    source = release_source(settings, {**environ, "OCI_ACCESS_TOKEN": "token"})
    assert isinstance(source, OciRegistry)
    assert source.settings.path == "kaas/cs"
    await source.aclose()


def test_ours_win_over_upstreams() -> None:
    environ = {
        "GIT_PROVIDER": "github",
        "OPERATOR_SUITE_RELEASE_SOURCE": "local",
        "OPERATOR_SUITE_LOCAL_RELEASES": "/stacks",
    }
    settings = settings_from_environment(environ)
    assert settings.release_source == "local"
    source = release_source(settings, environ)
    assert isinstance(source, LocalDirectory)
    assert source.root == Path("/stacks")


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        ({"GIT_PROVIDER": "gitlab"}, "GIT_PROVIDER='gitlab' is not a valid value: allowed values: github"),
        ({"GIT_PROVIDER": "github"}, r"OPERATOR_SUITE_GITHUB_ORGANISATION \(or GIT_ORG_NAME\) is not set"),
        (
            {"OPERATOR_SUITE_RELEASE_SOURCE": "oci"},
            r"OPERATOR_SUITE_OCI_REPOSITORY \(or OCI_REPOSITORY\) is not set",
        ),
        ({"OCI_REPOSITORY": "registry.example"}, "names no repository after the host"),
        ({"OPERATOR_SUITE_RELEASE_SOURCE": "s3"}, "allowed values: github, oci, local"),
    ],
)
def test_settings_that_cannot_work_say_why(environ: dict[str, str], message: str) -> None:
    with pytest.raises(SettingsError, match=message):
        release_source(settings_from_environment(environ), environ)
