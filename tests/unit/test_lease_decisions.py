"""Who leads: the Lease decision, read from a Lease as the API server returns it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from operator_core import errors
from operator_core.errors import SettingsError
from operator_core.leader import Action, LeaderElectionSettings, LeaderElector, LeaseView, decide

pytestmark = pytest.mark.unit

NOW = 1_000_000.0


@pytest.mark.parametrize(
    ("lease", "action"),
    [
        (None, Action.CREATE),
        (LeaseView("me", NOW - 1, 15), Action.RENEW),
        (LeaseView("me", NOW - 100, 15), Action.RENEW),  # ours even if late: renew it
        (LeaseView("other", NOW - 1, 15), Action.WAIT),
        (LeaseView("other", NOW - 15, 15), Action.WAIT),  # not yet expired
        (LeaseView("other", NOW - 15.1, 15), Action.TAKE),  # expired: its holder crashed
        (LeaseView("", NOW, 1), Action.TAKE),  # released by a leader that stopped cleanly
    ],
)
def test_decide(lease: LeaseView | None, action: Action) -> None:
    assert decide(lease, "me", NOW) is action


def test_a_lease_as_the_api_server_returns_it() -> None:
    view = LeaseView.of(
        {
            "spec": {
                "holderIdentity": "pod-a_7",
                "leaseDurationSeconds": 15,
                "renewTime": "2026-11-24T10:00:00.500000Z",
                "leaseTransitions": 3,
            }
        }
    )
    assert view.holder == "pod-a_7"
    assert view.duration == 15
    assert view.transitions == 3
    assert view.renewed_at == pytest.approx(1795514400.5)
    assert LeaseView.of({"spec": {}}) == LeaseView("", 0.0, 0.0, 0)


@pytest.mark.parametrize(
    ("retry", "deadline", "duration"), [(2, 10, 10), (10, 2, 15), (0, 10, 15), (2, 20, 15)]
)
def test_lease_timings_that_cannot_work_are_refused(retry: float, deadline: float, duration: float) -> None:
    settings = LeaderElectionSettings(
        lease_retry_seconds=retry, lease_renew_deadline_seconds=deadline, lease_duration_seconds=duration
    )
    with pytest.raises(SettingsError, match="OPERATOR_SUITE_LEASE_RETRY_SECONDS"):
        settings.check()


def test_client_gos_defaults_are_accepted() -> None:
    LeaderElectionSettings().check()


class LeaseKube:
    """One Lease in memory; watching it is refused, as a chart's RBAC from before the watch refuses it."""

    def __init__(self) -> None:
        self.lease: dict[str, Any] | None = None
        self.version = 0
        self.watches = 0

    async def get_live(self, api_version: str, kind: str, name: str, namespace: str) -> dict[str, Any] | None:
        return self.lease

    async def create(self, manifest: dict[str, Any]) -> dict[str, Any]:
        return self._store(manifest)

    async def patch(self, *where_and_patch: Any) -> dict[str, Any]:
        patch = where_and_patch[-1]
        assert self.lease is not None
        if patch["metadata"].get("resourceVersion") != self.lease["metadata"]["resourceVersion"]:
            raise errors.Conflict("the Lease changed", status=409)
        return self._store({**self.lease, "spec": {**self.lease["spec"], **patch["spec"]}})

    def _store(self, manifest: dict[str, Any]) -> dict[str, Any]:
        self.version += 1
        self.lease = {**manifest, "metadata": {**manifest["metadata"], "resourceVersion": str(self.version)}}
        return self.lease

    async def watch_objects(self, *arguments: Any, **options: Any) -> AsyncIterator[tuple[str, Any]]:
        self.watches += 1
        raise errors.Forbidden("leases is forbidden: cannot watch", status=403)
        yield  # an async generator, as the real one


async def test_a_standby_refused_its_watch_still_takes_a_released_lease_at_its_next_try() -> None:
    kube = LeaseKube()
    fast = LeaderElectionSettings(
        leader_election=True,
        lease_duration_seconds=3,
        lease_renew_deadline_seconds=2,
        lease_retry_seconds=0.05,
    )
    leader, standby = (
        LeaderElector(kube, fast, name="l", namespace="n", identity=identity)  # type: ignore[arg-type]
        for identity in ("leader", "standby")
    )
    assert await leader.try_once()
    standing_by = asyncio.create_task(standby.acquire(asyncio.Event()))
    await asyncio.sleep(0.2)
    assert not standing_by.done()
    assert kube.watches == 1, "a refused watch is not asked for again"
    await leader.release()
    assert await asyncio.wait_for(standing_by, timeout=1)
    assert kube.lease is not None
    assert kube.lease["spec"]["holderIdentity"] == "standby"


class RevokedKube(LeaseKube):
    """The chart's RBAC uninstalled under a stopping leader: its token no longer reads the Lease."""

    async def get_live(self, api_version: str, kind: str, name: str, namespace: str) -> dict[str, Any] | None:
        raise errors.KubeError("reading Lease l: Unauthorized", status=401)


async def test_a_lease_that_can_no_longer_be_read_is_left_to_expire_and_the_stop_stays_clean(
    caplog: pytest.LogCaptureFixture,
) -> None:
    leader = LeaderElector(RevokedKube(), LeaderElectionSettings(), name="l", namespace="n", identity="x")  # type: ignore[arg-type]
    await leader.release()
    assert "could not release Lease n/l (it expires by itself): reading Lease l: Unauthorized" in caplog.text
