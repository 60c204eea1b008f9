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
from typing import Any

import kopf

from monocle_operator.api import MONOCLE
from monocle_operator.controller.reconcile import reconcile
from monocle_operator.resources import MANAGED_BY
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

API_GROUP = MONOCLE.group
CONTROLLER_NAME = f"{API_GROUP}/monocle-operator"

_logger = logging.getLogger(__name__)
_wakeups = Wakeups()


def _user_objects(obj: dict[str, Any]) -> list[tuple[str, str]]:
    """The user's own Secret and ConfigMap that an instance's spec names."""
    spec = obj.get("spec") or {}
    named = (("secrets", spec.get("secretRef")), ("configmaps", spec.get("configMapRef")))
    return [(plural, reference["name"]) for plural, reference in named if reference and reference.get("name")]


_references = References(_user_objects)

# Children whose changes wake their instance's loop, found by the labels every child carries.
_CHILD_KINDS = (
    ("", "v1", "services"),
    ("", "v1", "persistentvolumeclaims"),
    ("apps", "v1", "statefulsets"),
    ("apps", "v1", "deployments"),
    ("batch", "v1", "jobs"),
    ("networking.k8s.io", "v1", "ingresses"),
    ("", "v1", "secrets"),
    ("", "v1", "configmaps"),
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
wake_on_references(_wakeups, _references, (("", "v1", "secrets"), ("", "v1", "configmaps")))


@kopf.daemon(MONOCLE.group, MONOCLE.version, MONOCLE.plural, cancellation_timeout=10.0)
async def run_instance(
    name: str, namespace: str | None, stopped: kopf.DaemonStopped, memo: kopf.Memo, **_: Any
) -> None:
    """Reconcile one instance until it is deleted or the operator stops."""
    assert namespace is not None, "Monocle is namespaced"

    async def reconcile_instance(obj: dict[str, Any]) -> float:
        return await reconcile(obj, memo.kube, memo.recorder)

    await run_object_loop(
        memo.kube,
        MONOCLE,
        name,
        namespace,
        reconcile_instance,
        _wakeups,
        stopped,
        logger=_logger,
        gate=memo.gate,
        references=_references,
    )
