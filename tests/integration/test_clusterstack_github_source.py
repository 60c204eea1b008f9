"""The GitHub release source against the suite's fake GitHub on loopback: every page, the
token, downloads into the release store, and a download that breaks halfway."""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from clusterstack_operator.releases.versions import ReleaseName
from clusterstack_operator.sources.base import ReleaseNotFound, SourceError
from clusterstack_operator.sources.github import GitHubReleases
from clusterstack_operator.sources.store import ReleaseStore
from operator_testkit.fakegithub import FakeGitHub, fake_github
from releases import publish_release

TOKEN = "ghp_test_token_0123456789"


@contextlib.asynccontextmanager
async def github_source(github: FakeGitHub, token: str = TOKEN) -> AsyncIterator[GitHubReleases]:
    source = GitHubReleases("sovereigncloudstack", "cluster-stacks", token, base_url=github.base_url)
    try:
        yield source
    finally:
        await source.aclose()


async def test_every_page_of_releases_is_read(tmp_path: Path) -> None:
    now = time.time()
    for number in range(1, 231):
        publish_release(tmp_path, f"docker-scs-1-30-v{number}", published_at=now - 1000 + number)
    async with fake_github(tmp_path, token=TOKEN) as github, github_source(github, TOKEN) as source:
        releases = await source.list_releases()
    assert len(releases) == 230  # upstream reads the first 30 only
    assert releases[0].tag == "docker-scs-1-30-v230"  # newest first, with its publish time
    assert releases[0].published_at is not None
    assert sum("/releases?" in path for path in github.requests) == 3


async def test_a_refused_token_is_said_so_without_the_token(tmp_path: Path) -> None:
    publish_release(tmp_path, "docker-scs-1-30-v1")
    wrong = "ghp_wrong_token_9876543210"
    async with fake_github(tmp_path, token=TOKEN) as github, github_source(github, wrong) as source:
        with pytest.raises(SourceError, match="GitHub refused the access token") as caught:
            await source.list_releases()
    assert wrong not in str(caught.value)


async def test_a_release_is_downloaded_whole_into_the_store(tmp_path: Path) -> None:
    release, _ = publish_release(tmp_path / "github", "docker-scs-1-30-v2")
    served = tmp_path / "github"
    async with fake_github(served, token=TOKEN) as github, github_source(github, TOKEN) as source:
        store = ReleaseStore(tmp_path / "store")
        metadata = await store.fetch(release, source)
        with pytest.raises(ReleaseNotFound, match="not found"):
            await store.fetch(ReleaseName.parse("docker-scs-1-30-v3"), source)
    assert metadata.kubernetes_version == "v1.30.10"
    stored = sorted(p.name for p in store.path(release).iterdir())
    assert stored == sorted(p.name for p in (tmp_path / "github" / release.tag).iterdir())
    for name in stored:
        assert (store.path(release) / name).read_bytes() == (
            tmp_path / "github" / release.tag / name
        ).read_bytes()


async def test_a_download_that_breaks_halfway_leaves_nothing_and_succeeds_next_time(tmp_path: Path) -> None:
    release, _ = publish_release(tmp_path / "github", "docker-scs-1-30-v2")
    served = tmp_path / "github"
    async with fake_github(served, token=TOKEN) as github, github_source(github, TOKEN) as source:
        store = ReleaseStore(tmp_path / "store")
        github.break_downloads_after = 2
        with pytest.raises(SourceError, match="downloading release docker-scs-1-30-v2"):
            await store.fetch(release, source)
        assert list((tmp_path / "store").iterdir()) == []
        await store.fetch(release, source)
    assert store.has(release)
