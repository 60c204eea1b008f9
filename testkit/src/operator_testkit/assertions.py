"""What integration tests look at and wait for: conditions, children, Events, an operator's requests.

Every operator's integration tests use these against the local control plane
(the ``kube`` and ``control_plane`` fixtures of :mod:`operator_testkit.fixtures`):

- :func:`condition` and :func:`wait_for_condition`: a condition of a custom object;
- :func:`wait_for_object`: any object, including one of a kind whose CRD was just installed;
- :func:`all_gone`: whether none of some objects exists (say, after garbage collection);
- :func:`events_for` and :func:`wait_for_events`: the Events of a namespace with one reason;
- :func:`operator_requests`, :func:`settle`, :func:`wait_for_request` and :func:`writes_since`: the API
  server's audit log, as seen from one operator's ServiceAccount (to prove quiet
  reconciles: no write when nothing changed);
- :func:`reconciles_counted` and :func:`wait_for_reconcile`: an operator's own count of its
  reconciles (from its ``/healthz``), to know that a reconcile ran which made no request.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from typing import Any, cast

from operator_core.errors import NotFound
from operator_core.kube import Kube
from operator_testkit.controlplane import ControlPlane
from operator_testkit.fixtures import wait_until
from operator_testkit.operators import OperatorProcess

__all__ = [
    "WRITE_VERBS",
    "all_gone",
    "condition",
    "events_for",
    "operator_requests",
    "reconciles_counted",
    "settle",
    "wait_for_condition",
    "wait_for_events",
    "wait_for_object",
    "wait_for_reconcile",
    "wait_for_request",
    "writes_since",
]

WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})


def condition(obj: Mapping[str, Any], condition_type: str) -> dict[str, Any] | None:
    """The condition of that type in ``obj``'s status, or None."""
    for item in (obj.get("status") or {}).get("conditions") or []:
        if item["type"] == condition_type:
            return dict(item)
    return None


async def wait_for_condition(
    kube: Kube,
    api_version: str,
    kind: str,
    name: str,
    namespace: str,
    condition_type: str,
    status: str,
    reason: str | None = None,
    *,
    message: str | None = None,
    timeout: float = 30.0,
) -> dict[str, Any]:
    """Wait until the object's condition has ``status`` (and ``reason``, and ``message`` in its message,
    if given); the condition."""

    async def matches() -> dict[str, Any] | None:
        obj = await kube.get(api_version, kind, name, namespace)
        found = condition(obj or {}, condition_type)
        if (
            found
            and found["status"] == status
            and (reason is None or found["reason"] == reason)
            and (message is None or message in found.get("message", ""))
        ):
            return found
        return None

    what = f"{kind} {name}: {condition_type}={status} {reason or ''} {message or ''}"
    return cast(dict[str, Any], await wait_until(matches, timeout=timeout, what=what))


async def wait_for_object(
    kube: Kube, api_version: str, kind: str, name: str, namespace: str, *, timeout: float = 30.0
) -> dict[str, Any]:
    """Wait until the object exists; it. A kind the API server does not serve yet counts as absent."""

    async def present() -> dict[str, Any] | None:
        try:
            return await kube.get(api_version, kind, name, namespace)
        except NotFound:  # a kind whose CRD was installed a moment ago
            return None

    return cast(dict[str, Any], await wait_until(present, timeout=timeout, what=f"{kind} {name}"))


async def all_gone(kube: Kube, namespace: str, objects: Iterable[tuple[str, str, str]]) -> bool:
    """Whether none of the (apiVersion, kind, name) objects exists in ``namespace``."""
    for api_version, kind, name in objects:
        if await kube.get(api_version, kind, name, namespace) is not None:
            return False
    return True


async def events_for(kube: Kube, namespace: str, reason: str) -> list[dict[str, Any]]:
    """The namespace's Events with that reason."""
    # The core/v1 view: it also shows Events with no eventTime (a kubelet's, kubectl's), which the
    # events.k8s.io decoder refuses.
    return [e for e in await kube.list("v1", "Event", namespace) if e["reason"] == reason]


async def wait_for_events(
    kube: Kube, namespace: str, reason: str, count: int = 1, *, timeout: float = 30.0
) -> list[dict[str, Any]]:
    """Wait until the namespace has at least ``count`` Events with that reason; those Events."""

    async def enough() -> list[dict[str, Any]] | None:
        found = await events_for(kube, namespace, reason)
        return found if len(found) >= count else None

    what = f"{count} {reason} Event(s) in {namespace}"
    return cast(list[dict[str, Any]], await wait_until(enough, timeout=timeout, interval=0.5, what=what))


def operator_requests(control_plane: ControlPlane, user: str, namespace: str) -> list[dict[str, Any]]:
    """Audit events of the requests ``user`` (an operator's ServiceAccount) made in ``namespace``.
    (A request refused as unauthenticated, 401, has no user name in its event.)"""
    return [
        e
        for e in control_plane.audit_events()
        if e["user"].get("username") == user and (e.get("objectRef") or {}).get("namespace") == namespace
    ]


def writes_since(control_plane: ControlPlane, user: str, namespace: str, since: int) -> list[dict[str, Any]]:
    """The write requests among those ``user`` made in ``namespace`` after the first ``since``."""
    return [e for e in operator_requests(control_plane, user, namespace)[since:] if e["verb"] in WRITE_VERBS]


async def settle(
    control_plane: ControlPlane, user: str, namespace: str, *, quiet_seconds: float = 3.0
) -> int:
    """Wait until ``user`` has made no request in ``namespace`` for ``quiet_seconds``; the request count."""

    async def quiet() -> int | None:
        before = len(operator_requests(control_plane, user, namespace))
        await asyncio.sleep(quiet_seconds)
        after = len(operator_requests(control_plane, user, namespace))
        return after if after == before else None

    return cast(int, await wait_until(quiet, timeout=60, what="the operator to settle"))


async def wait_for_request(
    control_plane: ControlPlane,
    user: str,
    namespace: str,
    since: int,
    *,
    verb: str,
    resource: str,
    name_suffix: str = "",
) -> dict[str, Any]:
    """Wait for a request of ``user`` after the first ``since`` ones (see :func:`settle`); its audit event."""

    def made() -> dict[str, Any] | None:
        for event in operator_requests(control_plane, user, namespace)[since:]:
            ref = event.get("objectRef") or {}
            if (
                event["verb"] == verb
                and ref.get("resource") == resource
                and ref.get("name", "").endswith(name_suffix)
            ):
                return event
        return None

    return cast(dict[str, Any], await wait_until(made, what=f"a {verb} of {resource} *{name_suffix}"))


async def reconciles_counted(operator: OperatorProcess, *, at_or_after: float) -> int:
    """The operator's count of reconciles (its ``/healthz``), as counted at ``at_or_after`` (wall time)
    or later."""

    async def fresh() -> int | None:
        reading = (await asyncio.to_thread(operator.health))["reconciles"]
        return int(reading["count"]) if reading["at"] >= at_or_after else None

    return cast(int, await wait_until(fresh, timeout=30, interval=0.5, what="a fresh count of reconciles"))


async def wait_for_reconcile(operator: OperatorProcess, *, more_than: int, since: float) -> int:
    """Wait until the operator has run more than ``more_than`` reconciles, counted a second or more after
    ``since`` (wall time; a reconcile takes milliseconds); the count."""

    async def counted() -> int | None:
        count = await reconciles_counted(operator, at_or_after=since + 1.0)
        return count if count > more_than else None

    return cast(
        int, await wait_until(counted, timeout=30, interval=0.5, what=f"a reconcile after {more_than}")
    )
