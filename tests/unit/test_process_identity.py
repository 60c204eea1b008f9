"""An operator starts as a pod's user starts it: a uid the user database does not know, and only the
environment a kubelet gives. Its identity (the Lease holder's, the Events' instance) is the pod's name,
never a user name."""

from __future__ import annotations

import getpass
import os
import pwd
import socket
from collections.abc import Callable
from typing import Any

import pytest

from clusterstack_operator.__main__ import main as cluster_stack_operator
from monocle_operator.__main__ import main as monocle_operator
from operator_core import runner
from operator_core.controller import Operator
from operator_core.events import EventRecorder
from operator_core.identity import pod_name, process_identity
from typesense_operator.__main__ import main as typesense_operator

pytestmark = pytest.mark.unit


@pytest.fixture
def unknown_user(monkeypatch: pytest.MonkeyPatch) -> None:
    """No variable at all, and a uid with no passwd entry (what getpwuid says for uid 65532 in an
    image that does not list it)."""
    for name in list(os.environ):
        monkeypatch.delenv(name)

    def getpwuid(uid: int) -> Any:
        raise KeyError(f"getpwuid(): uid not found: {uid}")

    monkeypatch.setattr(pwd, "getpwuid", getpwuid)
    with pytest.raises(KeyError):
        getpass.getuser()  # the trap that crashed every operator in its image


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The operators the start-up path ran (each connects nowhere), with the test's logging kept."""
    ran: list[str] = []

    async def run(self: Operator, stopping: Any, namespaces: Any = None) -> None:
        ran.append(self.name)

    monkeypatch.setattr(Operator, "run", run)
    monkeypatch.setattr(runner, "configure_logging", lambda *_: None)
    return ran


@pytest.mark.parametrize(
    ("main", "environment"),
    [
        (typesense_operator, {}),
        (monocle_operator, {}),
        (cluster_stack_operator, {"OPERATOR_SUITE_RELEASE_SOURCE": "local"}),
    ],
    ids=["typesense", "monocle", "cluster-stack"],
)
@pytest.mark.usefixtures("unknown_user")
def test_each_operator_starts_with_no_environment_and_a_uid_no_user_database_knows(
    main: Callable[..., None],
    environment: dict[str, str],
    started: list[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    main(["--health-address="])
    assert len(started) == 1
    assert EventRecorder(None, controller="c").instance == socket.gethostname()  # type: ignore[arg-type]


@pytest.mark.usefixtures("unknown_user")
def test_the_pod_name_comes_from_the_downward_api_then_the_kubelets_host_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert pod_name() == socket.gethostname()
    monkeypatch.setenv("HOSTNAME", "operator-7d9f-abcde")
    assert pod_name() == "operator-7d9f-abcde"
    monkeypatch.setenv("POD_NAME", "operator-7d9f-xyz12")
    assert pod_name() == "operator-7d9f-xyz12"
    assert process_identity() == f"operator-7d9f-xyz12_{os.getpid()}"
