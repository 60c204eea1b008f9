"""The Typesense operator, described to the shared core: its ``OPERATOR``, which the runner runs.

Everything is wired by the shared controller step (:mod:`operator_core.controller`):
each TypesenseCluster gets one loop that reads the cluster, runs
:data:`~typesense_operator.controller.cluster.reconcile.STEPS` over it, and sleeps until
something changes (the cluster, one of its children, or the admin key Secret
its spec names) or the next look the quorum decision or the resync interval
asks for. A child deleted or edited by hand is restored within moments, and
two reconciles of one cluster never run at once. What is Typesense's own is
here: the children's kinds, the Secret the spec names, and the runtime its start hook makes
(:class:`~typesense_operator.controller.runtime.TypesenseRuntime`: the node probes' addressing, the
commit memory, the one-backup-at-a-time guard).
"""

from __future__ import annotations

from typing import Any

from operator_core.cache import WatchedKind
from operator_core.controller import Operator
from operator_core.reconciling import Context
from operator_core.settings import from_env
from typesense_operator.api import TYPESENSE_BACKUP, TYPESENSE_CLUSTER, TYPESENSE_SCHEDULED_BACKUP
from typesense_operator.api.content import TYPESENSE_API_KEY
from typesense_operator.controller.backup.reconcile import (
    DATA_FINALIZER,
    finalize_backup,
    reconcile_backup,
    removes_data,
)
from typesense_operator.controller.cluster.reconcile import (
    REFERENCE_GRANTS_FINALIZER,
    finalize,
    needs_finalizer,
    reconcile,
)
from typesense_operator.controller.content import reconcile as content
from typesense_operator.controller.content import scope as content_scope
from typesense_operator.controller.content.apikeys import finalize_api_key, named_secrets, reconcile_api_key
from typesense_operator.controller.metrics import forget_cluster
from typesense_operator.controller.runtime import TypesenseRuntime
from typesense_operator.controller.schedule.reconcile import named_cluster, reconcile_schedule
from typesense_operator.controller.settings import TypesenseSettings
from typesense_operator.quorum.hosts import HOST_FIELDS
from typesense_operator.resources import (
    BACKENDTLSPOLICY_API_VERSION,
    HTTPROUTE_API_VERSION,
    POD_MONITOR_KIND,
    REFERENCEGRANT_API_VERSION,
)
from typesense_operator.resources.model import MANAGED_BY
from typesense_operator.resources.tls import CERTIFICATE_KIND, issued_secret_name, served_secret_name

# Children (found by the labels every child carries), held in the watch caches: a change to one wakes its
# cluster's loop.
_CHILD_KINDS = (
    ("v1", "ConfigMap"),
    ("v1", "Service"),
    ("apps/v1", "StatefulSet"),
    ("apps/v1", "Deployment"),
    ("policy/v1", "PodDisruptionBudget"),
    ("networking.k8s.io/v1", "Ingress"),
    ("batch/v1", "CronJob"),
    # The restore Job of spec.bootstrap.fromBackup: its end moves the restore on.
    ("batch/v1", "Job"),
    POD_MONITOR_KIND,
    (HTTPROUTE_API_VERSION, "HTTPRoute"),
    (BACKENDTLSPOLICY_API_VERSION, "BackendTLSPolicy"),
    # In the Gateways' namespaces: their owner-namespace label says which cluster they wake.
    (REFERENCEGRANT_API_VERSION, "ReferenceGrant"),
    # spec.tls.issuerRef: the operator's Certificate (where cert-manager is installed).
    CERTIFICATE_KIND,
)


def _named_by_spec(obj: dict[str, Any]) -> list[tuple[str, str]]:
    """What the spec names and the pods read: the user's admin key Secret (spec.adminApiKey), the
    additionalServerConfiguration ConfigMap, the certificate's Secret (spec.tls: the user's, or the one
    cert-manager issues) and the nodes' checked copy of it. Created late or changed, each wakes the
    cluster."""
    spec = obj.get("spec") or {}
    name = obj["metadata"]["name"]
    key = (spec.get("adminApiKey") or {}).get("name")
    configuration = (spec.get("additionalServerConfiguration") or {}).get("name")
    tls = spec.get("tls") or {}
    certificate = (tls.get("certificateSecret") or {}).get("name") or (
        issued_secret_name(name) if tls.get("issuerRef") else None
    )
    return [
        *([("Secret", key)] if key else []),
        *([("ConfigMap", configuration)] if configuration else []),
        *([("Secret", certificate), ("Secret", served_secret_name(name))] if certificate else []),
    ]


async def _start(context: Context) -> TypesenseRuntime:
    return TypesenseRuntime.of(from_env(TypesenseSettings), context.kube)


async def _stop(context: Context) -> None:
    if isinstance(context.runtime, TypesenseRuntime):  # not when the start hook failed
        await context.runtime.close()


def _forget(context: Context, namespace: str, name: str) -> None:
    """What the operator keeps in memory of a cluster that is gone: its metrics, its furthest commit and
    its nodes' silences."""
    forget_cluster(namespace, name)
    runtime = context.runtime_of(TypesenseRuntime)
    runtime.commits.forget(namespace, name)
    runtime.silences.forget(namespace, name)


OPERATOR = Operator("typesense-operator", TYPESENSE_CLUSTER.group, start=_start, stop=_stop)
OPERATOR.controller(
    TYPESENSE_CLUSTER,
    reconcile,
    managed_by=MANAGED_BY,
    child_kinds=_CHILD_KINDS,
    # The pods carry the labels of the StatefulSet's template: a cluster waiting for its pods is woken
    # by their changes, not by a timer. Only their names, labels and status are read.
    observed_kinds=(("v1", "Pod"),),
    # The Kubernetes nodes the members run on, said in the status when one is lost; a node that goes
    # dark changes its pods (the node controller marks them not ready), which wake the cluster.
    read_kinds=(WatchedKind("v1", "Node", kept_fields=HOST_FIELDS),),
    named=_named_by_spec,
    # Every Secret and ConfigMap, not only ours: those the spec names carry none of our labels.
    named_kinds=(("v1", "Secret"), ("v1", "ConfigMap")),
    # Only a cluster with a ReferenceGrant in another namespace holds it: no owner reference reaches there.
    finalizer=REFERENCE_GRANTS_FINALIZER,
    finalize=finalize,
    needs_finalizer=needs_finalizer,
    on_gone=_forget,
)


# Each TypesenseBackup: its Jobs (labelled as its children) wake it when they end.
OPERATOR.controller(
    TYPESENSE_BACKUP,
    reconcile_backup,
    managed_by=MANAGED_BY,
    child_kinds=(("batch/v1", "Job"),),
    finalizer=DATA_FINALIZER,
    finalize=finalize_backup,
    needs_finalizer=removes_data,
)


# Each TypesenseScheduledBackup: the backups it makes (labelled as its children) wake it as they change
# (one that ends may let the next start, or be pruned), and so does the cluster it names (created at
# last, or QuorumReady for an immediate backup); its next scheduled time is the return of its reconcile.
OPERATOR.controller(
    TYPESENSE_SCHEDULED_BACKUP,
    reconcile_schedule,
    managed_by=MANAGED_BY,
    child_kinds=((TYPESENSE_BACKUP.api_version, TYPESENSE_BACKUP.kind),),
    named=named_cluster,
    named_kinds=((TYPESENSE_CLUSTER.api_version, TYPESENSE_CLUSTER.kind),),
)


# Each collection, alias, synonym and override: the cluster it names wakes it (QuorumReady at last, or
# made again); its own next look is the drift check (content_check_seconds), which asks Typesense only.
for _kind in content.CONTENT_KINDS:
    OPERATOR.controller(
        _kind.resource,
        content.reconciler(_kind),
        managed_by=MANAGED_BY,
        named=content_scope.named_cluster,
        named_kinds=((TYPESENSE_CLUSTER.api_version, TYPESENSE_CLUSTER.kind),),
        finalizer=content_scope.FINALIZER,
        finalize=content.finalizer(_kind),
        needs_finalizer=content_scope.removes_content,
    )


# Each API key: its Secret (labelled as its child) and the Secret its value comes from (valueFrom)
# wake it, and so does its cluster; the finalizer deletes the key from Typesense (deletionPolicy Delete).
OPERATOR.controller(
    TYPESENSE_API_KEY,
    reconcile_api_key,
    managed_by=MANAGED_BY,
    child_kinds=(("v1", "Secret"),),
    named=named_secrets,
    named_kinds=((TYPESENSE_CLUSTER.api_version, TYPESENSE_CLUSTER.kind), ("v1", "Secret")),
    finalizer=content_scope.FINALIZER,
    finalize=finalize_api_key,
    needs_finalizer=content_scope.removes_content,
)
