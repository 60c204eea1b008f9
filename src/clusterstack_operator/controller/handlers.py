"""kopf handlers of the Cluster Stack operator; importing this module registers them.

Both controllers are wired by the shared controller step (:mod:`operator_core.controller`):

- ClusterStack: woken by its ClusterStackReleases (their status changes), by the ClusterAddons it
  made (one deleted while its Cluster lives is made again), by its provider template, and by any
  Cluster of its namespace (a Cluster that starts or stops using a release, or needs its
  ClusterAddon); with autoSubscribe, also by the source's poll interval.
- ClusterStackRelease: woken by its provider object, by the objects it applied (an object deleted
  or edited by hand is restored at once), and by Clusters (a deletion waiting for one to go).

The informers for the kinds known only at run time (the provider's, the chart's) are made by the
reconciles when they first meet them (:meth:`operator_core.cache.Cache.ensure`).
"""

from __future__ import annotations

from clusterstack_operator.api.v1alpha1 import CLUSTER_ADDON, CLUSTER_STACK, CLUSTER_STACK_RELEASE
from clusterstack_operator.controller.common import CLUSTER_KINDS
from clusterstack_operator.controller.releases import FINALIZER, finalize_release, reconcile_release
from clusterstack_operator.controller.runtime import RUNTIME, StackRuntime
from clusterstack_operator.controller.settings import settings_from_environment
from clusterstack_operator.controller.stacks import provider_template_of, reconcile_stack
from clusterstack_operator.resources import MANAGED_BY
from operator_core.controller import Context, Operator

API_GROUP = "clusterstack.x-k8s.io"


async def _start(context: Context) -> None:
    context.extras[RUNTIME] = StackRuntime.from_settings(settings_from_environment())


async def _stop(context: Context) -> None:
    runtime = context.extras.get(RUNTIME)
    close = getattr(getattr(runtime, "source", None), "aclose", None)
    if close is not None:
        await close()


OPERATOR = Operator("cluster-stack-operator", API_GROUP, start=_start, stop=_stop)
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
)
OPERATOR.controller(
    CLUSTER_STACK_RELEASE,
    reconcile_release,
    managed_by=MANAGED_BY,
    wake_all_on=CLUSTER_KINDS,
    finalizer=FINALIZER,
    finalize=finalize_release,
)
