"""The watch cache against the real API server: list, watch, listing again, and reads that ask nothing."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from operator_core.cache import Cache, WatchedKind
from operator_core.kube import Kube
from operator_testkit.controlplane import ControlPlane
from operator_testkit.fixtures import wait_until

LABELS = {"test.operator-suite.io/cache": "yes"}


def configmap(namespace: str, name: str, **data: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(LABELS)},
        "data": dict(data),
    }


@pytest.fixture
async def cached(control_plane: ControlPlane) -> AsyncIterator[tuple[Kube, Cache, list[str]]]:
    """A second client whose ConfigMap reads come from a cache; the names of the changes it saw."""
    seen: list[str] = []
    async with Kube.connect(control_plane.kubeconfig) as kube:
        cache = Cache(kube)
        cache.watch([WatchedKind("v1", "ConfigMap", LABELS)])
        cache.on_change(lambda kind, obj: seen.append(obj["metadata"]["name"]))
        kube.use_cache(cache)
        await cache.start()
        try:
            await asyncio.wait_for(cache.wait_settled(), timeout=10)
            yield kube, cache, seen
        finally:
            await cache.stop()


async def test_the_cache_follows_creates_changes_and_deletes(
    kube: Kube, namespace: str, cached: tuple[Kube, Cache, list[str]]
) -> None:
    reader, _, seen = cached
    await kube.apply(configmap(namespace, "one", key="a"))

    async def held(value: str | None) -> bool:
        found = await reader.get("v1", "ConfigMap", "one", namespace)
        return (found or {}).get("data", {}).get("key") == value if value else found is None

    await wait_until(lambda: held("a"), timeout=10, what="the create to reach the cache")
    await kube.apply(configmap(namespace, "one", key="b"))
    await wait_until(lambda: held("b"), timeout=10, what="the change to reach the cache")
    await kube.delete("v1", "ConfigMap", "one", namespace)
    await wait_until(lambda: held(None), timeout=10, what="the delete to reach the cache")
    assert seen.count("one") >= 3
    assert [
        c["metadata"]["name"] for c in await reader.list("v1", "ConfigMap", namespace, labels=LABELS)
    ] == []


async def test_reads_from_the_cache_ask_the_api_server_nothing(
    kube: Kube, namespace: str, control_plane: ControlPlane, cached: tuple[Kube, Cache, list[str]]
) -> None:
    reader, _, _ = cached
    await kube.apply(configmap(namespace, "quiet", key="a"))
    await wait_until(
        lambda: reader.get("v1", "ConfigMap", "quiet", namespace), timeout=10, what="the cache to hold it"
    )
    before = len(control_plane.audit_events())
    for _ in range(20):
        assert await reader.get("v1", "ConfigMap", "quiet", namespace) is not None
        assert len(await reader.list("v1", "ConfigMap", namespace, labels={**LABELS, "other": "x"})) == 0
        assert not (await reader.apply(configmap(namespace, "quiet", key="a"))).written
    asked = [
        e
        for e in control_plane.audit_events()[before:]
        if (e.get("objectRef") or {}).get("namespace") == namespace
        and not e["user"].get("username", "").startswith("system:")  # the controllers' own, not this client's
    ]
    assert asked == [], [(e["verb"], e["objectRef"]) for e in asked]


async def test_listing_again_reports_what_vanished_while_the_informer_was_away(
    kube: Kube, namespace: str, cached: tuple[Kube, Cache, list[str]]
) -> None:
    """What an informer does after 410 Gone (its version is no longer kept): list again, and report the
    objects deleted meanwhile, so that their owners are woken. (The 410 itself: tests/unit/test_cache.py;
    the API server's watch cache keeps old versions too long for a test to see one expire.)"""
    _, cache, seen = cached
    await kube.apply(configmap(namespace, "kept", key="a"))
    await kube.apply(configmap(namespace, "dropped", key="a"))
    (informer,) = cache.informers
    await wait_until(
        lambda: informer.get(namespace, "dropped") is not None, timeout=10, what="the cache to hold both"
    )
    await cache.stop()
    await kube.delete("v1", "ConfigMap", "dropped", namespace)
    informer.resource_version = None  # as after 410 Gone
    seen.clear()
    lists = informer.lists
    await cache.start()
    await wait_until(lambda: informer.lists > lists and informer.synced, timeout=10, what="a second list")
    assert informer.get(namespace, "dropped") is None
    assert informer.get(namespace, "kept") is not None
    assert "dropped" in seen
