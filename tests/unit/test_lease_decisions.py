"""Who leads: the Lease decision, read from a Lease as the API server returns it."""

from __future__ import annotations

import pytest

from operator_core.errors import SettingsError
from operator_core.leader import Action, LeaderElectionSettings, LeaseView, decide

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
