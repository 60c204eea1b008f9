"""The OCI release source against the real CNCF distribution registry, with releases pushed by oras-py
(another client, so that the two agree on the format, not only with themselves)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path

import oras.client
import pytest

from clusterstack_operator.releases.versions import ReleaseName
from clusterstack_operator.sources.base import ReleaseNotFound, SourceError
from clusterstack_operator.sources.oci import OciRegistry, OciSettings
from clusterstack_operator.sources.store import ReleaseStore
from operator_testkit.clusterstack_tools import ClusterStackTools, ensure_clusterstack_tools
from operator_testkit.registry import RunningRegistry, running_registry

REPOSITORY = "kaas/cluster-stacks"
METADATA = """\
apiVersion: metadata.clusterstack.x-k8s.io/v1alpha1
versions:
  clusterStack: {version}
  kubernetes: v1.30.10
  components:
    clusterAddon: v1
    nodeImage: v1
"""


@pytest.fixture(scope="module")
def tools() -> ClusterStackTools:
    return ensure_clusterstack_tools()


@pytest.fixture(scope="module")
def registry(tools: ClusterStackTools, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningRegistry]:
    with running_registry(tmp_path_factory.mktemp("registry"), binary=tools.registry) as running:
        yield running


@pytest.fixture(scope="module")
def tls_registry(
    tools: ClusterStackTools, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningRegistry]:
    with running_registry(
        tmp_path_factory.mktemp("tls-registry"), binary=tools.registry, tls=True
    ) as running:
        yield running


def release_files(root: Path, tag: str) -> tuple[ReleaseName, Path]:
    release = ReleaseName.parse(tag)
    directory = root / tag
    directory.mkdir(parents=True)
    (directory / "metadata.yaml").write_text(METADATA.format(version=release.version.dot))
    (directory / "hashes.json").write_text("{}")
    (directory / release.cluster_class_chart).write_bytes(os.urandom(8192))
    (directory / release.cluster_addon_chart("v1")).write_bytes(os.urandom(8192))
    return release, directory


def push(registry: RunningRegistry, directory: Path) -> None:
    """As csctl publishes: one layer per file, titled by its name, tagged with the release (dash form)."""
    client = oras.client.OrasClient(
        hostname=registry.host, insecure=registry.plain_http, tls_verify=str(registry.ca_cert or True)
    )
    here = Path.cwd()
    os.chdir(directory)  # oras-py titles each layer by the path it is given
    try:
        client.push(
            target=f"{registry.host}/{REPOSITORY}:{directory.name}",
            files=sorted(p.name for p in directory.iterdir()),
            disable_path_validation=True,
        )
    finally:
        os.chdir(here)


def source(registry: RunningRegistry) -> OciRegistry:
    return OciRegistry(
        OciSettings(
            f"{registry.host}/{REPOSITORY}", plain_http=registry.plain_http, ca_bundle=registry.ca_cert
        )
    )


async def test_releases_pushed_by_oras_are_listed_and_downloaded_whole(
    registry: RunningRegistry, tmp_path: Path
) -> None:
    pushed = [release_files(tmp_path / "releases", f"docker-scs-1-30-v{n}") for n in (1, 2)]
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


async def test_a_repository_nothing_was_published_to_has_no_releases(registry: RunningRegistry) -> None:
    oci = OciRegistry(OciSettings(f"{registry.host}/nobody/here", plain_http=True))
    try:
        assert await oci.list_releases() == []
    finally:
        await oci.aclose()


async def test_https_with_the_users_ca_bundle(tls_registry: RunningRegistry, tmp_path: Path) -> None:
    release, directory = release_files(tmp_path, "docker-scs-1-30-v0-sha-hdl6pjy")
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
