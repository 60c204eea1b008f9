"""The Cluster Stack operator, described to the shared core: its ``OPERATOR``, which the runner runs.

Both controllers are wired by the shared controller step (:mod:`operator_core.controller`):

- ClusterStack: woken by its ClusterStackReleases (their status changes), by the ClusterAddons it
  made (one deleted while its Cluster lives is made again), by its provider template, and by any
  Cluster of its namespace (a Cluster that starts or stops using a release, or needs its
  ClusterAddon); with autoSubscribe, also by the source's poll interval.
- ClusterStackRelease: woken by its provider object, by the objects it applied (an object deleted
  or edited by hand is restored at once), and by Clusters (a deletion waiting for one to go).
- ClusterAddon: woken by its Cluster (a class changed), by the Cluster's kubeconfig Secret (written
  at last, or rotated), and by ClusterStackReleases (the one behind a new class becoming ready); it
  looks at the workload cluster every ``addon_check_seconds``. One whose chart has delete hooks has
  a finalizer that uninstalls it with them (:mod:`clusterstack_operator.controller.addon.uninstall`).

With ``OPERATOR_SUITE_WEBHOOK`` on, the operator also serves its admission webhooks
(:mod:`clusterstack_operator.controller.webhooks`) from start to stop.

The informers for the kinds known only at run time (the provider's, the chart's) are made by the
reconciles when they first meet them (:meth:`operator_core.cache.Cache.ensure`).
"""

from __future__ import annotations

from clusterstack_operator.api.v1alpha1 import CLUSTER_ADDON, CLUSTER_STACK, CLUSTER_STACK_RELEASE
from clusterstack_operator.controller.addon.reconcile import addon_references, reconcile_addon
from clusterstack_operator.controller.addon.uninstall import FINALIZER as ADDON_FINALIZER
from clusterstack_operator.controller.addon.uninstall import finalize_addon, needs_uninstall
from clusterstack_operator.controller.clusters import CLUSTER_KINDS, class_namespaces
from clusterstack_operator.controller.release.reconcile import FINALIZER, finalize_release, reconcile_release
from clusterstack_operator.controller.runtime import StackRuntime
from clusterstack_operator.controller.settings import settings_from_environment
from clusterstack_operator.controller.stack.reconcile import provider_template_of, reconcile_stack
from clusterstack_operator.controller.webhooks import serving_webhooks
from clusterstack_operator.resources import CLUSTER_NAME_LABEL, MANAGED_BY
from operator_core.cache import ANY_VALUE, WatchedKind
from operator_core.controller import Operator
from operator_core.reconciling import Context

API_GROUP = "clusterstack.x-k8s.io"


async def _start(context: Context) -> StackRuntime:
    settings = settings_from_environment()
    return StackRuntime.from_settings(settings, context.kube.field_manager)


async def _stop(context: Context) -> None:
    runtime = context.runtime
    if not isinstance(runtime, StackRuntime):
        return  # the start hook failed before it made one: nothing to close
    await runtime.workloads.close()
    await runtime.sources.close()


UPSTREAM_ADDON_FINALIZER = "clusteraddon.clusterstack.x-k8s.io"
"""Upstream's ClusterAddon finalizer (api/v1alpha1/clusteraddon_types.go)."""

OPERATOR = Operator(
    "cluster-stack-operator",
    API_GROUP,
    start=_start,
    stop=_stop,
    # Upstream's on its ClusterAddons, which it lets go once the Cluster is gone: nothing is left to do
    # then (the workload cluster goes with it), and a ClusterAddon taken over must not hang in deletion.
    # Its ClusterStackRelease finalizer is this operator's own (the same name, the same clean-up).
    retired_finalizers=(UPSTREAM_ADDON_FINALIZER,),
    serving=serving_webhooks,
)
OPERATOR.controller(
    CLUSTER_STACK,
    reconcile_stack,
    managed_by=MANAGED_BY,
    child_kinds=(
        (CLUSTER_STACK_RELEASE.api_version, CLUSTER_STACK_RELEASE.kind),
        (CLUSTER_ADDON.api_version, CLUSTER_ADDON.kind),
    ),
    named=provider_template_of,
    wake_all_on=CLUSTER_KINDS,
    namespaces_woken=class_namespaces,  # a tenant's Cluster on the classes of this namespace
)
OPERATOR.controller(
    CLUSTER_STACK_RELEASE,
    reconcile_release,
    managed_by=MANAGED_BY,
    wake_all_on=CLUSTER_KINDS,
    namespaces_woken=class_namespaces,
    finalizer=FINALIZER,
    finalize=finalize_release,
)
OPERATOR.controller(
    CLUSTER_ADDON,
    reconcile_addon,
    managed_by=MANAGED_BY,
    named=addon_references,
    # Only the kubeconfig Secrets Cluster API writes (all labelled with their Cluster), not every Secret.
    named_kinds=(WatchedKind("v1", "Secret", {CLUSTER_NAME_LABEL: ANY_VALUE}),),
    # A Cluster that moves to another class, and the release behind it becoming ready.
    wake_all_on=(*CLUSTER_KINDS, (CLUSTER_STACK_RELEASE.api_version, CLUSTER_STACK_RELEASE.kind)),
    # Only on one whose chart has delete hooks: uninstalled with them while its workload cluster is there.
    finalizer=ADDON_FINALIZER,
    finalize=finalize_addon,
    needs_finalizer=needs_uninstall,
)
