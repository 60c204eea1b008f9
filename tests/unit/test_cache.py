"""The watch cache's state machine, driven by a scripted source: what it holds, when it is synced, and
what it reports as changed. (The same informer against a real API server:
tests/integration/test_watch_cache_api_server.py.)"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import pytest

from operator_core import errors
from operator_core.cache import (
    ANY_VALUE,
    EVERY_NAMESPACE,
    NEEDED_KINDS,
    OPENED,
    Cache,
    Informer,
    KindRef,
    WatchedKind,
    _holds,
    _trimmed,
    selector_covers,
)
from operator_core.kube import Kube, _label_selector
from operator_core.reconciling import Wakeups, reconciling_as

Manifest = dict[str, Any]


def pod(name: str, version: int, namespace: str = "ns", **labels: str) -> Manifest:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "resourceVersion": str(version),
            "labels": labels,
            "managedFields": [{"manager": "someone"}],
        },
    }


class ScriptedSource:
    """Lists what ``listing`` holds (what the selector selects, as the API server does); each watch plays
    the next script, then ends (or raises)."""

    def __init__(self, listing: list[Manifest], version: str = "10") -> None:
        self.listing, self.version = listing, version
        self.scripts: asyncio.Queue[list[tuple[str, Manifest]] | BaseException] = asyncio.Queue()
        self.lists = 0
        self.watched_from: list[str] = []
        self.listed_in: list[str] = []
        self.list_error: BaseException | None = None
        self.answering = asyncio.Event()
        self.answering.set()

    async def list_objects(
        self,
        kind: KindRef,
        labels: Mapping[str, str] | None,
        namespace: str = EVERY_NAMESPACE,
        each: Callable[[Manifest], Manifest] | None = None,
    ) -> tuple[list[Manifest], str]:
        self.lists += 1
        self.listed_in.append(namespace)
        if self.list_error is not None:
            raise self.list_error
        listed = [
            p
            for p in self.listing
            if namespace in ("*", p["metadata"].get("namespace"))
            and selector_covers(labels, p["metadata"].get("labels"))
        ]
        return [each(p) for p in listed] if each else listed, self.version

    async def namespaced(self, kind: KindRef) -> bool:
        return kind[1] != "Node"

    async def watch_objects(
        self,
        kind: KindRef,
        labels: Mapping[str, str] | None,
        resource_version: str,
        timeout_seconds: int,
        namespace: str = EVERY_NAMESPACE,
    ) -> AsyncIterator[tuple[str, Manifest]]:
        self.watched_from.append(resource_version)
        script = await self.scripts.get()
        if isinstance(script, BaseException):
            raise script
        yield OPENED, {}
        for event in script:
            yield event
        await asyncio.Event().wait()  # the watch stays open until the next test step


async def settled() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


@pytest.fixture
async def running() -> AsyncIterator[list[asyncio.Task[None]]]:
    tasks: list[asyncio.Task[None]] = []
    yield tasks
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def test_not_synced_until_listed_then_holds_the_list_without_managed_fields(running: list[Any]) -> None:
    source = ScriptedSource([pod("a", 5), pod("b", 6, namespace="other")])
    changed: list[str] = []
    informer = Informer(source, WatchedKind("v1", "Pod"), lambda obj: changed.append(obj["metadata"]["name"]))
    assert not informer.synced
    running.append(asyncio.create_task(informer.run()))
    await informer.wait_synced()
    assert informer.synced
    assert sorted(changed) == ["a", "b"]
    assert informer.get("ns", "a") is not None
    assert "managedFields" not in informer.get("ns", "a")["metadata"]
    assert [p["metadata"]["name"] for p in informer.list("other")] == ["b"]
    assert len(informer.list("*")) == 2


async def test_an_operator_limited_to_namespaces_lists_each_of_them_and_holds_nothing_else(
    running: list[Any],
) -> None:
    # A namespace-scoped operator's Roles allow a list in its namespaces only, never across all.
    source = ScriptedSource([pod("a", 5, namespace="team-a"), pod("b", 6, namespace="team-b"), pod("c", 7)])
    informer = Informer(source, WatchedKind("v1", "Pod"), namespaces=["team-a", "team-b"])
    for _ in range(2):
        await source.scripts.put([])
    running.append(asyncio.create_task(informer.run()))
    await informer.wait_synced()
    assert sorted(source.listed_in) == ["team-a", "team-b"]
    assert sorted(p["metadata"]["name"] for p in informer.list()) == ["a", "b"]


async def test_a_relist_of_one_namespace_keeps_the_others_objects(running: list[Any]) -> None:
    source = ScriptedSource([pod("a", 5, namespace="team-a"), pod("b", 6, namespace="team-b")])
    informer = Informer(source, WatchedKind("v1", "Pod"), namespaces=["team-a", "team-b"])
    await source.scripts.put([])
    await source.scripts.put(
        errors.Expired("too old", status=410, reason="Expired")
    )  # one scope falls behind
    running.append(asyncio.create_task(informer.run()))
    await settled()
    source.listing = [pod("a2", 9, namespace="team-a"), pod("b", 6, namespace="team-b")]
    await source.scripts.put([])
    await informer.wait_synced()
    await settled()
    held = sorted(p["metadata"]["name"] for p in informer.list())
    assert held in (["a", "b"], ["a2", "b"])  # whichever scope relisted, the other's objects stay
    assert informer.lists == 3


async def test_a_cluster_scoped_kind_is_watched_once_for_every_namespace(running: list[Any]) -> None:
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "resourceVersion": "3"}}
    source = ScriptedSource([node])
    informer = Informer(source, WatchedKind("v1", "Node"), namespaces=["team-a", "team-b"])
    await source.scripts.put([])
    running.append(asyncio.create_task(informer.run()))
    await informer.wait_synced()
    assert source.listed_in == ["*"]
    assert informer.get(None, "n1") is not None


async def test_watch_events_update_what_it_holds_and_report_each_change(running: list[Any]) -> None:
    source = ScriptedSource([pod("a", 5)])
    changed: list[tuple[str, str]] = []
    informer = Informer(
        source, WatchedKind("v1", "Pod"), lambda obj: changed.append((obj["metadata"]["name"], ""))
    )
    await source.scripts.put(
        [
            ("ADDED", pod("b", 11)),
            ("MODIFIED", pod("a", 12, role="x")),
            ("DELETED", pod("b", 13)),
            ("BOOKMARK", {"metadata": {"resourceVersion": "20"}}),
        ]
    )
    running.append(asyncio.create_task(informer.run()))
    await settled()
    assert informer.get("ns", "b") is None
    assert informer.get("ns", "a")["metadata"]["labels"] == {"role": "x"}  # type: ignore[index]
    assert [name for name, _ in changed] == ["a", "b", "a", "b"]
    assert informer.resource_version == "20"
    assert source.watched_from == ["10"]


async def test_a_list_by_label_follows_relabels_deletes_and_relists(running: list[Any]) -> None:
    source = ScriptedSource([pod("a", 5, app="x"), pod("b", 6, app="x", role="leader"), pod("c", 7, app="y")])
    informer = Informer(source, WatchedKind("v1", "Pod"))
    await source.scripts.put(
        [
            ("MODIFIED", pod("a", 11, app="y")),
            ("DELETED", pod("b", 12, app="x")),
            ("ADDED", pod("d", 13, app="x")),
        ]
    )
    running.append(asyncio.create_task(informer.run()))
    await settled()

    def names(**labels: str) -> list[str]:
        return [p["metadata"]["name"] for p in informer.list("ns", labels)]

    assert names(app="x") == ["d"]
    assert names(app="y") == ["a", "c"]
    assert names(app="y", role="leader") == []
    assert sorted(names(app=ANY_VALUE)) == ["a", "c", "d"]
    assert names(gone="z") == []


async def test_a_relist_replaces_what_a_list_by_label_finds(running: list[Any]) -> None:
    source = ScriptedSource([pod("a", 5, app="x")])
    informer = Informer(source, WatchedKind("v1", "Pod"))
    running.append(asyncio.create_task(informer.run()))
    await informer.wait_synced()
    source.listing, source.version = [pod("b", 30, app="x")], "31"
    await source.scripts.put(errors.Expired("too old resource version", status=410))
    await source.scripts.put([])
    await asyncio.sleep(0.05)
    assert informer.lists == 2
    assert [p["metadata"]["name"] for p in informer.list("ns", {"app": "x"})] == ["b"]


async def test_a_failed_watch_makes_it_unsynced_until_the_next_watch_opens(running: list[Any]) -> None:
    source = ScriptedSource([pod("a", 5)])
    informer = Informer(source, WatchedKind("v1", "Pod"), retry_seconds=(0.01,))
    await source.scripts.put(errors.Unavailable("connection refused"))
    running.append(asyncio.create_task(informer.run()))
    await informer.wait_synced()  # the list
    await settled()
    assert not informer.synced  # the watch after it failed
    await source.scripts.put([])
    await asyncio.sleep(0.05)
    assert informer.synced
    assert source.lists == 1  # resumed from the last version, no second list
    assert source.watched_from == ["10", "10"]


async def test_the_end_of_an_outage_starts_the_back_off_again(running: list[Any]) -> None:
    """A restarted API server refuses watches for a moment ("storage is (re)initializing"): that
    refusal is retried after the shortest wait, not after the longest one the outage had earned."""
    source = ScriptedSource([pod("a", 5)])
    informer = Informer(source, WatchedKind("v1", "Pod"), retry_seconds=(0.01, 0.02, 5.0))
    source.answering.clear()
    for _ in range(3):
        await source.scripts.put(errors.Unavailable("connection refused", outage=True))
    running.append(asyncio.create_task(informer.run()))
    await informer.wait_synced()  # the list
    await asyncio.sleep(0.1)  # two outage failures waited out: the next wait would be 5 s
    source.answering.set()  # the API server answers again
    await source.scripts.put(errors.Unavailable("storage is (re)initializing", status=500))
    await source.scripts.put([])
    await asyncio.sleep(0.2)
    assert informer.synced


async def test_an_expired_watch_lists_again_and_reports_what_vanished_meanwhile(running: list[Any]) -> None:
    source = ScriptedSource([pod("a", 5), pod("b", 6)])
    changed: list[str] = []
    informer = Informer(source, WatchedKind("v1", "Pod"), lambda obj: changed.append(obj["metadata"]["name"]))
    running.append(asyncio.create_task(informer.run()))
    await informer.wait_synced()
    changed.clear()
    source.listing, source.version = [pod("a", 5), pod("c", 30)], "31"
    await source.scripts.put(errors.Expired("too old resource version", status=410))
    await source.scripts.put([])
    await asyncio.sleep(0.05)
    assert informer.lists == 2
    assert informer.synced
    assert informer.get("ns", "b") is None
    assert informer.get("ns", "c") is not None
    assert sorted(changed) == ["b", "c"]  # "a" did not change
    assert source.watched_from[-1] == "31"


async def test_a_kind_that_is_not_served_is_synced_and_empty(running: list[Any]) -> None:
    source = ScriptedSource([])
    source.list_error = errors.NotFound("kind PodMonitor of monitoring.coreos.com/v1 is not served")
    informer = Informer(source, WatchedKind("monitoring.coreos.com/v1", "PodMonitor"))
    running.append(asyncio.create_task(informer.run()))
    await informer.wait_synced()
    assert informer.synced
    assert not informer.served
    assert informer.list("*") == []


async def test_our_own_writes_are_kept_unless_the_watch_told_something_newer(running: list[Any]) -> None:
    source = ScriptedSource([pod("a", 5, app="x")], version="5")
    informer = Informer(source, WatchedKind("v1", "Pod", {"app": "x"}))
    running.append(asyncio.create_task(informer.run()))
    await informer.wait_synced()
    informer.offer(pod("a", 9, app="x", written="yes"))
    assert informer.get("ns", "a")["metadata"]["labels"]["written"] == "yes"  # type: ignore[index]
    informer.offer(pod("a", 7, app="x", written="older"))
    assert informer.get("ns", "a")["metadata"]["labels"]["written"] == "yes"  # type: ignore[index]
    informer.offer(pod("b", 3, app="other"))  # not selected: not held
    assert informer.get("ns", "b") is None
    # The watch's own older event (it lags our write) does not take the cache back.
    await source.scripts.put([("MODIFIED", pod("a", 8, app="x"))])
    await settled()
    assert informer.get("ns", "a")["metadata"]["labels"]["written"] == "yes"  # type: ignore[index]


async def test_a_writes_answer_after_the_watch_deleted_the_object_does_not_bring_it_back(
    running: list[Any],
) -> None:
    """Our write (version 7) races the object's deletion (8): the watch tells the deletion first, then
    the write's answer arrives. The cache must not hold a ghost that no watch event will ever remove."""
    source = ScriptedSource([pod("a", 5)], version="5")
    informer = Informer(source, WatchedKind("v1", "Pod"))
    running.append(asyncio.create_task(informer.run()))
    await informer.wait_synced()
    await source.scripts.put([("DELETED", pod("a", 8))])
    await settled()
    informer.offer(pod("a", 7))
    assert informer.get("ns", "a") is None
    informer.offer(pod("a", 9))  # made again, after the watch's position: kept until the watch tells
    assert informer.get("ns", "a") is not None


def test_a_label_selector_covers_the_requests_that_ask_at_least_as_much() -> None:
    assert selector_covers(None, None)
    assert selector_covers(None, {"a": "1"})
    assert selector_covers({"a": "1"}, {"a": "1", "b": "2"})
    assert not selector_covers({"a": "1"}, {"b": "2"})
    assert not selector_covers({"a": "1"}, None)


def test_two_selectors_of_one_kind_make_one_informer_of_the_wider() -> None:
    cache = Cache(ScriptedSource([]))
    cache.watch([WatchedKind("v1", "Secret", {"managed-by": "us"}), WatchedKind("v1", "Secret")])
    cache.watch(
        [
            WatchedKind("v1", "Pod", {"managed-by": "us", "app": "x"}),
            WatchedKind("v1", "Pod", {"managed-by": "us"}),
        ]
    )
    secrets, (pods,) = cache.informer("v1", "Secret"), cache.informers_of("v1", "Pod")
    assert secrets is not None
    assert secrets.kind.labels is None
    assert pods is not None
    assert pods.kind.labels == {"managed-by": "us"}


async def test_an_observed_kind_is_held_without_its_spec_unless_another_reader_wants_it(
    running: list[Any],
) -> None:
    spec = {"containers": [{"name": "c"}], "nodeName": "node-b"}
    with_spec = {**pod("a", 5), "spec": spec, "status": {"podIP": "127.0.0.9"}}
    source = ScriptedSource([with_spec])
    informer = Informer(source, WatchedKind("v1", "Pod", keep_spec=False))
    await source.scripts.put(
        [("MODIFIED", {**with_spec, "metadata": {**with_spec["metadata"], "resourceVersion": "6"}})]
    )
    running.append(asyncio.create_task(informer.run()))
    await settled()
    held = informer.get("ns", "a")
    assert held is not None
    assert held["spec"] == {"nodeName": "node-b"}, "only the node it runs on is kept of its spec"
    assert held["status"] == {"podIP": "127.0.0.9"}
    assert held["metadata"]["resourceVersion"] == "6"
    informer.offer({**with_spec, "metadata": {**with_spec["metadata"], "resourceVersion": "7"}})
    assert (informer.get("ns", "a") or {})["spec"] == {"nodeName": "node-b"}

    cache = Cache(ScriptedSource([]))
    cache.watch([WatchedKind("v1", "Pod", keep_spec=False), WatchedKind("v1", "Pod")])
    merged = cache.informer("v1", "Pod")
    assert merged is not None
    assert merged.kind.keep_spec


def test_a_kind_read_for_a_few_fields_holds_only_those_unless_another_reader_wants_more() -> None:
    """A Node, of which only the taints and the Ready condition are read: not its images or volumes."""
    node = {
        "metadata": {"name": "node-a", "managedFields": [{}]},
        "spec": {"taints": [{"key": "k"}], "podCIDR": "198.18.0.0/24"},
        "status": {"conditions": [{"type": "Ready"}], "images": [{"names": ["x"]}] * 50},
    }
    kept = _trimmed(node, kept_fields=("spec.taints", "spec.unschedulable", "status.conditions"))
    assert kept == {
        "metadata": {"name": "node-a"},
        "spec": {"taints": [{"key": "k"}]},
        "status": {"conditions": [{"type": "Ready"}]},
    }
    few = WatchedKind("v1", "Node", kept_fields=("status.conditions",))
    cache = Cache(ScriptedSource([]))
    cache.watch([few, WatchedKind("v1", "Node", kept_fields=("spec.taints",))])
    union = cache.informer("v1", "Node")
    assert union is not None
    assert union.kind.kept_fields == ("spec.taints", "status.conditions")
    cache.watch([WatchedKind("v1", "Node")])
    whole = cache.informer("v1", "Node")
    assert whole is not None
    assert whole.kind.kept_fields == (), "a reader of whole Nodes gets them whole"
    assert _holds(whole.kind, few)
    assert not _holds(few, WatchedKind("v1", "Node"))


async def test_a_delete_is_refused_while_the_cache_is_not_synced() -> None:
    """Whatever decided a delete may have read a stale view: the adapter refuses before any request."""
    cache = Cache(ScriptedSource([]))
    cache.watch([WatchedKind("v1", "Pod")])
    kube = Kube(None)  # no request may be made
    kube.use_cache(cache)
    with pytest.raises(errors.NotSynced, match="not deleting Pod web-0 while the cache may be stale"):
        await kube.delete("v1", "Pod", "web-0", "ns")
    assert kube.write_calls == 0
    assert errors.retry_policy(errors.NotSynced("x")) is errors.Retry.BACK_OFF


async def test_our_own_write_is_reported_once_when_offered_not_again_by_its_watch_event(
    running: list[Any],
) -> None:
    source = ScriptedSource([pod("a", 5)], version="5")
    changed: list[str] = []
    informer = Informer(
        source, WatchedKind("v1", "Pod"), lambda obj: changed.append(obj["metadata"]["resourceVersion"])
    )
    running.append(asyncio.create_task(informer.run()))
    await informer.wait_synced()
    changed.clear()
    informer.offer(pod("a", 9))
    await source.scripts.put([("MODIFIED", pod("a", 9)), ("MODIFIED", pod("a", 10))])
    await settled()
    assert changed == ["9", "10"]  # 9 when offered (whoever else reads it wakes), 10: someone else's


def test_a_change_wakes_every_reader_but_the_reconcile_that_made_it() -> None:
    wakeups, others = Wakeups(), Wakeups()
    mine, theirs = wakeups.register(("ns", "a")), others.register(("ns", "a"))
    with reconciling_as(wakeups, ("ns", "a")):
        wakeups.wake(("ns", "a"))
        others.wake(("ns", "a"))
    assert not mine.is_set(), "a reconcile's own write does not wake it again"
    assert theirs.is_set(), "another controller's object that reads it is woken"
    wakeups.wake(("ns", "a"))
    assert mine.is_set()


async def test_a_kind_met_at_run_time_gets_an_informer_and_a_wider_one_replaces_a_narrower() -> None:
    source = ScriptedSource([pod("a", 5, app="x"), pod("b", 6)])
    cache = Cache(source)
    cache.watch([WatchedKind("v1", "Secret")])
    await cache.start()
    try:
        narrow = cache.ensure(WatchedKind("v1", "Pod", {"app": "x"}))
        assert cache.ensure(WatchedKind("v1", "Pod", {"app": "x"})) is narrow, "held already: kept"
        await cache.wait_settled()
        wide = cache.ensure(WatchedKind("v1", "Pod"))
        assert wide is not narrow
        assert wide.kind.labels is None
        assert cache.informer("v1", "Pod") is wide
        await cache.wait_settled()
        assert sorted(p["metadata"]["name"] for p in wide.list("*")) == ["a", "b"]
        assert cache.ensure(WatchedKind("v1", "Pod", {"app": "x"})) is wide, "the wider one holds it"
    finally:
        await cache.stop()


def test_a_label_selected_for_any_value_covers_every_object_that_carries_it() -> None:
    kubeconfigs = {"cluster.x-k8s.io/cluster-name": ANY_VALUE}
    assert selector_covers(kubeconfigs, {"cluster.x-k8s.io/cluster-name": "workload", "other": "x"})
    assert not selector_covers(kubeconfigs, {"other": "x"})
    assert not selector_covers(kubeconfigs, None)
    assert not selector_covers({"cluster.x-k8s.io/cluster-name": "workload"}, kubeconfigs), "narrower"
    assert _label_selector({**kubeconfigs, "app": "a"}) == {
        "labelSelector": "cluster.x-k8s.io/cluster-name,app=a"
    }


async def test_a_selector_met_at_run_time_never_widens_a_narrower_informer_of_the_kind() -> None:
    """A Secret a chart renders (labelled managed-by) beside the kubeconfig Secrets (labelled with their
    Cluster): two informers, each of its own selector, never one of every Secret in the cluster."""
    kubeconfig = {**pod("kubeconfig", 5, **{"cluster-name": "a"}), "kind": "Secret"}
    rendered = {**pod("rendered", 6, **{"managed-by": "us"}), "kind": "Secret"}
    unrelated = {**pod("someone-elses", 7), "kind": "Secret"}
    source = ScriptedSource([kubeconfig, rendered, unrelated])
    cache = Cache(source)
    cache.watch([WatchedKind("v1", "Secret", {"cluster-name": ANY_VALUE})])
    await cache.start()
    try:
        ours = cache.ensure(WatchedKind("v1", "Secret", {"managed-by": "us"}))
        await cache.wait_settled()
        kubeconfigs = cache.informer("v1", "Secret", {"cluster-name": "a"})
        assert kubeconfigs is not None
        assert kubeconfigs is not ours
        assert len(cache.informers_of("v1", "Secret")) == 2
        assert cache.informer("v1", "Secret") is None, "nothing holds every Secret"
        assert cache.informer("v1", "Secret", {"managed-by": "us", "x": "y"}) is ours
        # The scripted source lists everything; each informer keeps only what its selector selects.
        assert [s["metadata"]["name"] for s in ours.list("*")] == ["rendered"]
        assert [s["metadata"]["name"] for s in kubeconfigs.list("*")] == ["kubeconfig"]
        kube = Kube(None)  # reads of either come from the cache: no request may be made
        kube.use_cache(cache)
        assert (await kube.get("v1", "Secret", "rendered", "ns")) is not None
        assert (await kube.get("v1", "Secret", "kubeconfig", "ns")) is not None
        assert [
            s["metadata"]["name"] for s in await kube.list("v1", "Secret", "ns", labels={"managed-by": "us"})
        ] == ["rendered"]
    finally:
        await cache.stop()


async def test_a_kind_rbac_forbids_settles_as_forbidden_and_holds_up_only_who_needs_it() -> None:
    source = ScriptedSource([pod("a", 5)])
    cache = Cache(source)
    cache.watch([WatchedKind("v1", "Pod")])
    await source.scripts.put([])
    await cache.start()
    try:
        await cache.wait_settled()
        source.list_error = errors.Forbidden(
            'configmaps is forbidden: User "system:serviceaccount:ns:op" cannot list resource "configmaps"',
            status=403,
        )
        config_maps = cache.ensure(WatchedKind("v1", "ConfigMap", {"managed-by": "us"}))
        await asyncio.wait_for(cache.wait_settled(), timeout=5)
        assert config_maps.settled
        assert not config_maps.synced
        assert "cannot list resource" in (config_maps.forbidden or "")
        cache.require_synced("deleting")  # a forbidden informer is no stale view: it holds nothing
        cache.require_watchable([("v1", "Pod")])
        with pytest.raises(
            errors.Unwatchable, match=r"may not watch ConfigMap \(v1\): configmaps is forbidden"
        ):
            cache.require_watchable([("v1", "Pod"), ("v1", "ConfigMap")])
        assert errors.retry_policy(errors.Unwatchable("x")) is errors.Retry.BACK_OFF
    finally:
        await cache.stop()


async def test_a_refusal_is_looked_at_again_within_seconds(running: list[Any]) -> None:
    """A restarted API server refuses everything until its authorizer has read the roles again: the
    first look after a refusal comes within a second or two, not after the minute between later ones."""
    source = ScriptedSource([pod("a", 5)])
    source.list_error = errors.Forbidden(
        'pods is forbidden: clusterrole "system:discovery" not found', status=403
    )
    informer = Informer(source, WatchedKind("v1", "Pod"))
    running.append(asyncio.create_task(informer.run()))
    await asyncio.sleep(0.1)
    assert informer.forbidden is not None
    source.list_error = None
    await source.scripts.put([])
    await asyncio.wait_for(informer.wait_synced(), timeout=2)
    assert informer.forbidden is None


async def test_a_refusal_ends_when_the_kind_turns_out_not_to_be_served(running: list[Any]) -> None:
    """A restarted API server refused even the discovery of a kind whose CRD is not installed; the next
    look finds it not served, which is an answer: nothing is forbidden any more, and the kind is synced
    (empty), so the controllers that need it go on."""
    source = ScriptedSource([])
    source.list_error = errors.Forbidden(
        'forbidden: User "system:serviceaccount:ns:op" cannot get path "/apis/monitoring.coreos.com/v1"',
        status=403,
    )
    informer = Informer(source, WatchedKind("monitoring.coreos.com/v1", "PodMonitor"))
    running.append(asyncio.create_task(informer.run()))
    await asyncio.sleep(0.1)
    assert informer.forbidden is not None
    source.list_error = errors.NotFound("kind PodMonitor is not served", status=404)
    await asyncio.wait_for(informer.wait_synced(), timeout=3)
    assert informer.forbidden is None
    assert informer.settled
    assert not informer.served


async def test_a_delete_requires_synced_only_the_caches_its_controller_declared() -> None:
    cache = Cache(ScriptedSource([]))
    cache.watch([WatchedKind("v1", "Pod"), WatchedKind("v1", "ConfigMap")])
    kube = Kube(None)
    kube.use_cache(cache)
    token = NEEDED_KINDS.set(frozenset({("v1", "ConfigMap")}))
    try:
        with pytest.raises(errors.NotSynced, match=r"Informer\(ConfigMap \{\}\) not synced$"):
            await kube.delete("v1", "Pod", "web-0", "ns")
    finally:
        NEEDED_KINDS.reset(token)
