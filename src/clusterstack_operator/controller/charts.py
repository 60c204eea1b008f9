"""Rendered charts applied (and deleted again) one by one, each object's outcome recorded in the owner's
``status.resources``; what helm could not render said once; and what a cluster-addon values template
reads. Who uses it: the ClusterStackRelease, ClusterAddon and staged-addon controllers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from clusterstack_operator.api.reasons import ConditionType, EventReason, Reason
from clusterstack_operator.releases.addons import template_references
from clusterstack_operator.resources import MANAGED_BY
from operator_core import errors
from operator_core.applying import apply_each
from operator_core.children import MANAGED_BY_LABEL
from operator_core.kube import Kube
from operator_core.steps import ConditionBook

__all__ = [
    "apply_and_record",
    "delete_applied",
    "report_template_failure",
    "resource_entry",
    "values_template_data",
]


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


def applied_message(count: int, chart: str, *, hooks_ran: bool) -> str:
    """HelmChartApplied's message once a chart is applied: one text for one state, whether the look
    that writes it ran the hooks or found them run by an earlier one (a message that changed on a look
    that found nothing new would be a write for nothing, and would read as news)."""
    return f"{count} objects of {chart} applied" + ("; its hooks ran" if hooks_ran else "")


async def apply_and_record(
    kube: Kube,
    objects: list[dict[str, Any]],
    book: ConditionBook,
    chart: str,
    *,
    watch: bool,
    hooks_ran: bool = False,
) -> tuple[list[dict[str, Any]], bool]:
    """Apply ``objects`` (rendered from ``chart``) one by one (:func:`operator_core.applying.apply_each`),
    so that one refused does not hold up the others; their ``status.resources`` entries, and whether
    any failed. Sets HelmChartApplied (with one Warning when a failure starts or changes; ``hooks_ran``:
    the chart's hooks for what is applied ran, on this look or an earlier one). ``watch``:
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
            applied_message(len(objects), chart, hooks_ran=hooks_ran),
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
