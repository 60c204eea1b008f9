"""Leader election on a ``coordination.k8s.io/v1`` Lease: of two replicas, only one acts.

A replica that is not the leader runs no handler and no watch cache: it serves
its health and metrics endpoints, watches the Lease, and tries it whenever it
changes and every ``retry_seconds`` (a Lease that expires sends no event).
The leader renews it every ``retry_seconds``; a renewal that has not succeeded
for ``renew_deadline_seconds`` means another replica may take over soon, so the
leader exits at once (as controller-runtime does), before its Lease can expire,
and never acts beside a new leader. A leader that stops cleanly (SIGTERM, a pod
deleted) first finishes the reconciles in flight, then releases the Lease, so the
standby takes over at once (it sees the release) instead of after a whole Lease
duration, and before a replica that is only starting can take it.

Why a Lease: it is what every Kubernetes controller uses, it needs no CRD of its
own, a replica waits for it before it acts (no race at start), and ``kubectl get
lease`` shows who leads (``docs/decisions.md``, decision 17).

:func:`decide` is pure and table-tested; :class:`LeaderElector` is its adapter.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from operator_core import errors
from operator_core.cache import OPENED
from operator_core.clock import micro_time, parse_wire_time
from operator_core.kube import Kube
from operator_core.metrics import ReplicaState
from operator_core.reconciling import first_of

__all__ = ["Action", "LeaderElectionSettings", "LeaderElector", "LeaseView", "decide"]

log = logging.getLogger(__name__)

LEASE_API = "coordination.k8s.io/v1"
SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


@dataclass(frozen=True)
class LeaderElectionSettings:
    """Whether replicas elect a leader, and the Lease's timing (client-go's defaults)."""

    leader_election: bool = False
    """Run as one of several replicas: only the holder of the Lease acts."""
    leader_election_namespace: str = ""
    """Where the Lease lives; default: the pod's own namespace, else ``default``."""
    leader_election_lease: str = ""
    """The Lease's name; default: ``<operator>-leader``."""
    lease_duration_seconds: float = 15.0
    """How long a Lease not renewed keeps others out: the longest takeover after a leader crashes."""
    lease_renew_deadline_seconds: float = 10.0
    """A leader that could not renew for this long exits; must be shorter than the duration."""
    lease_retry_seconds: float = 2.0
    """How often the leader renews and a standby tries: the takeover time after a clean stop."""

    def check(self) -> None:
        if not 0 < self.lease_retry_seconds < self.lease_renew_deadline_seconds < self.lease_duration_seconds:
            raise errors.SettingsError(
                "leader election needs 0 < OPERATOR_SUITE_LEASE_RETRY_SECONDS < "
                "OPERATOR_SUITE_LEASE_RENEW_DEADLINE_SECONDS < OPERATOR_SUITE_LEASE_DURATION_SECONDS; "
                f"got {self.lease_retry_seconds}, {self.lease_renew_deadline_seconds}, "
                f"{self.lease_duration_seconds}"
            )


@dataclass(frozen=True)
class LeaseView:
    """What decides who leads: the Lease's holder, when it last renewed, and for how long it holds."""

    holder: str
    renewed_at: float  # seconds since the epoch
    duration: float
    transitions: int = 0

    @classmethod
    def of(cls, lease: Mapping[str, Any]) -> LeaseView:
        spec = lease.get("spec") or {}
        stamp = spec.get("renewTime") or spec.get("acquireTime")
        renewed = _parse_time(stamp) if stamp else 0.0
        return cls(
            holder=spec.get("holderIdentity") or "",
            renewed_at=renewed,
            duration=float(spec.get("leaseDurationSeconds") or 0),
            transitions=int(spec.get("leaseTransitions") or 0),
        )


class Action(Enum):
    CREATE = "create"  # no Lease yet
    TAKE = "take"  # free, released, or expired: take it over
    RENEW = "renew"  # ours
    WAIT = "wait"  # another replica holds it


def decide(lease: LeaseView | None, identity: str, now: float) -> Action:
    """What a replica does with the Lease it sees (pure)."""
    if lease is None:
        return Action.CREATE
    if lease.holder == identity:
        return Action.RENEW
    if not lease.holder or now > lease.renewed_at + lease.duration:
        return Action.TAKE
    return Action.WAIT


def default_namespace() -> str:
    try:
        return SERVICE_ACCOUNT_NAMESPACE.read_text().strip() or "default"
    except OSError:
        return "default"


WATCH_SECONDS = 300
"""How long one watch of the Lease lasts before the server ends it and it is opened again."""


def _parse_time(stamp: str) -> float:
    moment = parse_wire_time(stamp)
    return moment.timestamp() if moment else 0.0


class LeaderElector:
    """Holds one Lease for one replica: :meth:`acquire`, then :meth:`keep` while it leads, :meth:`release`."""

    def __init__(
        self,
        kube: Kube,
        settings: LeaderElectionSettings,
        *,
        name: str,
        namespace: str,
        identity: str,
        clock: Callable[[], float] = time.time,
        replica: ReplicaState | None = None,
    ) -> None:
        self._kube = kube
        self._replica = replica if replica is not None else ReplicaState()
        """Told whether the Lease can be read: a standby that cannot would not take over (/readyz)."""
        self._settings = settings
        self.name, self.namespace, self.identity = name, namespace, identity
        self._clock = clock
        self._last_renewed = 0.0  # monotonic, for the renew deadline
        self._seen_version = ""  # the Lease's resourceVersion at the last look: where a watch starts

    def _manifest(
        self, view: LeaseView | None, *, acquiring: bool, resource_version: str | None
    ) -> dict[str, Any]:
        now = micro_time(self._clock())
        spec: dict[str, Any] = {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": round(self._settings.lease_duration_seconds),
            "renewTime": now,
        }
        if acquiring:
            spec["acquireTime"] = now
            spec["leaseTransitions"] = (view.transitions + 1) if view is not None else 0
        metadata: dict[str, Any] = {"name": self.name, "namespace": self.namespace}
        if resource_version is not None:
            metadata["resourceVersion"] = resource_version
        return {"apiVersion": LEASE_API, "kind": "Lease", "metadata": metadata, "spec": spec}

    async def try_once(self) -> bool:
        """One look at the Lease, taking or renewing it when :func:`decide` says so; True while we lead.

        Every write is conditional on the resourceVersion read, so two replicas that both see
        the Lease free cannot both take it: one gets a Conflict and waits.
        """
        lease = await self._kube.get_live(LEASE_API, "Lease", self.name, self.namespace)
        view = LeaseView.of(lease) if lease is not None else None
        self._seen_version = str((lease or {}).get("metadata", {}).get("resourceVersion") or "")
        action = decide(view, self.identity, self._clock())
        try:
            if action is Action.WAIT:
                return False
            if action is Action.CREATE:
                await self._kube.create(self._manifest(None, acquiring=True, resource_version=None))
            else:
                assert lease is not None
                manifest = self._manifest(
                    view,
                    acquiring=action is Action.TAKE,
                    resource_version=lease["metadata"]["resourceVersion"],
                )
                await self._kube.patch(LEASE_API, "Lease", self.name, self.namespace, manifest)
        except errors.Conflict:
            return False
        if action is not Action.RENEW:
            log.info("became the leader (Lease %s/%s, identity %s)", self.namespace, self.name, self.identity)
        self._last_renewed = time.monotonic()
        return True

    async def acquire(self, stopping: asyncio.Event) -> bool:
        """Until this replica leads (True) or ``stopping`` is set (False).

        It tries again every retry period, and at once when the Lease changes (:meth:`_watch`): a
        released Lease goes to the replica that stood by, within a moment, not to one that is only
        starting (a Deployment's replacement pod) because it happened to try first.
        """
        announced = False
        changed = asyncio.Event()
        watching: asyncio.Task[None] | None = None
        try:
            while not stopping.is_set():
                changed.clear()
                try:
                    took = await self.try_once()
                    self._replica.lease_reachable(True)
                    if took:
                        return True
                    if not announced:
                        log.info("standing by: another replica holds Lease %s/%s", self.namespace, self.name)
                        announced = True
                    if watching is None:
                        watching = asyncio.create_task(self._watch(changed))
                except errors.KubeError as error:
                    self._replica.lease_reachable(False)
                    level = errors.retry_log_level(error)
                    log.log(level, "cannot read or write Lease %s/%s: %s", self.namespace, self.name, error)
                await first_of(stopping, changed, timeout=self._settings.lease_retry_seconds)
            return False
        finally:
            if watching is not None:
                watching.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await watching

    async def _watch(self, changed: asyncio.Event) -> None:
        """Set ``changed`` whenever the Lease changes, from the version last read on. When watching is
        refused (a chart's RBAC from before this watch), the standby goes on trying every retry period."""
        while True:
            try:
                version = self._seen_version
                events = self._kube.watch_objects(
                    (LEASE_API, "Lease"), None, version, WATCH_SECONDS, self.namespace, name=self.name
                )
                # Closed here, not by the garbage collector, when acquire cancels the watch.
                async with contextlib.aclosing(events):
                    async for event_type, lease in events:
                        if event_type in (OPENED, "BOOKMARK"):
                            continue
                        self._seen_version = str(lease.get("metadata", {}).get("resourceVersion") or "")
                        changed.set()
            except errors.Expired:
                self._seen_version = ""
                continue
            except errors.Forbidden as error:
                log.info("not watching Lease %s/%s (trying it every %.0f s): %s", self.namespace, self.name,
                         self._settings.lease_retry_seconds, error)  # fmt: skip
                return
            except errors.KubeError as error:
                log.debug("watching Lease %s/%s: %s", self.namespace, self.name, error)
            await asyncio.sleep(self._settings.lease_retry_seconds)

    async def keep(self, lost: Callable[[], None]) -> None:
        """Renew every retry period; call ``lost`` once renewals have failed for the renew deadline."""
        while True:
            await asyncio.sleep(self._settings.lease_retry_seconds)
            try:
                if await self.try_once():
                    continue
                log.error("Lease %s/%s was taken by another replica", self.namespace, self.name)
                lost()
                return
            except errors.KubeError as error:
                log.log(
                    errors.retry_log_level(error),
                    "cannot renew Lease %s/%s: %s",
                    self.namespace,
                    self.name,
                    error,
                )
            if time.monotonic() - self._last_renewed > self._settings.lease_renew_deadline_seconds:
                log.error(
                    "could not renew Lease %s/%s for %.0f s", self.namespace, self.name,
                    self._settings.lease_renew_deadline_seconds,
                )  # fmt: skip
                lost()
                return

    async def release(self) -> None:
        """Give the Lease up (no holder, for one second) so that a standby takes over at once.

        Best-effort, as the stop it ends: a Lease that cannot be read or written (its RBAC already gone
        with an uninstalled chart, say) is left to expire, with one warning, and the stop stays clean.
        """
        try:
            lease = await self._kube.get_live(LEASE_API, "Lease", self.name, self.namespace)
            if lease is None or LeaseView.of(lease).holder != self.identity:
                return
            patch = {
                "metadata": {"resourceVersion": lease["metadata"]["resourceVersion"]},
                "spec": {
                    "holderIdentity": None,
                    "leaseDurationSeconds": 1,
                    "renewTime": micro_time(self._clock()),
                },
            }
            await self._kube.patch(LEASE_API, "Lease", self.name, self.namespace, patch)
            log.info("released Lease %s/%s", self.namespace, self.name)
        except errors.KubeError as error:
            log.warning(
                "could not release Lease %s/%s (it expires by itself): %s", self.namespace, self.name, error
            )
