"""Which releases a ClusterStack creates, keeps and deletes: a table of the seed's cases."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from clusterstack_operator.controller.stack.reconcile import releases_not_ready
from clusterstack_operator.releases.decide import (
    ExistingRelease,
    StackIdentity,
    class_namespace_of,
    cluster_class_of,
    cluster_in,
    clusters_without_addon,
    incomplete_release_retry_seconds,
    is_paused,
    plan_releases,
)
from clusterstack_operator.releases.versions import Channel, ReleaseName

STACK = StackIdentity("docker", "scs", "1.30")


def tags(names: tuple[ReleaseName, ...]) -> list[str]:
    return [name.tag for name in names]


def have(*versions: str, ready: bool = True) -> list[ExistingRelease]:
    return [ExistingRelease(STACK.release(v), ready=ready) for v in versions]


def offered(*tags_: str) -> list[ReleaseName]:
    return [ReleaseName.parse(tag) for tag in tags_]


def test_listed_versions_are_created_and_kept_whatever_is_newer() -> None:
    plan = plan_releases(STACK, listed=["v1", "v3"], auto_subscribe=False, existing=have("v1"))
    assert tags(plan.create) == ["docker-scs-1-30-v3"]
    assert tags(plan.keep) == ["docker-scs-1-30-v1"]
    assert plan.delete == ()


def test_auto_subscribe_picks_the_newest_of_its_channel_only() -> None:
    available = offered(
        "docker-scs-1-30-v9",
        "docker-scs-1-30-v10",  # newer than v9: numbers compare as numbers
        "docker-scs-1-30-v11-alpha-1",  # another channel
        "docker-scs-1-29-v12",  # another Kubernetes version
        "openstack-scs-1-30-v13",  # another provider
        "docker-other-1-30-v14",  # another stack
        "docker-scs-1-30-v0-sha-hdl6pjy",  # hash versions are never subscribed to
    )
    plan = plan_releases(STACK, listed=[], auto_subscribe=True, available=available)
    assert tags(plan.create) == ["docker-scs-1-30-v10"]


def test_the_custom_channel_orders_the_seeds_example() -> None:
    custom = StackIdentity("docker", "scs", "1.30", Channel.CUSTOM)
    available = offered(
        "docker-scs-1-30-v1-alpha-5", "docker-scs-1-30-v1-alpha-6", "docker-scs-1-30-v2-alpha-4"
    )
    plan = plan_releases(custom, listed=[], auto_subscribe=True, available=available)
    assert tags(plan.create) == ["docker-scs-1-30-v2-alpha-4"]


def test_a_new_release_replaces_the_latest_only_once_it_is_ready() -> None:
    existing = [*have("v5"), *have("v6", ready=False)]
    available = offered("docker-scs-1-30-v5", "docker-scs-1-30-v6")
    waiting = plan_releases(STACK, listed=[], auto_subscribe=True, available=available, existing=existing)
    assert waiting.latest is not None
    assert waiting.latest.tag == "docker-scs-1-30-v5"
    assert waiting.delete == ()
    assert waiting.why_kept["docker-scs-1-30-v5"] == "latest ready release"

    ready = plan_releases(
        STACK, listed=[], auto_subscribe=True, available=available, existing=have("v5", "v6")
    )
    assert ready.latest is not None
    assert ready.latest.tag == "docker-scs-1-30-v6"
    assert tags(ready.delete) == ["docker-scs-1-30-v5"]


@pytest.mark.parametrize(
    "cluster",
    [
        {"spec": {"topology": {"class": "docker-scs-1-30-v4"}}},  # v1beta1
        {"spec": {"topology": {"classRef": {"name": "docker-scs-1-30-v4"}}}},  # v1beta2
    ],
)
def test_a_release_used_by_a_cluster_is_kept_in_either_api_version(cluster: dict[str, object]) -> None:
    used = cluster_class_of(cluster)
    assert used == "docker-scs-1-30-v4"
    plan = plan_releases(
        STACK, listed=["v6"], auto_subscribe=False, existing=have("v4", "v5", "v6"), classes_in_use=[used]
    )
    assert tags(plan.keep) == ["docker-scs-1-30-v4", "docker-scs-1-30-v6"]
    assert tags(plan.delete) == ["docker-scs-1-30-v5"]
    assert plan.why_kept["docker-scs-1-30-v4"] == "used by a Cluster"


def test_a_hash_release_in_use_is_matched_through_its_dot_spelling() -> None:
    plan = plan_releases(
        STACK,
        listed=[],
        auto_subscribe=False,
        existing=have("v0-sha.hdl6pjy", "v1"),
        classes_in_use=["docker-scs-1-30-v0-sha.hdl6pjy"],  # as the chart renders it
    )
    assert tags(plan.keep) == ["docker-scs-1-30-v0-sha-hdl6pjy", "docker-scs-1-30-v1"]


def test_hash_releases_are_latest_by_publish_time() -> None:
    first, second = STACK.release("v0-sha.aaaaaaa"), STACK.release("v0-sha.bbbbbbb")
    published = {first: datetime(2026, 5, 2, tzinfo=UTC), second: datetime(2026, 5, 1, tzinfo=UTC)}
    plan = plan_releases(
        STACK,
        listed=["v0-sha.aaaaaaa", "v0-sha.bbbbbbb"],
        auto_subscribe=False,
        published=published,
        existing=have("v0-sha.aaaaaaa", "v0-sha.bbbbbbb"),
    )
    assert plan.latest == first


def test_listed_hash_releases_without_publish_times_are_latest_by_when_they_were_made() -> None:
    """Upstream's docker example: hash versions in spec.versions, no auto-subscribe, so no listing and
    no publish times; the release made last is the latest, and a lone one is latest too."""
    made = {
        "v0-sha.bbbbbbb": datetime(2026, 5, 1, tzinfo=UTC),
        "v0-sha.aaaaaaa": datetime(2026, 5, 2, tzinfo=UTC),
    }
    existing = [ExistingRelease(STACK.release(v), ready=True, created=t) for v, t in made.items()]
    plan = plan_releases(STACK, listed=list(made), auto_subscribe=False, existing=existing)
    assert plan.latest == STACK.release("v0-sha.aaaaaaa")
    (lone,) = have("v0-sha.ccccccc")
    lone = ExistingRelease(lone.name, ready=True, created=datetime(2026, 5, 3, tzinfo=UTC))
    plan = plan_releases(STACK, listed=["v0-sha.ccccccc"], auto_subscribe=False, existing=[lone])
    assert plan.latest == lone.name
    assert plan.why_kept[lone.name.tag] == "listed in spec.versions"


def test_releases_of_other_stacks_are_not_ours_to_delete() -> None:
    others = [ExistingRelease(ReleaseName.parse("docker-scs-1-29-v1"), ready=True)]
    plan = plan_releases(STACK, listed=[], auto_subscribe=False, existing=others)
    assert plan.delete == ()
    assert plan.keep == ()


def test_a_release_deleted_by_accident_is_created_again() -> None:
    plan = plan_releases(STACK, listed=["v2", "v3"], auto_subscribe=False, existing=have("v3"))
    assert tags(plan.create) == ["docker-scs-1-30-v2"]


def test_a_cluster_without_topology_names_no_class() -> None:
    assert cluster_class_of({"spec": {}}) is None
    assert cluster_class_of({}) is None


def _cluster(name: str, class_name: str | None, *, v1beta1: bool = False, deleting: bool = False) -> dict:
    topology = {"class": class_name} if v1beta1 else {"classRef": {"name": class_name}}
    metadata: dict = {"name": name, "namespace": "team"}
    if deleting:
        metadata["deletionTimestamp"] = "2026-11-23T00:00:00Z"
    return {"metadata": metadata, "spec": {"topology": topology} if class_name else {}}


def test_every_cluster_on_a_class_of_the_stack_gets_one_addon() -> None:
    clusters = [
        _cluster("new", "docker-scs-1-30-v2"),
        _cluster("old-spelling", "docker-scs-1-30-v1", v1beta1=True),
        _cluster("has-one", "docker-scs-1-30-v2"),
        _cluster("other-stack", "docker-other-1-30-v2"),
        _cluster("other-kubernetes", "docker-scs-1-31-v2"),
        _cluster("no-topology", None),
        _cluster("not-a-release", "my-own-class"),
        _cluster("going", "docker-scs-1-30-v2", deleting=True),
        {
            **_cluster("moving", "docker-scs-1-30-v2"),
            "spec": {"paused": True, "topology": {"class": "docker-scs-1-30-v2"}},
        },
    ]
    tenant = {
        **_cluster("tenant", "docker-scs-1-30-v2"),
        "metadata": {"name": "has-one", "namespace": "tenant"},
    }
    existing = [("team", "cluster-addon-has-one"), ("elsewhere", "cluster-addon-new")]
    wanting = clusters_without_addon(STACK, [*clusters, tenant], existing, lambda n: f"cluster-addon-{n}")
    assert [(c["metadata"]["namespace"], c["metadata"]["name"]) for c in wanting] == [
        ("team", "new"),
        ("team", "old-spelling"),
        ("tenant", "has-one"),  # its addon goes beside it: the one of the same name in team is another's
    ]


def test_a_stack_names_its_wanted_releases_that_are_not_ready_with_their_own_reason() -> None:
    """The newest release broken, an older one serving: the stack says so, and leaves out what it only
    keeps (the latest ready one, one a Cluster uses)."""
    plan = plan_releases(
        STACK,
        listed=[],
        auto_subscribe=True,
        available=offered("docker-scs-1-30-v1", "docker-scs-1-30-v2", "docker-scs-1-30-v3"),
        existing=[*have("v1"), *have("v2"), *have("v3", ready=False)],
        classes_in_use=["docker-scs-1-30-v1"],
    )
    broken = {"type": "Ready", "status": "False", "reason": "IssueWithReleaseAssets", "message": "no addon"}
    existing = {
        "docker-scs-1-30-v1": {"status": {"ready": True}},
        "docker-scs-1-30-v2": {"status": {"ready": True}},
        "docker-scs-1-30-v3": {"status": {"ready": False, "conditions": [broken]}},
    }
    assert releases_not_ready(plan, existing) == [
        ("docker-scs-1-30-v3", "IssueWithReleaseAssets", "no addon")
    ]
    existing["docker-scs-1-30-v3"] = {"status": {"ready": True}}
    assert releases_not_ready(plan, existing) == []
    fresh = plan_releases(STACK, listed=["v4"], auto_subscribe=False, existing=[])
    assert releases_not_ready(fresh, {}) == [("docker-scs-1-30-v4", "ProcessOngoing", "not reconciled yet")]


@pytest.mark.parametrize(
    ("cluster", "addon", "paused"),
    [
        ({"spec": {"paused": True}}, {}, True),  # clusterctl move
        ({"spec": {"paused": False}}, {}, False),
        ({"metadata": {"annotations": {"cluster.x-k8s.io/paused": ""}}}, {}, True),
        ({}, {"metadata": {"annotations": {"cluster.x-k8s.io/paused": "true"}}}, True),
        ({}, {}, False),
    ],
)
def test_cluster_apis_pause_holds_through_the_cluster_or_the_addon(
    cluster: dict, addon: dict, paused: bool
) -> None:
    assert is_paused(cluster, addon) is paused


@pytest.mark.parametrize(
    ("topology", "namespace"),
    [
        ({"classRef": {"name": "c", "namespace": "platform"}}, "platform"),  # v1beta2
        ({"class": "c", "classNamespace": "platform"}, "platform"),  # v1beta1
        ({"classRef": {"name": "c"}}, "tenant"),  # its own
        ({}, "tenant"),
    ],
)
def test_a_clusters_class_namespace_is_named_or_its_own(topology: dict, namespace: str) -> None:
    cluster = {"metadata": {"name": "x", "namespace": "tenant"}, "spec": {"topology": topology}}
    assert class_namespace_of(cluster) == namespace
    assert cluster_in(cluster, "platform") == "tenant/x"
    assert cluster_in(cluster, "tenant") == "x"


@pytest.mark.parametrize(
    ("broken_for", "look_again_in"),
    [
        (0.0, 5.0),  # just seen without all of its assets: they may be uploading
        (3.0, 5.0),
        (40.0, 40.0),  # as long as it has been broken
        (299.0, 299.0),
        (3600.0, 300.0),  # a person fixes it: every five minutes at most
    ],
)
def test_an_incomplete_release_is_downloaded_again_soon_then_less_and_less_often(
    broken_for: float, look_again_in: float
) -> None:
    assert incomplete_release_retry_seconds(broken_for) == look_again_in
