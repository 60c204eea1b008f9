"""What the Cluster Stack controllers share: the scope of one reconcile and its Ready report, and
rendered objects applied (and deleted again) one by one with a per-object record.

Each controller's reconcile is the suite's one shape (:class:`operator_core.steps.Steps`): its context
is put into a :class:`StackScope` (or a subclass) once, an ordered list of steps takes it from there,
and :func:`ready_report` says Ready before the status is written once at the end.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, TypeVar

from clusterstack_operator.api.reasons import ConditionType, EventReason, Reason
from clusterstack_operator.api.v1alpha1 import CAPI_CONDITIONS
from clusterstack_operator.controller.runtime import StackRuntime
from clusterstack_operator.releases.addons import template_references
from clusterstack_operator.resources import MANAGED_BY
from operator_core import errors
from operator_core.applying import apply_each
from operator_core.children import MANAGED_BY_LABEL
from operator_core.conditions import ConditionShape, summarize_ready
from operator_core.crdgen import CustomResource
from operator_core.kube import Kube
from operator_core.manifests import owned_status_patch
from operator_core.reconciling import Context
from operator_core.steps import ConditionBook, Scope, write_status

__all__ = [
    "StackScope",
    "apply_and_record",
    "delete_applied",
    "ready_report",
    "report_template_failure",
    "resource_entry",
    "values_template_data",
    "write_capi_status",
]


@dataclass(kw_only=True)
class StackScope(Scope):
    """One reconcile of one Cluster Stack object (:class:`operator_core.steps.Scope`), with the operator's
    runtime. Each controller's scope adds its own findings."""

    runtime: StackRuntime

    @staticmethod
    def parts(
        obj: dict[str, Any], context: Context, shape: ConditionShape = CAPI_CONDITIONS
    ) -> dict[str, Any]:
        """The fields every scope starts with: the suite's, in Cluster API's condition shape, and the
        runtime the start hook made."""
        return {**Scope.parts(obj, context, shape), "runtime": context.runtime_of(StackRuntime)}


StackScopeT = TypeVar("StackScopeT", bound=StackScope)


def ready_report(
    required: Callable[[StackScopeT], Sequence[str]],
    *,
    ready_message: str,
    became_ready: StrEnum,
    became_not_ready: StrEnum,
) -> Callable[[StackScopeT, bool], Awaitable[None]]:
    """The report of a Cluster Stack object with a ``status.ready``: Ready summarised from the conditions
    ``required`` names, as the steps left them (an Event when it turns), and ``ready`` from it."""

    async def report(scope: StackScopeT, completed: bool) -> None:
        status, reason, message = summarize_ready(
            scope.book.conditions, required(scope), ready_message=ready_message
        )
        await scope.book.set_ready(
            status, reason, message, became_ready=became_ready, became_not_ready=became_not_ready
        )
        scope.status["ready"] = status == "True"

    return report


async def values_template_data(kube: Kube, cluster: Mapping[str, Any]) -> dict[str, Any]:
    """What a cluster-addon values template reads, as upstream gives it: ``.Cluster``, and the objects
    the Cluster references, as ``.ControlPlane`` and ``.InfraCluster``. A referenced object that does
    not exist (yet), or whose kind is not served, is left out: a template that needs it says so."""
    data: dict[str, Any] = {"Cluster": cluster}
    for key, ref in template_references(cluster).items():
        try:
            api_version = ref.api_version or await kube.preferred_version(ref.api_group or "")
            found = await kube.get(api_version, ref.kind, ref.name, ref.namespace)
        except errors.NotFound:
            found = None
        if found is not None:
            data[key] = found
    return data


async def write_capi_status(
    kube: Kube,
    resource: CustomResource,
    obj: Mapping[str, Any],
    book: ConditionBook,
    fields: Mapping[str, Any],
) -> None:
    """A status write outside the reconcile's end (a finalizer's, a staged release's progress): the
    ``fields`` and the book's conditions, in Cluster API's shape, only what changed, if anything."""
    current = obj.get("status") or {}
    await write_status(
        kube, resource, obj, owned_status_patch(current, {**fields, "conditions": book.wire()})
    )


async def report_template_failure(book: ConditionBook, error: Exception, *, where: str = "") -> None:
    """helm could not render a chart, or rendered something that is not YAML: HelmChartApplied False
    (its message prefixed with ``where`` when given), and one Warning when the failure starts or changes."""
    await book.set(
        ConditionType.HELM_CHART_APPLIED,
        "False",
        Reason.TEMPLATE_FAILED,
        f"{where}: {error}" if where else str(error),
        warn=EventReason.VALIDATE_HELM_CHART_FAILED,
        warn_on_new_message=True,
    )


def resource_entry(manifest: Mapping[str, Any], status: str = "synced") -> dict[str, Any]:
    """The ``status.resources`` entry of a rendered object."""
    group, _, version = manifest["apiVersion"].rpartition("/")
    metadata = manifest["metadata"]
    return {
        "group": group,
        "version": version,
        "kind": manifest["kind"],
        "namespace": metadata.get("namespace") or "",
        "name": metadata["name"],
        "status": status,
    }


async def apply_and_record(
    kube: Kube, objects: list[dict[str, Any]], book: ConditionBook, chart: str, *, watch: bool
) -> tuple[list[dict[str, Any]], bool]:
    """Apply ``objects`` (rendered from ``chart``) one by one (:func:`operator_core.applying.apply_each`),
    so that one refused does not hold up the others; their ``status.resources`` entries, and whether
    any failed. Sets HelmChartApplied (with one Warning when a failure starts or changes). ``watch``:
    ``kube`` has a cache, which is to hold these kinds from now on (an object deleted or changed by
    hand wakes its owner); an object of a kind RBAC does not let the operator watch fails, its entry
    naming the refusal, since a change by hand would go unnoticed."""
    outcomes = await apply_each(kube, objects, watch_labels={MANAGED_BY_LABEL: MANAGED_BY} if watch else None)
    resources: list[dict[str, Any]] = []
    failures: list[str] = []
    for outcome in outcomes:
        entry = resource_entry(outcome.manifest)
        if outcome.problems:
            entry |= {"status": "not-synced", "error": "; ".join(outcome.problems)}
            what = f"{outcome.manifest['kind']} {outcome.manifest['metadata']['name']}"
            failures.append(f"{what}: {'; '.join(outcome.problems)}")
        resources.append(entry)
    if failures:
        await book.set(
            ConditionType.HELM_CHART_APPLIED,
            "False",
            Reason.FAILED_TO_APPLY,
            f"{len(failures)} of {len(objects)} objects not applied: " + "; ".join(failures),
            warn=EventReason.APPLY_FAILED,
            warn_on_new_message=True,
        )
    else:
        await book.set(
            ConditionType.HELM_CHART_APPLIED,
            "True",
            Reason.APPLIED,
            f"{len(objects)} objects of {chart} applied",
        )
    return resources, bool(failures)


async def delete_applied(kube: Kube, resources: list[dict[str, Any]]) -> list[str]:
    """Delete what ``status.resources`` entries name, last applied first; "Kind name" of each deleted.

    An entry never applied (``not-synced``) that RBAC does not let the operator delete is passed over:
    it could not have been made by the operator either. One it did apply is not: the refusal is raised
    (and retried), as nothing it made is left behind unsaid."""
    deleted = []
    for resource in reversed(resources):
        api_version = (
            f"{resource['group']}/{resource['version']}" if resource.get("group") else resource["version"]
        )
        try:
            if await kube.delete(
                api_version, resource["kind"], resource["name"], resource.get("namespace") or None
            ):
                deleted.append(f"{resource['kind']} {resource['name']}")
        except errors.NotFound:
            continue  # its kind is no longer served: nothing of it is left
        except errors.Forbidden:
            if resource.get("status") != "not-synced":
                raise
    return deleted
