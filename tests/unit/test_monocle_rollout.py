"""Day-2 order: a new Monocle image waits for the engine to run its own image, rolled out, healthy."""

from __future__ import annotations

from typing import Any

import pytest

from monocle_operator.controller.monocle.rollout import MonocleImage, engine_settled, monocle_image_now

ENGINE = "opensearchproject/opensearch:2.19.6"
OLD, NEW = "quay.io/change-metrics/monocle:1.8.0", "quay.io/change-metrics/monocle:1.9.0"


def workload(image: str, generation: int = 1, **status: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "m", "generation": generation},
        "spec": {"template": {"spec": {"containers": [{"name": "c", "image": image}]}}},
        "status": status,
    }


ROLLED = {"observedGeneration": 1, "currentRevision": "r1", "updateRevision": "r1", "readyReplicas": 1}


@pytest.mark.parametrize(
    ("live", "healthy", "settled"),
    [
        (None, True, False),  # not made yet
        (workload(ENGINE, **ROLLED), True, True),
        (workload(ENGINE, **ROLLED), False, False),  # red, or not known
        (
            workload("opensearchproject/opensearch:2.19.5", **ROLLED),
            True,
            False,
        ),  # the new image not applied yet
        (workload(ENGINE, 2, **ROLLED), True, False),  # applied, not yet seen by its controller
        (workload(ENGINE, **{**ROLLED, "updateRevision": "r2"}), True, False),  # rolling
        (workload(ENGINE, **{**ROLLED, "readyReplicas": 0}), True, False),  # rolled, not ready yet
    ],
)
def test_engine_settled(live: dict[str, Any] | None, healthy: bool, settled: bool) -> None:
    assert engine_settled(live, ENGINE, healthy) is settled


@pytest.mark.parametrize(
    ("api", "settled", "expected"),
    [
        (None, False, MonocleImage(NEW)),  # a new instance: everything at once
        (workload(NEW), False, MonocleImage(NEW)),  # runs it already
        (workload(OLD), True, MonocleImage(NEW)),  # the engine is ready for it
        (workload(OLD), False, MonocleImage(OLD, waiting=NEW)),  # the engine first
    ],
)
def test_monocle_image_now(api: dict[str, Any] | None, settled: bool, expected: MonocleImage) -> None:
    assert monocle_image_now(NEW, api, settled) == expected
