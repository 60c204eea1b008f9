"""Which containers a kubelet keeps waiting will not start without someone acting (the sandbox's report)."""

from __future__ import annotations

from typing import Any

import pytest

from operator_testkit.pod_failures import (
    CONFIG_PATIENCE_SECONDS,
    CRASH_PATIENCE_SECONDS,
    stuck_containers,
    waiting_since,
)


def pod(name: str, *waiting: tuple[str, str], init: bool = False) -> dict[str, Any]:
    statuses = [
        {"name": f"c{index}", "state": {"waiting": {"reason": reason, "message": message}}}
        for index, (reason, message) in enumerate(waiting)
    ]
    key = "initContainerStatuses" if init else "containerStatuses"
    return {
        "metadata": {"namespace": "default", "name": name, "uid": f"uid-{name}"},
        "status": {key: statuses},
    }


RUNNING = {"metadata": {"namespace": "default", "name": "ok", "uid": "uid-ok"}, "status": {
    "containerStatuses": [{"name": "c0", "state": {"running": {}}}]
}}  # fmt: skip


@pytest.mark.parametrize(
    ("reason", "lasted", "stuck"),
    [
        ("ContainerCreating", 600.0, False),
        ("PodInitializing", 600.0, False),
        ("ErrImagePull", 0.0, True),  # no registry is reached from these nodes: it never comes
        ("ImagePullBackOff", 0.0, True),
        ("ErrImageNeverPull", 0.0, True),
        ("InvalidImageName", 0.0, True),
        ("CreateContainerConfigError", 0.0, False),  # an operator may be about to make the Secret
        ("CreateContainerConfigError", CONFIG_PATIENCE_SECONDS - 1, False),
        ("CreateContainerConfigError", CONFIG_PATIENCE_SECONDS, True),
        ("CreateContainerError", CONFIG_PATIENCE_SECONDS, True),
        ("RunContainerError", CONFIG_PATIENCE_SECONDS, True),
        ("CrashLoopBackOff", CONFIG_PATIENCE_SECONDS, False),  # a server may crash while its peers start
        ("CrashLoopBackOff", CRASH_PATIENCE_SECONDS, True),
    ],
)
def test_which_waiting_containers_are_stuck_for_good(reason: str, lasted: float, stuck: bool) -> None:
    pods = [RUNNING, pod("p", (reason, "why"))]
    since = waiting_since(pods, {}, now=100.0)
    found = stuck_containers(pods, since, now=100.0 + lasted)
    assert [s.describe() for s in found] == (
        [f"pod default/p: container c0 cannot start: {reason}: why"] * stuck
    )


def test_init_containers_count_too() -> None:
    pods = [pod("p", ("ErrImagePull", "not found"), init=True)]
    (found,) = stuck_containers(pods, waiting_since(pods, {}, 0.0), 0.0)
    assert (found.pod, found.container, found.reason) == ("default/p", "c0", "ErrImagePull")


def test_waiting_since_keeps_the_first_sighting_of_a_reason_and_forgets_what_cleared() -> None:
    before = waiting_since(
        [pod("p", ("CreateContainerConfigError", "a"), ("ContainerCreating", ""))], {}, 10.0
    )
    later = waiting_since(
        [pod("p", ("CreateContainerConfigError", "b"), ("CrashLoopBackOff", ""))], before, 20.0
    )
    assert later == {
        ("uid-p", "c0", "CreateContainerConfigError"): 10.0,  # the same spell, though its message changed
        ("uid-p", "c1", "CrashLoopBackOff"): 20.0,  # a new reason starts a new spell
    }
    pods = [pod("p", ("CreateContainerConfigError", "b"))]
    assert stuck_containers(pods, later, 10.0 + CONFIG_PATIENCE_SECONDS) != []
    assert stuck_containers(pods, waiting_since(pods, {}, 20.0), 10.0 + CONFIG_PATIENCE_SECONDS) == []
