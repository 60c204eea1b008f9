"""kopf handlers of the Typesense operator; importing this module registers them.

Each TypesenseCluster gets one daemon: a level-triggered loop that reads the
cluster, runs :func:`~typesense_operator.controller.reconcile.reconcile`, and
sleeps until something changes (the cluster, or one of its children) or the
resync interval passes. Events on children only wake that loop, so a child
deleted or edited by hand is restored within moments, and two reconciles of one
cluster never run at once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

import kopf

from operator_core import errors
from operator_core.events import EventRecorder
from operator_core.kube import Kube
from operator_core.runner import configure_kopf
from operator_core.settings import KubeSettings, from_env
from typesense_operator.api import TYPESENSE_CLUSTER
from typesense_operator.controller.reconcile import reconcile
from typesense_operator.controller.settings import TypesenseSettings
from typesense_operator.quorum.probe import ApiServerProxy, DirectToPod
from typesense_operator.resources.model import MANAGED_BY

API_GROUP = TYPESENSE_CLUSTER.group
CONTROLLER_NAME = f"{API_GROUP}/typesense-operator"
RETRY_SECONDS = (2.0, 5.0, 10.0, 30.0)

_logger = logging.getLogger(__name__)
_wakeups: dict[tuple[str, str], asyncio.Event] = {}

# Children whose changes wake their cluster's loop; found by the labels every child carries.
# The handlers are async on purpose: kopf runs sync handlers in a thread pool, and every
# thread costs an allocator arena of resident memory.
_CHILD_KINDS = (
    ("", "v1", "configmaps"),
    ("", "v1", "services"),
    ("", "v1", "secrets"),
    ("apps", "v1", "statefulsets"),
    ("apps", "v1", "deployments"),
    ("policy", "v1", "poddisruptionbudgets"),
    ("networking.k8s.io", "v1", "ingresses"),
    ("batch", "v1", "cronjobs"),
)


def wake(namespace: str | None, name: str | None) -> None:
    if namespace and name and (event := _wakeups.get((namespace, name))):
        event.set()


@kopf.on.startup()
async def configure(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    configure_kopf(settings, API_GROUP)
    kube_settings = from_env(KubeSettings)
    memo.kube = Kube.connect(field_manager=kube_settings.field_manager, timeout=kube_settings.request_timeout)
    memo.recorder = EventRecorder(memo.kube, controller=CONTROLLER_NAME)
    memo.settings = from_env(TypesenseSettings)
    memo.addressing = ApiServerProxy(memo.kube) if memo.settings.probe_via == "api-proxy" else DirectToPod()


@kopf.on.cleanup()
async def close(memo: kopf.Memo, **_: Any) -> None:
    if isinstance(memo.addressing, DirectToPod):
        await memo.addressing.aclose()
    await memo.kube.close()


@kopf.on.event(TYPESENSE_CLUSTER.group, TYPESENSE_CLUSTER.version, TYPESENSE_CLUSTER.plural)
async def cluster_changed(namespace: str | None, name: str, **_: Any) -> None:
    wake(namespace, name)


async def _child_changed(labels: Mapping[str, str], namespace: str | None, **_: Any) -> None:
    wake(namespace, labels.get("app.kubernetes.io/instance"))


for _group, _version, _plural in _CHILD_KINDS:
    kopf.on.event(_group, _version, _plural, labels={"app.kubernetes.io/managed-by": MANAGED_BY})(
        _child_changed
    )


@kopf.daemon(
    TYPESENSE_CLUSTER.group,
    TYPESENSE_CLUSTER.version,
    TYPESENSE_CLUSTER.plural,
    cancellation_timeout=10.0,
)
async def run_cluster(
    name: str, namespace: str | None, stopped: kopf.DaemonStopped, memo: kopf.Memo, **_: Any
) -> None:
    """Reconcile one cluster until it is deleted or the operator stops."""
    assert namespace is not None, "TypesenseCluster is namespaced"
    kube: Kube = memo.kube
    recorder: EventRecorder = memo.recorder
    wakeup = _wakeups.setdefault((namespace, name), asyncio.Event())
    failures = 0
    try:
        while not stopped:
            wakeup.clear()
            try:
                obj = await kube.get(TYPESENSE_CLUSTER.api_version, TYPESENSE_CLUSTER.kind, name, namespace)
                if obj is None or obj["metadata"].get("deletionTimestamp"):
                    return
                delay = await reconcile(obj, kube, recorder, memo.addressing, memo.settings)
                failures = 0
            except errors.KubeError as error:
                delay = RETRY_SECONDS[min(failures, len(RETRY_SECONDS) - 1)]
                failures += 1
                _logger.warning(
                    "reconcile of %s/%s failed, retrying in %.0f s: %s", namespace, name, delay, error
                )
            except Exception:
                # A bug must not stop this cluster's loop (kopf would wait a minute): log, back off, go on.
                delay = RETRY_SECONDS[min(failures, len(RETRY_SECONDS) - 1)]
                failures += 1
                _logger.exception("reconcile of %s/%s crashed, retrying in %.0f s", namespace, name, delay)
            await _sleep(wakeup, stopped, delay)
    finally:
        _wakeups.pop((namespace, name), None)


async def _sleep(wakeup: asyncio.Event, stopped: kopf.DaemonStopped, seconds: float) -> None:
    """Until woken, stopped, or ``seconds`` pass."""
    waiters = {asyncio.ensure_future(wakeup.wait()), asyncio.ensure_future(stopped.wait())}
    try:
        await asyncio.wait(waiters, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()
