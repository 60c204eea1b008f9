"""Who reads a stack's own source: a keyed hash of the source and its credentials, under which its
downloads are kept, so that a download is served only to the same credentials (issue 65)."""

from __future__ import annotations

import base64
import json
import stat
from pathlib import Path
from typing import Any

import pytest

from clusterstack_operator.api.v1alpha1 import ReleaseSourceSpec
from clusterstack_operator.controller.runtime import StackRuntime
from clusterstack_operator.controller.settings import ClusterStackSettings
from clusterstack_operator.controller.stack_sources import identity_key, identity_salt
from clusterstack_operator.helm import RegistryAccess
from clusterstack_operator.releases.versions import ReleaseName

SALT = b"s" * 32
OCI = ReleaseSourceSpec.model_validate({"oci": {"repository": "registry.example.com/kaas/stacks"}})
GITHUB = ReleaseSourceSpec.model_validate({"github": {"organization": "o", "repository": "r"}})
OWNER = {"username": "owner", "password": "owner-pa55", "access_token": None, "ca": None}


@pytest.mark.parametrize(
    ("spec", "one", "other", "same"),
    [
        (OCI, OWNER, dict(OWNER), True),
        (OCI, OWNER, {**OWNER, "password": "wrong"}, False),
        (OCI, OWNER, {}, False),
        (OCI, OWNER, {**OWNER, "username": "someone-else"}, False),
        (OCI, OWNER, {**OWNER, "ca": "-----BEGIN CERTIFICATE-----"}, False),
        (OCI, {"access_token": "t1"}, {"access_token": "t2"}, False),
        (GITHUB, {"token": "ghp_1"}, {"token": "ghp_2"}, False),
        (GITHUB, {"token": "ghp_1"}, {"token": None}, False),
    ],
)
def test_only_the_same_credentials_share_an_identity(
    spec: ReleaseSourceSpec, one: dict[str, Any], other: dict[str, Any], same: bool
) -> None:
    assert (identity_key(SALT, spec, one) == identity_key(SALT, spec, other)) is same


def test_an_identity_gives_no_credential_away_and_depends_on_the_stores_salt() -> None:
    key = identity_key(SALT, OCI, OWNER)
    assert "owner" not in key
    assert len(key) == 24
    assert identity_key(b"t" * 32, OCI, OWNER) != key
    assert identity_key(SALT, GITHUB, {"token": None}) != identity_key(SALT, OCI, {})


def test_the_salt_is_made_once_readable_by_the_operator_alone(tmp_path: Path) -> None:
    salt = identity_salt(tmp_path / "sources")
    assert len(salt) == 32
    assert identity_salt(tmp_path / "sources") == salt
    mode = stat.S_IMODE((tmp_path / "sources" / ".identity-salt").stat().st_mode)
    assert mode == 0o600
    assert identity_salt(tmp_path / "other") != salt


def test_a_release_gone_everywhere_leaves_no_download_of_any_identity(tmp_path: Path) -> None:
    settings = ClusterStackSettings(release_source="local", release_dir=tmp_path, local_releases=tmp_path)
    runtime = StackRuntime.from_settings(settings, "test")
    release, kept = ReleaseName.parse("docker-scs-1-30-v1"), ReleaseName.parse("docker-scs-1-30-v2")
    keys = ["oci-aaaa/one", "oci-aaaa/two", "oci-bbbb/one", ""]
    for key in keys:
        for name in (release, kept):
            runtime.store(key).path(name).mkdir(parents=True)
    runtime.forget(release, "oci-aaaa")
    assert [runtime.store(key).has(release) for key in keys] == [False, False, True, True]
    assert all(runtime.store(key).has(kept) for key in keys)
    runtime.forget(release, "")
    assert not runtime.store("").has(release)
    assert runtime.store("oci-bbbb/one").has(release)


def test_helm_gets_the_sources_registry_login_and_ca_in_files_of_its_own_removed_after(
    tmp_path: Path,
) -> None:
    """What a chart's dependencies in the source's OCI registry are fetched with: the stack's own
    credentials (a registry config helm reads, this user's alone) and CA, gone once helm has ended."""
    access = RegistryAccess("127.0.0.1:5000", "owner", "owner-pa55", ca_pem="-----BEGIN CERTIFICATE-----\n")
    with access.arguments(tmp_path) as arguments:
        config = Path(arguments[arguments.index("--registry-config") + 1])
        ca = Path(arguments[arguments.index("--ca-file") + 1])
        auths = json.loads(config.read_text())["auths"]
        assert base64.b64decode(auths["127.0.0.1:5000"]["auth"]).decode() == "owner:owner-pa55"
        assert stat.S_IMODE(config.stat().st_mode) == 0o600
        assert ca.read_text().startswith("-----BEGIN CERTIFICATE-----")
        assert "--plain-http" not in arguments
    assert not config.exists()
    assert not ca.exists()
    assert "owner-pa55" not in repr(access)
    with RegistryAccess("127.0.0.1:5000", plain_http=True).arguments(tmp_path) as anonymous:
        assert json.loads(Path(anonymous[1]).read_text()) == {"auths": {}}
        assert anonymous[2:] == ["--plain-http"]
