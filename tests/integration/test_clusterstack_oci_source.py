"""The OCI release source against the real CNCF distribution registry, with releases pushed by oras-py
(another client, so that the two agree on the format, not only with themselves)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from clusterstack_operator.releases.versions import ReleaseName
from clusterstack_operator.sources.base import ReleaseNotFound, SourceError
from clusterstack_operator.sources.oci import OciRegistry, OciSettings
from clusterstack_operator.sources.store import ReleaseStore
from operator_testkit.registry import RunningRegistry
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
        with pytest.raises(SourceError, match="ConnectError"):
            await untrusted.list_releases()
    finally:
        await untrusted.aclose()
