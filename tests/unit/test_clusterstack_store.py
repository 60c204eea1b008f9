"""Downloaded releases on disk: whole or not at all, never fetched twice, and wrong assets named."""

from __future__ import annotations

from pathlib import Path

import pytest

from clusterstack_operator.releases.assets import InvalidRelease
from clusterstack_operator.releases.versions import ReleaseName
from clusterstack_operator.sources.base import ReleaseNotFound, SourceError
from clusterstack_operator.sources.local import LocalDirectory
from clusterstack_operator.sources.store import ReleaseStore
from releases import publish_release

RELEASE = ReleaseName.parse("docker-scs-1-30-v2")
METADATA = """\
apiVersion: metadata.clusterstack.x-k8s.io/v1alpha1
versions:
  clusterStack: v2
  kubernetes: v1.30.10
  components:
    clusterAddon: v3
    nodeImage: v1
"""


def publish(
    root: Path, release: ReleaseName = RELEASE, metadata: str = METADATA, *, addon: bool = True
) -> Path:
    _, directory = publish_release(
        root, release.tag, addon_version="v3", metadata=metadata, with_addon_chart=addon
    )
    return directory


class Counting(LocalDirectory):
    downloads = 0

    async def download(self, tag: str, into: Path) -> None:
        self.downloads += 1
        await super().download(tag, into)


class BreaksHalfway(LocalDirectory):
    """Writes the first asset, then loses the connection."""

    async def download(self, tag: str, into: Path) -> None:
        (into / "metadata.yaml").write_text(METADATA)
        raise SourceError("connection reset after 1 of 4 assets")


async def test_a_whole_release_is_stored_once_and_never_downloaded_again(tmp_path: Path) -> None:
    publish(tmp_path / "source")
    source = Counting(tmp_path / "source")
    store = ReleaseStore(tmp_path / "store")
    metadata = await store.fetch(RELEASE, source)
    assert metadata.kubernetes_version == "v1.30.10"
    assert metadata.cluster_addon_version.dot == "v3"
    assert await store.fetch(RELEASE, source) == metadata
    assert source.downloads == 1
    assert sorted(p.name for p in (tmp_path / "store").iterdir()) == [RELEASE.tag]


async def test_a_download_that_fails_halfway_leaves_nothing_and_the_next_try_starts_clean(
    tmp_path: Path,
) -> None:
    publish(tmp_path / "source")
    store = ReleaseStore(tmp_path / "store")
    with pytest.raises(SourceError, match="connection reset"):
        await store.fetch(RELEASE, BreaksHalfway(tmp_path / "source"))
    assert list((tmp_path / "store").iterdir()) == []
    assert (await store.fetch(RELEASE, LocalDirectory(tmp_path / "source"))).versions.cluster_stack == "v2"


@pytest.mark.parametrize(
    ("metadata", "addon", "message"),
    [
        (METADATA, False, "the release lacks docker-scs-1-30-cluster-addon-v3.tgz"),
        ("versions: [", True, "metadata.yaml is not YAML"),
        (
            "apiVersion: metadata.clusterstack.x-k8s.io/v1alpha1\nversions: {}\n",
            True,
            "versions.clusterStack",
        ),
        (
            METADATA.replace("clusterStack: v2", "clusterStack: v1"),
            True,
            "says version v1, but the release is v2",
        ),
        (METADATA.replace("metadata.clusterstack", "other"), True, "has apiVersion other.x-k8s.io/v1alpha1"),
    ],
)
async def test_wrong_assets_are_named_and_leave_nothing(
    tmp_path: Path, metadata: str, addon: bool, message: str
) -> None:
    publish(tmp_path / "source", metadata=metadata, addon=addon)
    store = ReleaseStore(tmp_path / "store")
    with pytest.raises(InvalidRelease, match=message):
        await store.fetch(RELEASE, LocalDirectory(tmp_path / "source"))
    assert list((tmp_path / "store").iterdir()) == []


async def test_a_release_the_source_does_not_have_is_said_so(tmp_path: Path) -> None:
    (tmp_path / "source").mkdir()
    with pytest.raises(ReleaseNotFound, match="has no release docker-scs-1-30-v2"):
        await ReleaseStore(tmp_path / "store").fetch(RELEASE, LocalDirectory(tmp_path / "source"))


def test_a_download_cut_off_by_a_crash_is_cleared_when_the_store_opens(tmp_path: Path) -> None:
    leftover = tmp_path / "store" / ".downloading-docker-scs-1-30-v2-abc"
    leftover.mkdir(parents=True)
    (leftover / "metadata.yaml").write_text(METADATA)
    ReleaseStore(tmp_path / "store")
    assert not leftover.exists()


async def test_the_local_source_lists_its_releases_with_their_times(tmp_path: Path) -> None:
    publish(tmp_path / "source")
    publish(tmp_path / "source", ReleaseName.parse("docker-scs-1-30-v3"))
    listed = await LocalDirectory(tmp_path / "source").list_releases()
    assert [r.tag for r in listed] == ["docker-scs-1-30-v2", "docker-scs-1-30-v3"]
    assert all(r.published_at is not None for r in listed)
    with pytest.raises(SourceError, match="does not exist"):
        await LocalDirectory(tmp_path / "missing").list_releases()
