"""What an operator cannot start without is checked before its caches start, and a failure says why in
one line: an API server that does not answer (within the patience given), credentials it refuses, and
the operator's own kinds not served."""

from __future__ import annotations

import time
from typing import Any

import pytest

from operator_core import errors
from operator_core.crdgen import CustomResource
from operator_core.starting import check_start, process_started
from typesense_operator.api import TYPESENSE_CLUSTER

pytestmark = pytest.mark.unit


class StartingKube:
    """An API server as a starting operator meets it: ``answers`` says what each /version gets."""

    server = "https://127.0.0.1:6443"

    def __init__(self, answers: list[BaseException | None], served: bool = True) -> None:
        self.answers, self.served, self.asked = answers, served, 0

    async def version(self) -> dict[str, Any]:
        self.asked += 1
        answer = self.answers[min(self.asked, len(self.answers)) - 1]
        if answer is not None:
            raise answer
        return {"gitVersion": "v1.35.4"}

    async def serves(self, api_version: str, kind: str) -> bool:
        return self.served


RESOURCES: list[CustomResource] = [TYPESENSE_CLUSTER]


async def test_an_api_server_that_comes_up_in_time_is_waited_for() -> None:
    refused = errors.Unavailable("reading the API server's version: no answer (connection refused)")
    kube = StartingKube([refused, refused, None])
    await check_start(kube, RESOURCES, patience=5)  # type: ignore[arg-type]
    assert kube.asked == 3


class ShuttingDownKube(StartingKube):
    """An API server that answers /version, then shuts down while discovery asks for a kind."""

    def __init__(self) -> None:
        super().__init__([None])
        self.discovered = 0

    async def serves(self, api_version: str, kind: str) -> bool:
        self.discovered += 1
        if self.discovered == 1:
            raise errors.Unavailable(f"discovering {api_version}: apiserver is shutting down")
        return True


async def test_an_api_server_restarting_between_the_version_and_discovery_is_waited_for() -> None:
    kube = ShuttingDownKube()
    await check_start(kube, RESOURCES, patience=5)  # type: ignore[arg-type]
    assert (kube.asked, kube.discovered) == (2, 2)


async def test_an_api_server_that_never_answers_ends_the_start_with_its_address_and_the_cause() -> None:
    refused = errors.Unavailable("reading the API server's version: no answer (connection refused)")
    started = time.monotonic()
    with pytest.raises(errors.StartFailed) as failed:
        await check_start(StartingKube([refused]), RESOURCES, patience=1.5)  # type: ignore[arg-type]
    assert time.monotonic() - started < 3
    assert str(failed.value) == (
        "the API server at https://127.0.0.1:6443 did not answer within 2 s: "
        "reading the API server's version: no answer (connection refused)"
    )


async def test_refused_credentials_end_the_start_at_once() -> None:
    unauthorized = errors.KubeError("reading the API server's version: Unauthorized", status=401)
    with pytest.raises(errors.StartFailed, match=r"refused our credentials \(401 Unauthorized\)"):
        await check_start(StartingKube([unauthorized]), RESOURCES)  # type: ignore[arg-type]


async def test_an_operator_whose_crd_is_not_installed_says_which() -> None:
    with pytest.raises(errors.StartFailed) as failed:
        await check_start(StartingKube([None], served=False), RESOURCES)  # type: ignore[arg-type]
    assert "TypesenseCluster (ts.opentelekomcloud.com/v1alpha1) is not served" in str(failed.value)
    assert "install its CRD typesenseclusters.ts.opentelekomcloud.com first" in str(failed.value)


def test_the_process_started_before_now_and_after_its_interpreter_was_asked_for() -> None:
    started = process_started()
    assert started <= time.monotonic()
    assert time.monotonic() - started < 24 * 3600, "this test process is not a day old"


async def test_the_patience_counts_from_when_it_is_told_so_a_late_check_gives_up_sooner() -> None:
    refused = errors.Unavailable("reading the API server's version: no answer (connection refused)")
    began = time.monotonic()
    with pytest.raises(errors.StartFailed, match="did not answer within 3 s"):
        await check_start(StartingKube([refused]), RESOURCES, patience=3, since=began - 2)  # type: ignore[arg-type]
    assert time.monotonic() - began < 1.5
