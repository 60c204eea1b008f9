"""kopf handlers of the Monocle operator; importing this module registers them.

Each Monocle instance gets one daemon: a level-triggered loop
(:func:`operator_core.reconciling.run_object_loop`) that reads the instance, runs
:func:`~monocle_operator.controller.reconcile.reconcile`, and sleeps until
something changes or the resync interval passes. Events on the children wake
their instance's loop, so a child deleted or edited by hand is restored within
moments, a Secret or config edit is acted on at once, and two reconciles of
one instance never run at once. The user's own Secret and ConfigMap carry none
of our labels, so every Secret and ConfigMap is watched, and only an instance
that names one in its spec is woken by it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import kopf

from monocle_operator.api import MONOCLE, MonocleSpec
from monocle_operator.controller.reconcile import reconcile
from monocle_operator.resources import MANAGED_BY
from operator_core.reconciling import Wakeups, connect, reconcile_gate, run_object_loop, wake_on_children
from operator_core.runner import configure_kopf

API_GROUP = MONOCLE.group
CONTROLLER_NAME = f"{API_GROUP}/monocle-operator"

_logger = logging.getLogger(__name__)
_wakeups = Wakeups()
# (namespace, Secret or ConfigMap name) -> instances whose spec names it.
_references: dict[tuple[str, str], set[str]] = {}

# Children whose changes wake their instance's loop, found by the labels every child carries.
_CHILD_KINDS = (
    ("", "v1", "services"),
    ("", "v1", "persistentvolumeclaims"),
    ("apps", "v1", "statefulsets"),
    ("apps", "v1", "deployments"),
    ("batch", "v1", "jobs"),
    ("networking.k8s.io", "v1", "ingresses"),
)


@kopf.on.startup()
async def configure(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    configure_kopf(settings, API_GROUP)
    memo.kube, memo.recorder = connect(CONTROLLER_NAME)
    memo.gate = reconcile_gate()


@kopf.on.cleanup()
async def close(memo: kopf.Memo, **_: Any) -> None:
    await memo.kube.close()


@kopf.on.event(MONOCLE.group, MONOCLE.version, MONOCLE.plural)
async def instance_changed(namespace: str | None, name: str, **_: Any) -> None:
    _wakeups.wake((namespace, name))


wake_on_children(_wakeups, _CHILD_KINDS, MANAGED_BY)


@kopf.on.event("", "v1", "secrets")
@kopf.on.event("", "v1", "configmaps")
async def referenced_changed(labels: Mapping[str, str], namespace: str | None, name: str, **_: Any) -> None:
    """Our own children by their label; the user's by the references their instances hold."""
    if labels.get("app.kubernetes.io/managed-by") == MANAGED_BY:
        _wakeups.wake((namespace, labels.get("app.kubernetes.io/instance")))
    for instance in _references.get((namespace or "", name), ()):
        _wakeups.wake((namespace, instance))


def _remember_references(namespace: str, name: str, spec: MonocleSpec | None) -> None:
    for holders in _references.values():
        holders.discard(name)
    if spec is None:
        return
    for reference in (spec.secret_ref, spec.config_map_ref):
        if reference is not None:
            _references.setdefault((namespace, reference.name), set()).add(name)


@kopf.daemon(MONOCLE.group, MONOCLE.version, MONOCLE.plural, cancellation_timeout=10.0)
async def run_instance(
    name: str, namespace: str | None, stopped: kopf.DaemonStopped, memo: kopf.Memo, **_: Any
) -> None:
    """Reconcile one instance until it is deleted or the operator stops."""
    assert namespace is not None, "Monocle is namespaced"

    async def remember_and_reconcile(obj: dict[str, Any]) -> float:
        _remember_references(namespace, name, MonocleSpec.model_validate(obj.get("spec") or {}))
        return await reconcile(obj, memo.kube, memo.recorder)

    try:
        await run_object_loop(
            memo.kube,
            MONOCLE,
            name,
            namespace,
            remember_and_reconcile,
            _wakeups,
            stopped,
            logger=_logger,
            gate=memo.gate,
        )
    finally:
        _remember_references(namespace, name, None)
