"""Two replicas of an operator, one Lease: only the leader reconciles; a standby is ready and idle; the
standby takes over when the leader stops cleanly (a pod deleted) within seconds, and when it crashes
within the Lease's duration. Both operators run with exactly their chart's RBAC, against the real API
server; what each one does is read from its own /metrics."""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from pathlib import Path

import httpx
import pytest

from operator_core.kube import Kube
from operator_core.leader import LeaderElectionSettings, LeaderElector
from operator_testkit.controlplane import ControlPlane
from operator_testkit.fixtures import wait_until
from operator_testkit.operators import OperatorProcess, chart_account, service_account_kubeconfig

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "charts" / "typesense-operator" / "files" / "rbac-rules.yaml"
LEASE_SECONDS = 15.0  # the default: what a crashed leader costs at most, plus one retry


def _replica(
    kubeconfig: Path, home: Path, name: str, namespace: str, lease_namespace: str, lease: str
) -> OperatorProcess:
    environment = {
        **os.environ,
        "OPERATOR_SUITE_LEADER_ELECTION_NAMESPACE": lease_namespace,
        "OPERATOR_SUITE_LEADER_ELECTION_LEASE": lease,
    }
    return OperatorProcess(
        "typesense-operator",
        kubeconfig,
        home / f"{name}.log",
        "--leader-elect",
        "--namespace",
        namespace,
        environment=environment,
    )


def _leading(process: OperatorProcess) -> bool:
    return process.sample("operator_leader") == 1


def _reconciles(process: OperatorProcess) -> float:
    return process.sample("operator_reconciles_total", kind="TypesenseCluster", result="success") or 0.0


async def _until(check: object, what: str, timeout: float) -> float:
    """Seconds until ``check()`` holds."""
    started = time.monotonic()
    await wait_until(lambda: asyncio.to_thread(check), what=what, timeout=timeout)  # type: ignore[arg-type]
    return time.monotonic() - started


async def test_only_the_leader_acts_and_the_standby_takes_over_after_a_stop_and_after_a_crash(
    control_plane: ControlPlane, installed_crds: list[str], kube: Kube, namespace: str, tmp_path: Path
) -> None:
    kubeconfig = service_account_kubeconfig(control_plane, RULES, tmp_path / "kubeconfig")
    # The Lease the chart's Role grants, where the chart's Deployment points the operator at it.
    lease_namespace, lease = chart_account("typesense-operator")
    first = _replica(kubeconfig, tmp_path, "first", namespace, lease_namespace, lease)
    second = _replica(kubeconfig, tmp_path, "second", namespace, lease_namespace, lease)
    try:
        first.start()
        await _until(lambda: _leading(first), "the first replica to lead", 30)
        second.start()
        # A standby: alive, ready (to take over), not leading, and it runs no handler.
        ready = await asyncio.to_thread(httpx.get, f"http://127.0.0.1:{second.probes_port}/readyz", timeout=5)
        assert ready.status_code == 200
        assert not _leading(second)

        await kube.apply(
            {
                "apiVersion": "ts.opentelekomcloud.com/v1alpha1",
                "kind": "TypesenseCluster",
                "metadata": {"name": "cluster-1", "namespace": namespace},
                "spec": {"image": "typesense/typesense:27.1", "replicas": 1, "storage": {"size": "100Mi"}},
            }
        )
        await _until(lambda: _reconciles(first) > 0, "the leader to reconcile", 30)
        await asyncio.sleep(2)
        assert _reconciles(second) == 0, "the standby reconciled"
        held = await kube.get_live("coordination.k8s.io/v1", "Lease", lease, lease_namespace)
        assert held is not None
        assert held["spec"]["holderIdentity"].endswith(f"_{first.pid}")

        # A clean stop (what deleting its pod does): the leader releases the Lease on its way out.
        stopped = time.monotonic()
        assert first.stop() == 0
        exited = time.monotonic()
        await _until(lambda: _leading(second), "the standby to lead", 20)
        clean_handover, after_exit = time.monotonic() - stopped, time.monotonic() - exited
        await _until(lambda: _reconciles(second) > 0, "the new leader to reconcile", 30)
        assert clean_handover < 3, f"handover after a clean stop took {clean_handover:.1f} s"

        # A crash: nobody releases the Lease; it expires.
        first.start()
        assert not _leading(first)
        crashed = time.monotonic()
        second.kill()
        await _until(lambda: _leading(first), "the standby to lead after a crash", LEASE_SECONDS + 10)
        crash_handover = time.monotonic() - crashed
        assert crash_handover < LEASE_SECONDS + 5, f"handover after a crash took {crash_handover:.1f} s"
        transitions = await kube.get_live("coordination.k8s.io/v1", "Lease", lease, lease_namespace)
        assert transitions is not None
        assert transitions["spec"]["leaseTransitions"] >= 2
        print(
            f"handover: {clean_handover:.1f} s after a clean stop "
            f"({after_exit:.1f} s after the leader's exit), "
            f"{crash_handover:.1f} s after a crash"
        )
        assert first.stop() == 0
    finally:
        first.stop()
        second.stop()
    for process in (first, second):
        assert "Traceback" not in process.log(), process.log()


async def test_a_standby_sees_a_released_lease_at_once_rather_than_at_its_next_try(
    kube: Kube, namespace: str
) -> None:
    """Ten seconds between tries: only the standby's watch of the Lease explains a takeover within two.
    (This is also why a Deployment's replacement pod, which tries as it starts, does not beat it.)"""
    slow = LeaderElectionSettings(
        leader_election=True,
        lease_duration_seconds=60,
        lease_renew_deadline_seconds=30,
        lease_retry_seconds=10,
    )
    lease = f"handover-{uuid.uuid4().hex[:6]}"
    leader, standby = (
        LeaderElector(kube, slow, name=lease, namespace=namespace, identity=identity)
        for identity in ("leader", "standby")
    )
    assert await leader.try_once()
    standing_by = asyncio.create_task(standby.acquire(asyncio.Event()))
    await asyncio.sleep(1.5)  # it looked, found the Lease held, and waits
    assert not standing_by.done()
    released = time.monotonic()
    await leader.release()
    assert await asyncio.wait_for(standing_by, timeout=5)
    took = time.monotonic() - released
    held = await kube.get_live("coordination.k8s.io/v1", "Lease", lease, namespace)
    assert held is not None
    assert held["spec"]["holderIdentity"] == "standby"
    assert took < 2, f"the standby took {took:.1f} s to see the release"
