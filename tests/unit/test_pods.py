"""What a pod read from the API says of itself: its ordinal, a container's status and state."""

from __future__ import annotations

import pytest

from operator_core.pods import container_state, container_status, pod_ordinal


@pytest.mark.parametrize(
    ("name", "statefulset", "ordinal"),
    [
        ("search-2", None, 2),
        ("search-2", "search", 2),
        ("my-search-10", "my-search", 10),
        ("other-1", "search", None),
        ("search-x", None, None),
        ("search", "search", None),
    ],
)
def test_a_pods_ordinal_is_its_last_number_and_only_of_its_statefulset_when_named(
    name: str, statefulset: str | None, ordinal: int | None
) -> None:
    assert pod_ordinal(name, statefulset) == ordinal


def test_a_containers_status_and_state_are_empty_until_its_kubelet_reports_them() -> None:
    pod = {
        "status": {
            "containerStatuses": [
                {"name": "sidecar", "state": {"running": {}}},
                {
                    "name": "typesense",
                    "restartCount": 2,
                    "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                },
            ]
        }
    }
    assert container_status(pod, "typesense")["restartCount"] == 2
    assert container_state(pod, "typesense") == {"waiting": {"reason": "CrashLoopBackOff"}}
    assert container_state({"status": {}}, "typesense") == {}
    assert container_status(pod, "missing") == {}
