"""kopf handlers of the Typesense operator; importing this module registers them.

Each TypesenseCluster gets one daemon: a level-triggered loop
(:func:`operator_core.reconciling.run_object_loop`) that reads the cluster, runs
:func:`~typesense_operator.controller.reconcile.reconcile`, and sleeps until
something changes (the cluster, or one of its children) or the resync interval
passes. Events on children only wake that loop, so a child deleted or edited by
hand is restored within moments, and two reconciles of one cluster never run at
once.
"""

from __future__ import annotations

import logging
from typing import Any

import kopf

from operator_core.reconciling import (
    References,
    Wakeups,
    connect,
    reconcile_gate,
    run_object_loop,
    wake_on_children,
    wake_on_references,
)
from operator_core.runner import configure_kopf
from operator_core.settings import from_env
from typesense_operator.api import TYPESENSE_CLUSTER
from typesense_operator.controller.reconcile import reconcile
from typesense_operator.controller.settings import TypesenseSettings
from typesense_operator.quorum.probe import ApiServerProxy, DirectToPod
from typesense_operator.resources.model import MANAGED_BY

API_GROUP = TYPESENSE_CLUSTER.group
CONTROLLER_NAME = f"{API_GROUP}/typesense-operator"

_logger = logging.getLogger(__name__)
_wakeups = Wakeups()


def _admin_key_secret(obj: dict[str, Any]) -> list[tuple[str, str]]:
    """The user's admin key Secret (spec.adminApiKey): created late or changed, it wakes the cluster."""
    key = ((obj.get("spec") or {}).get("adminApiKey") or {}).get("name")
    return [("secrets", key)] if key else []


_references = References(_admin_key_secret)

# Children whose changes wake their cluster's loop; found by the labels every child carries.
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


@kopf.on.startup()
async def configure(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    configure_kopf(settings, API_GROUP)
    memo.kube, memo.recorder = connect(CONTROLLER_NAME)
    memo.gate = reconcile_gate()
    memo.settings = from_env(TypesenseSettings)
    memo.addressing = ApiServerProxy(memo.kube) if memo.settings.probe_via == "api-proxy" else DirectToPod()


@kopf.on.cleanup()
async def close(memo: kopf.Memo, **_: Any) -> None:
    if isinstance(memo.addressing, DirectToPod):
        await memo.addressing.aclose()
    await memo.kube.close()


@kopf.on.event(TYPESENSE_CLUSTER.group, TYPESENSE_CLUSTER.version, TYPESENSE_CLUSTER.plural)
async def cluster_changed(namespace: str | None, name: str, **_: Any) -> None:
    _wakeups.wake((namespace, name))


wake_on_children(_wakeups, _CHILD_KINDS, MANAGED_BY)
wake_on_references(_wakeups, _references, (("", "v1", "secrets"),))


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

    async def reconcile_cluster(obj: dict[str, Any]) -> float:
        return await reconcile(obj, memo.kube, memo.recorder, memo.addressing, memo.settings)

    await run_object_loop(
        memo.kube,
        TYPESENSE_CLUSTER,
        name,
        namespace,
        reconcile_cluster,
        _wakeups,
        stopped,
        logger=_logger,
        gate=memo.gate,
        references=_references,
    )
