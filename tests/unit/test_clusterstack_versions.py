"""Cluster stack versions and release names: both spellings, numeric order, hash versions (property tests)."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from clusterstack_operator.api.v1alpha1 import VERSION_PATTERN
from clusterstack_operator.releases.versions import (
    Channel,
    InvalidVersion,
    ReleaseName,
    Version,
    newest,
    release_of_class,
)

majors = st.integers(min_value=0, max_value=10_000)
words = st.sampled_from(["alpha", "beta", "rc"])
numbers = st.integers(min_value=0, max_value=10_000)
hashes = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789", min_size=7, max_size=7)
stable = st.builds(lambda major: Version(major), majors)
custom = st.builds(lambda major, word, patch: Version(major, word, str(patch)), majors, words, numbers)


@pytest.mark.parametrize(
    ("older", "newer"),
    [
        ("v9", "v10"),  # numbers as numbers: upstream's string comparison gets this one wrong
        ("v1-alpha.5", "v1-alpha.6"),
        ("v1-alpha.5", "v2-alpha.4"),  # the seed's example
        ("v1-alpha.9", "v1-alpha.10"),
        ("v1-alpha-5", "v1-alpha.6"),  # either spelling
    ],
)
def test_the_order_of_the_seed_and_of_numbers(older: str, newer: str) -> None:
    assert Version.parse(older).sort_key() < Version.parse(newer).sort_key()
    assert newest([Version.parse(newer), Version.parse(older)]) == Version.parse(newer)


@given(st.one_of(stable, custom) | st.builds(lambda major, h: Version(major, "sha", h), majors, hashes))
def test_both_spellings_parse_to_the_same_version(version: Version) -> None:
    assert Version.parse(version.dash) == version
    assert Version.parse(version.dot) == version
    assert "." not in version.dash


@given(majors, majors)
def test_stable_versions_order_as_their_numbers(a: int, b: int) -> None:
    assert (Version.parse(f"v{a}").sort_key() < Version.parse(f"v{b}").sort_key()) == (a < b)


@given(majors, numbers, majors, numbers)
def test_custom_versions_order_by_major_then_patch(a: int, p: int, b: int, q: int) -> None:
    left, right = Version.parse(f"v{a}-alpha.{p}"), Version.parse(f"v{b}-alpha.{q}")
    assert (left.sort_key() < right.sort_key()) == ((a, p) < (b, q))


@given(st.lists(custom, min_size=1, max_size=20))
def test_newest_is_never_older_than_any_other(versions: list[Version]) -> None:
    best = newest(versions)
    assert best is not None
    assert all(best.sort_key() >= v.sort_key() for v in versions)


def test_hash_versions_have_no_order_by_name_only_by_publish_time() -> None:
    first, second = Version.parse("v0-sha.hdl6pjy"), Version.parse("v0-sha-d2lgujm")
    assert first.channel is Channel.HASH
    assert second.dot == "v0-sha.d2lgujm"
    with pytest.raises(InvalidVersion, match="no order by name"):
        first.sort_key()
    assert newest([first, second]) is None
    published = {first: datetime(2026, 1, 2, tzinfo=UTC), second: datetime(2026, 1, 1, tzinfo=UTC)}
    assert newest([first, second], published) == first


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("1", "not a cluster stack version"),
        ("v01", "not a cluster stack version"),
        ("v1-alpha", "not a cluster stack version"),
        ("v1-alpha.x1", "must be a number"),
        ("V1", "not a cluster stack version"),
    ],
)
def test_bad_versions_are_refused_with_the_grammar(text: str, why: str) -> None:
    with pytest.raises(InvalidVersion, match=why):
        Version.parse(text)


@pytest.mark.parametrize(
    "text",
    ["v1", "v10", "v0", "v1-alpha.5", "v1-alpha-5", "v0-sha.hdl6pjy", "v0-sha-hdl6pjy", "v2-beta.10",
     "v1-alpha.x1", "v01", "v1-alpha", "v1-alpha.", "V1", "v1-Alpha.1", "v1-sha.", "v1.0"],
)  # fmt: skip
def test_the_crd_admits_exactly_the_versions_the_parser_reads(text: str) -> None:
    """A version the API server admits but the parser refuses would be dropped without a word."""
    try:
        Version.parse(text)
        parsed = True
    except InvalidVersion:
        parsed = False
    assert bool(re.fullmatch(VERSION_PATTERN, text)) is parsed


def test_release_names_tags_assets_and_the_cluster_class() -> None:
    release = ReleaseName.of("docker", "scs", "1.30", "v0-sha.hdl6pjy")
    assert release.tag == "docker-scs-1-30-v0-sha-hdl6pjy"
    assert release.stack == "docker-scs-1-30"
    assert release.cluster_class == "docker-scs-1-30-v0-sha.hdl6pjy"
    assert release.cluster_class_chart == "docker-scs-1-30-cluster-class-v0-sha.hdl6pjy.tgz"
    assert release.cluster_addon_chart("v2") == "docker-scs-1-30-cluster-addon-v2.tgz"
    assert ReleaseName.of("myprovider", "xyz", "1.26", "v6").tag == "myprovider-xyz-1-26-v6"
    assert ReleaseName.parse("docker-scs-1-30-v1-alpha-5").version == Version(1, "alpha", "5")


@pytest.mark.parametrize(
    ("cluster_class", "release"),
    [
        ("docker-scs-1-30-v0-sha.hdl6pjy", "docker-scs-1-30-v0-sha-hdl6pjy"),  # dot form, as rendered
        ("docker-scs-1-30-v0-sha-hdl6pjy", "docker-scs-1-30-v0-sha-hdl6pjy"),  # dash form
        ("docker-scs-1-30-v1", "docker-scs-1-30-v1"),
        ("openstack-scs-1-29-v2-alpha.3", "openstack-scs-1-29-v2-alpha-3"),
        ("my-own-class", None),
    ],
)
def test_a_cluster_class_matches_its_release_through_both_spellings(
    cluster_class: str, release: str | None
) -> None:
    assert release_of_class(cluster_class) == release


@given(
    st.from_regex(r"[a-z][a-z0-9]{0,9}", fullmatch=True),
    st.from_regex(r"[a-z][a-z0-9]{0,9}", fullmatch=True),
    st.integers(1, 2),
    st.integers(0, 40),
    st.one_of(stable, custom),
)
def test_a_release_name_round_trips_through_tag_and_class(
    provider: str, name: str, major: int, minor: int, version: Version
) -> None:
    release = ReleaseName.of(provider, name, f"{major}.{minor}", version)
    assert ReleaseName.parse(release.tag) == release
    assert release_of_class(release.cluster_class) == release.tag
