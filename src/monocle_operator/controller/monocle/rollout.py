"""Day-2 order, pure: the engine takes a new spec first, and Monocle's API and crawler take a new image
only once the engine runs its own and is healthy (a new Monocle may change its indices at its start,
which needs an engine that answers). Table-tested in ``tests/unit/test_monocle_rollout.py``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["MonocleImage", "engine_settled", "monocle_image_now"]


def _image(workload: Mapping[str, Any] | None) -> str | None:
    containers = (
        (((workload or {}).get("spec") or {}).get("template") or {}).get("spec", {}).get("containers")
    )
    return str(containers[0].get("image")) if containers else None


def engine_settled(live: Mapping[str, Any] | None, image: str, healthy: bool) -> bool:
    """The engine's StatefulSet runs ``image``, all of it rolled out and ready, and its health is green or
    yellow (``healthy``, the EngineHealthy condition as last observed)."""
    if live is None or _image(live) != image or not healthy:
        return False
    status = live.get("status") or {}
    return (
        status.get("observedGeneration", 0) >= live["metadata"].get("generation", 0)
        and status.get("currentRevision") == status.get("updateRevision")
        and status.get("readyReplicas", 0) >= 1
    )


@dataclass(frozen=True)
class MonocleImage:
    """The image the API and the crawler run now, and whether the spec's waits for the engine."""

    now: str
    waiting: str | None = None
    """The spec's image, when it waits (``now`` is then the one they run)."""


def monocle_image_now(wanted: str, api: Mapping[str, Any] | None, settled: bool) -> MonocleImage:
    """``wanted`` (the spec's) at once for a new instance, for one whose API runs it already, or once
    the engine is :func:`engine_settled`; otherwise the image the API runs, until then (the crawler
    takes the API's: both wait on the same engine)."""
    running = _image(api)
    if running is None or running == wanted or settled:
        return MonocleImage(wanted)
    return MonocleImage(running, waiting=wanted)
