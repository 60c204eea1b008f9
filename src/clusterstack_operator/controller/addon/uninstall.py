"""A ClusterAddon's uninstall, as ``helm uninstall`` runs it: its chart's ``pre-delete`` hooks, the
chart's objects deleted from the workload cluster, its ``post-delete`` hooks.

Only a ClusterAddon whose applied chart (a chart without stages) has delete hooks carries the
finalizer (``status.deleteHooks`` names them), and the uninstall runs only where Helm's would: while
its Cluster is still there and its workload cluster answers. That is a ClusterAddon deleted by hand
(the ClusterStack makes it again, and the next apply is an install), or a Cluster deleted with
foreground propagation, which deletes its ClusterAddon first. Otherwise the finalizer lets go at once,
saying so:

- the Cluster is gone (Cluster API removed it, and its workload cluster with it; upstream's operator
  runs no delete hook either);
- the Cluster is paused (``clusterctl move``: its addons live on, moved with it, and must not be
  uninstalled).

A workload cluster that does not answer, a kubeconfig not there or a release not downloaded is waited
for, up to :data:`UNREACHABLE_PATIENCE_SECONDS` from the deletion, then let go with a Warning: a
deletion must not hang on a cluster that is on its way out. A delete hook that fails holds the
deletion, as a failed ``helm uninstall`` keeps the release, until the retry annotation
(``clusterstack.x-k8s.io/retry-helm-hooks``) or a fix; the hook's reason is in HelmChartApplied.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import yaml

from clusterstack_operator.api.reasons import ConditionType, EventReason
from clusterstack_operator.api.v1alpha1 import CLUSTER_ADDON
from clusterstack_operator.controller.addon.reconcile import (
    STEPS_BEFORE_THE_APPLY,
    AddonScope,
    rendered_chart,
)
from clusterstack_operator.controller.charts import delete_applied
from clusterstack_operator.controller.helm_hooks import retry_of, run_uninstall
from clusterstack_operator.helm import HelmError
from clusterstack_operator.releases.decide import is_paused
from operator_core.clock import parse_wire_time, utcnow
from operator_core.steps import Finalizing, Outcome

__all__ = ["FINALIZER", "UNREACHABLE_PATIENCE_SECONDS", "finalize_addon", "needs_uninstall"]

FINALIZER = "clusterstack.x-k8s.io/helm-delete-hooks"
"""On a ClusterAddon whose chart has delete hooks (not upstream's ``clusteraddon.clusterstack.x-k8s.io``,
which is let go of: it holds every ClusterAddon, this one only those with something to run)."""
UNREACHABLE_PATIENCE_SECONDS = 60.0
"""How long an uninstall waits for a workload cluster that does not answer (or a kubeconfig, or the
release's assets) before the ClusterAddon is let go without its delete hooks."""
_LOOK_AGAIN_SECONDS = 5.0


def needs_uninstall(obj: Mapping[str, Any]) -> bool:
    """Whether the ClusterAddon's applied chart has delete hooks to run when it is deleted."""
    return bool((obj.get("status") or {}).get("deleteHooks"))


def _or_not_there(
    step: Callable[[AddonScope], Awaitable[Outcome]],
) -> Callable[[AddonScope], Awaitable[Outcome]]:
    """A step before the apply, as the finalizer runs it: where it stops, the workload cluster is not
    there to uninstall from (:func:`_not_there` says whether to wait or to let go)."""

    async def reached(scope: AddonScope) -> Outcome:
        if await step(scope) is Outcome.CONTINUE:
            return Outcome.CONTINUE
        return await _not_there(scope)

    return reached


async def uninstall(scope: AddonScope) -> Outcome:
    """The addons uninstalled with their delete hooks, as ``helm uninstall`` runs them; said once done."""
    obj, workload = scope.obj, scope.workload
    assert workload is not None  # reach_workload_cluster found it
    try:
        chart = await rendered_chart(scope)
    except (HelmError, yaml.YAMLError) as error:
        return await _let_go(scope, f"its chart cannot be rendered again ({type(error).__name__})")
    deleted: list[str] = []

    async def delete_ordinary() -> bool:
        resources = (obj.get("status") or {}).get("resources") or []
        deleted.extend(await delete_applied(workload, resources))
        return True

    async def save(run: dict[str, Any]) -> None:
        await scope.write_progress(CLUSTER_ADDON, {"ready": False, "helmHooks": run})

    kept = (obj.get("status") or {}).get("helmHooks")
    later = await run_uninstall(workload, scope.book, chart, kept, retry_of(obj), delete_ordinary, save)
    if later is not None:
        return scope.retry_in(later)
    hooks = ", ".join(obj["status"]["deleteHooks"])
    objects = f"; deleted {', '.join(deleted)}" if deleted else ""
    await scope.book.event(
        "Normal",
        EventReason.ADDONS_UNINSTALLED,
        f"uninstalled from the workload cluster with its delete hooks ({hooks}){objects}",
    )
    return Outcome.CONTINUE


FINALIZING = Finalizing(
    AddonScope.of, [*map(_or_not_there, STEPS_BEFORE_THE_APPLY), uninstall], needed=needs_uninstall
)
"""Uninstall the addons with their delete hooks where Helm would; otherwise let go, saying why."""
finalize_addon = FINALIZING.finalize


async def _not_there(scope: AddonScope) -> Outcome:
    """A step before the uninstall stopped: let go at once when the Cluster is gone or paused, else
    wait (saying why) up to :data:`UNREACHABLE_PATIENCE_SECONDS` from the deletion."""
    book = scope.book
    if scope.cluster is None:
        return await _let_go(scope, "its Cluster is gone, and its workload cluster with it", warn=False)
    if is_paused(scope.cluster, scope.obj):
        return await _let_go(scope, "its Cluster is paused (moved elsewhere, its addons with it)", warn=False)
    why = next(
        (
            found.message
            for found in map(book.get, (ConditionType.CLUSTER_READY, ConditionType.DOWNLOADED))
            if found is not None and found.status == "False"
        ),
        "the workload cluster cannot be reached",
    )
    started = parse_wire_time(scope.obj["metadata"].get("deletionTimestamp"))
    waited = (utcnow() - started).total_seconds() if started is not None else 0.0
    if waited >= UNREACHABLE_PATIENCE_SECONDS:
        return await _let_go(scope, f"{why} (waited {waited:.0f} s)")
    await scope.write_progress(CLUSTER_ADDON, {"ready": False})
    return scope.retry_in(_LOOK_AGAIN_SECONDS)


async def _let_go(scope: AddonScope, why: str, *, warn: bool = True) -> Outcome:
    hooks = ", ".join((scope.obj.get("status") or {}).get("deleteHooks") or [])
    await scope.book.event(
        "Warning" if warn else "Normal",
        EventReason.DELETE_HOOKS_NOT_RUN,
        f"the addons' delete hooks ({hooks}) are not run and nothing is deleted from the workload "
        f"cluster: {why}",
    )
    return scope.let_go()
