"""The OCI release source against the real CNCF distribution registry, with releases pushed by oras-py
(another client, so that the two agree on the format, not only with themselves), and with the registry
asking for credentials each way it can: htpasswd (Basic, over TLS), a token service with short-lived
tokens, anonymous Bearer pulls, and a wrong password."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import pytest

from clusterstack_operator.releases.versions import ReleaseName
from clusterstack_operator.sources.base import ReleaseNotFound, SourceError
from clusterstack_operator.sources.oci import OciRegistry, OciSettings
from clusterstack_operator.sources.store import ReleaseStore
from operator_testkit.clusterstack_tools import ClusterStackTools
from operator_testkit.registry import RunningRegistry, running_registry
from operator_testkit.registry_auth import htpasswd_auth, token_service
from releases import publish_release, push_release

REPOSITORY = "kaas/cluster-stacks"


def push(registry: RunningRegistry, directory: Path) -> None:
    push_release(registry, directory, REPOSITORY)


def source(registry: RunningRegistry) -> OciRegistry:
    return OciRegistry(
        OciSettings(
            f"{registry.host}/{REPOSITORY}", plain_http=registry.plain_http, ca_bundle=registry.ca_cert
        )
    )


async def test_releases_pushed_by_oras_are_listed_and_downloaded_whole(
    oci_registry: RunningRegistry, tmp_path: Path
) -> None:
    registry = oci_registry
    pushed = [publish_release(tmp_path / "releases", f"docker-scs-1-30-v{n}") for n in (1, 2)]
    for _, directory in pushed:
        await asyncio.to_thread(push, registry, directory)
    oci = source(registry)
    try:
        tags = sorted(r.tag for r in await oci.list_releases())
        assert tags == ["docker-scs-1-30-v1", "docker-scs-1-30-v2"]
        store = ReleaseStore(tmp_path / "store")
        release, directory = pushed[1]
        metadata = await store.fetch(release, oci)
        assert metadata.versions.cluster_stack == "v2"
        for file in directory.iterdir():
            assert (store.path(release) / file.name).read_bytes() == file.read_bytes()
        with pytest.raises(ReleaseNotFound, match="has no release docker-scs-1-30-v9"):
            await store.fetch(ReleaseName.parse("docker-scs-1-30-v9"), oci)
    finally:
        await oci.aclose()


async def test_a_repository_nothing_was_published_to_has_no_releases(oci_registry: RunningRegistry) -> None:
    registry = oci_registry
    oci = OciRegistry(OciSettings(f"{registry.host}/nobody/here", plain_http=True))
    try:
        assert await oci.list_releases() == []
    finally:
        await oci.aclose()


async def test_https_with_the_users_ca_bundle(oci_registry_tls: RunningRegistry, tmp_path: Path) -> None:
    tls_registry = oci_registry_tls
    release, directory = publish_release(tmp_path, "docker-scs-1-30-v0-sha-hdl6pjy")
    await asyncio.to_thread(push, tls_registry, directory)
    oci = source(tls_registry)
    try:
        assert [r.tag for r in await oci.list_releases()] == [release.tag]
        await ReleaseStore(tmp_path / "store").fetch(release, oci)
    finally:
        await oci.aclose()
    untrusted = OciRegistry(OciSettings(f"{tls_registry.host}/{REPOSITORY}"))  # the system's CAs only
    try:
        with pytest.raises(SourceError, match="Certificate"):
            await untrusted.list_releases()
    finally:
        await untrusted.aclose()


USERS = {"stacks": "s3cr3t-registry-pa55"}


def pushed_then_guarded(
    tools: ClusterStackTools, directory: Path, releases: Path, auth: dict, *, tls: bool = False
) -> contextlib.AbstractContextManager[RunningRegistry]:
    """A registry holding the releases of ``releases`` (pushed while it asked for nothing), started again
    on the same storage asking for credentials as ``auth`` says."""
    with running_registry(directory, binary=tools.registry, tls=tls) as open_registry:
        for release in sorted(releases.iterdir()):
            push(open_registry, release)
    return running_registry(directory, binary=tools.registry, tls=tls, auth=auth)


def with_credentials(
    registry: RunningRegistry, user: str | None = None, password: str | None = None
) -> OciRegistry:
    return OciRegistry(
        OciSettings(
            f"{registry.host}/{REPOSITORY}",
            username=user,
            password=password,
            plain_http=registry.plain_http,
            ca_bundle=registry.ca_cert,
        )
    )


async def test_htpasswd_over_tls_takes_the_password_and_a_wrong_one_is_said_without_it(
    clusterstack_tools: ClusterStackTools, tmp_path: Path
) -> None:
    release, _ = publish_release(tmp_path / "releases", "docker-scs-1-30-v1")
    auth = htpasswd_auth(tmp_path / "auth", USERS)
    with pushed_then_guarded(
        clusterstack_tools, tmp_path / "registry", tmp_path / "releases", auth, tls=True
    ) as registry:
        oci = with_credentials(registry, "stacks", USERS["stacks"])
        try:
            assert [r.tag for r in await oci.list_releases()] == [release.tag]
            await ReleaseStore(tmp_path / "store").fetch(release, oci)
        finally:
            await oci.aclose()
        for user, password in (("stacks", "wrong-password-123"), (None, None)):
            refused = with_credentials(registry, user, password)
            store = ReleaseStore(tmp_path / f"refused-{user}")
            try:
                with pytest.raises(SourceError) as caught:
                    await store.fetch(release, refused)
            finally:
                await refused.aclose()
            said = str(caught.value)
            assert f"OCI repository {registry.host}/{REPOSITORY}" in said
            assert "HTTP 401" in said, said
            assert "wrong-password-123" not in said
            assert list(store.root.iterdir()) == [], "nothing half-downloaded"


async def test_short_lived_tokens_are_bought_again_before_they_expire_and_when_refused(
    clusterstack_tools: ClusterStackTools, tmp_path: Path
) -> None:
    release, _ = publish_release(tmp_path / "releases", "docker-scs-1-30-v2")
    async with token_service(USERS, lifetime_seconds=2) as tokens:
        auth = tokens.auth(tmp_path / "auth")
        with pushed_then_guarded(
            clusterstack_tools, tmp_path / "registry", tmp_path / "releases", auth
        ) as registry:
            oci = with_credentials(registry, "stacks", USERS["stacks"])
            try:
                assert [r.tag for r in await oci.list_releases()] == [release.tag]
                assert len(tokens.issued) == 1
                await oci.list_releases()
                assert len(tokens.issued) == 1, "a token is used while it lasts"
                await asyncio.sleep(2)
                await oci.list_releases()
                assert len(tokens.issued) == 2, "and bought again before it expires"
                tokens.next_token_expired = True  # as if revoked: the registry refuses the next one
                await asyncio.sleep(2)
                await ReleaseStore(tmp_path / "store").fetch(release, oci)
            finally:
                await oci.aclose()
    assert [t.refused_by_registry for t in tokens.issued] == [False, False, True, False]
    assert all(t.account == "stacks" for t in tokens.issued)


async def test_an_anonymous_bearer_pull_needs_no_credentials_and_a_wrong_password_is_refused(
    clusterstack_tools: ClusterStackTools, tmp_path: Path
) -> None:
    """As Harbor and ghcr.io serve public repositories: a 401 with a Bearer challenge, and a token for
    anyone who asks."""
    release, _ = publish_release(tmp_path / "releases", "docker-scs-1-30-v3")
    async with token_service(USERS, anonymous_pull=True) as tokens:
        auth = tokens.auth(tmp_path / "auth")
        with pushed_then_guarded(
            clusterstack_tools, tmp_path / "registry", tmp_path / "releases", auth
        ) as registry:
            anonymous = with_credentials(registry)
            try:
                assert [r.tag for r in await anonymous.list_releases()] == [release.tag]
                await ReleaseStore(tmp_path / "store").fetch(release, anonymous)
            finally:
                await anonymous.aclose()
            assert {t.account for t in tokens.issued} == {None}
            wrong = with_credentials(registry, "stacks", "wrong-password-456")
            try:
                with pytest.raises(SourceError) as caught:
                    await wrong.list_releases()
            finally:
                await wrong.aclose()
    said = str(caught.value)
    assert f"its token service {tokens.url}/token" in said
    assert "refused the credentials (HTTP 401)" in said
    assert "wrong-password-456" not in said
