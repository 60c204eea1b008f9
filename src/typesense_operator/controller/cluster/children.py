"""The cluster's children: the PodMonitor and the Gateway API routes where their CRDs are served, then
every child applied at once and what the spec dropped deleted; a changed nodes list (when the spec asks
for it: spec.forceResetPeersConfigOnUpdate) and a changed copy of the certificate (spec.tls) are pushed
to the pods at once."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from operator_core.applying import apply_report_prune
from operator_core.pods import container_status
from operator_core.steps import Outcome
from typesense_operator.api.reasons import ConditionType, EventReason
from typesense_operator.controller.cluster.nodes import pod_addresses
from typesense_operator.controller.cluster.scope import Scope
from typesense_operator.controller.cluster.status import guards_disruptions
from typesense_operator.resources import (
    POD_MONITOR_KIND,
    PRUNABLE_ELSEWHERE,
    Observed,
    build_backend_tls_policy,
    build_http_routes,
    build_pod_monitor,
    build_reference_grants,
    desired_state,
    gateway_children,
    server_configuration_hash,
)
from typesense_operator.resources.core import NODE, WAIT_FOR_ADDRESSES_CONTAINER
from typesense_operator.resources.tls import SERVED_CERTIFICATE_ANNOTATION, served_secret_name, serves_https

__all__ = ["NODES_LIST_ANNOTATION", "apply_children", "plan_pod_monitor", "plan_routes", "pods_to_hurry"]


async def plan_pod_monitor(scope: Scope) -> Outcome:
    """A PodMonitor only where Prometheus Operator's CRD exists; without it, a Warning, not a failure."""
    if build_pod_monitor(scope.cluster) is None:
        await scope.set_condition(ConditionType.METRICS_READY, "True", "NotRequested")
    elif await scope.kube.serves(*POD_MONITOR_KIND):
        scope.served.add(POD_MONITOR_KIND)
    else:
        scope.waiting_for_crd = True
        await scope.set_condition(
            ConditionType.METRICS_READY,
            "False",
            "PodMonitorCRDMissing",
            "spec.metrics is set but the PodMonitor CRD (monitoring.coreos.com/v1) is not installed; "
            "the exporter sidecar runs, but nothing tells Prometheus to scrape it",
            warn=EventReason.POD_MONITOR_UNAVAILABLE,
        )
    return Outcome.CONTINUE


async def plan_routes(scope: Scope) -> Outcome:
    """Gateway API HTTPRoutes (and ReferenceGrants, and with TLS on the nodes a BackendTLSPolicy) only
    where their CRDs exist (:func:`~typesense_operator.resources.routes.gateway_children` decides which);
    without them, a Warning and the rest of the cluster as usual."""
    cluster = scope.cluster
    routes, grants = build_http_routes(cluster), build_reference_grants(cluster)
    policy = build_backend_tls_policy(cluster, scope.nodes_tls)
    for manifests in (routes, grants, [policy] if policy is not None else []):
        if manifests and await scope.kube.serves(manifests[0]["apiVersion"], manifests[0]["kind"]):
            scope.served.add((manifests[0]["apiVersion"], manifests[0]["kind"]))
    missing = gateway_children(cluster, scope.nodes_tls, scope.served)[1]
    if not routes:
        await scope.set_condition(ConditionType.ROUTES_READY, "True", "NotRequested")
    elif missing:
        scope.waiting_for_crd = True
        await scope.set_condition(
            ConditionType.ROUTES_READY,
            "False",
            "GatewayAPIMissing",
            f"spec.httpRoutes is set but the Gateway API CRDs of {' and '.join(missing)} are not installed; "
            "the cluster is served through its Services only until they are",
            warn=EventReason.ROUTES_UNAVAILABLE,
        )
    else:
        names = ", ".join(m["metadata"]["name"] for m in routes)
        granted = ", ".join(f"{m['metadata']['namespace']}/{m['metadata']['name']}" for m in grants)
        scope.routes_applied = f"HTTPRoute {names}" + (f"; ReferenceGrant {granted}" if grants else "")
        if policy is not None:
            scope.routes_applied += f"; BackendTLSPolicy {policy['metadata']['name']} (HTTPS to the nodes)"
    return Outcome.CONTINUE


async def apply_children(scope: Scope) -> Outcome:
    """Every child, as :func:`~typesense_operator.resources.desired_state` makes them from the spec and
    what the steps before observed, applied at once; what the spec dropped, deleted."""
    cluster = scope.cluster
    if scope.certificate_only:
        # A new cluster that waits for its certificate (the TLS step stopped the reconcile there): its
        # Certificate, when cert-manager issues it; nothing, when the user's Secret is awaited.
        waiting = desired_state(cluster, Observed(served=frozenset(scope.served), certificate_only=True))
        if waiting.children:
            await apply_report_prune(scope.kube, scope.book, cluster, waiting.children, waiting.prunable)
        return Outcome.STOP
    configuration = cluster.spec.additional_server_configuration
    configuration_hash = None
    if configuration is not None:
        # Watched: an edit of it alone wakes the cluster, and its new hash rolls the pods.
        config_map = await scope.kube.get("v1", "ConfigMap", configuration.name, cluster.namespace)
        configuration_hash = server_configuration_hash(config_map)
    # Ours only (labelled): one someone else made under its name is no evidence that this cluster served.
    budget = await scope.kube.get(
        "policy/v1", "PodDisruptionBudget", cluster.pdb_name, cluster.namespace, labelled_only=True
    )
    every_pod = await scope.kube.list("v1", "Pod", cluster.namespace, labels=cluster.labels(NODE))
    desired = desired_state(
        cluster,
        Observed(
            members=scope.members,
            claim_size=scope.claim_size,
            configuration_hash=configuration_hash,
            tls=scope.nodes_tls,
            certificate_copy=scope.certificate_copy,
            disruption_budget=guards_disruptions(
                (scope.obj.get("status") or {}).get("phase"),
                ready_nodes=sum(1 for target, _, _ in scope.nodes if target.kubelet_ready),
                budget_exists=budget is not None,
            ),
            addresses=pod_addresses(every_pod, cluster.statefulset_name),
            served=frozenset(scope.served),
            generated_key=scope.generated_key,
        ),
    )
    # Every pod that runs: a node not in the nodes list yet (growing back, scaling up) reads it too.
    pods = [pod for pod in every_pod if not pod["metadata"].get("deletionTimestamp")]
    # Pods whose typesense-server waits for the list to name every member by address: always hurried,
    # or a kubelet may copy the list only at its next sync, and every member waits out the whole
    # WAIT_FOR_ADDRESSES_SECONDS (seen in the soak: all pods deleted, 34 s to the first proof of the
    # deadlock, where a quick copy made it 8 s).
    hurried = pods_to_hurry(pods, every_pod=cluster.spec.force_reset_peers_config_on_update)
    nodes_list_before = None
    if hurried:
        nodes_list_before = await scope.kube.get(
            "v1", "ConfigMap", cluster.nodes_configmap_name, cluster.namespace
        )
    await apply_report_prune(
        scope.kube,
        scope.book,
        scope.cluster,
        desired.children,
        desired.prunable,
        prunable_elsewhere=PRUNABLE_ELSEWHERE,
        create_once=desired.create_once,
    )
    if nodes_list_before is not None:
        await _hurry_the_nodes_list(scope, nodes_list_before, desired.children, hurried)
    await _hurry_the_certificate(scope, pods, desired.children)
    await _drop_the_unserved_copy(scope, every_pod)
    if any(m["kind"] == "PodMonitor" for m in desired.children):
        await scope.set_condition(ConditionType.METRICS_READY, "True", "PodMonitorApplied")
    if scope.routes_applied is not None:
        await scope.set_condition(ConditionType.ROUTES_READY, "True", "Applied", scope.routes_applied)
    return Outcome.CONTINUE


async def _drop_the_unserved_copy(scope: Scope, pods: list[dict[str, Any]]) -> None:
    """TLS turned off and rolled away: no copy of a private key is kept that nothing mounts. (Secrets are
    not pruned: a generated key's must never go.)"""
    cluster = scope.cluster
    if cluster.spec.tls is None and scope.served_before is not None and not any(map(serves_https, pods)):
        await scope.kube.delete("v1", "Secret", served_secret_name(cluster.name), cluster.namespace)


NODES_LIST_ANNOTATION = "ts.opentelekomcloud.com/nodes-list-hash"
"""Pod annotation set when the nodes list changes, on every pod with spec.forceResetPeersConfigOnUpdate
and on pods still waiting for it to name every member by address otherwise: a change of the pod makes
its kubelet refresh the mounted nodes file at once, not at its next periodic sync (up to a minute or
more), so that Typesense reads the new raft configuration within its own 10 s, or starts at once."""


def pods_to_hurry(pods: list[dict[str, Any]], *, every_pod: bool) -> list[dict[str, Any]]:
    """The pods nudged when the nodes list changes: all of them with spec.forceResetPeersConfigOnUpdate,
    else those whose wait-for-addresses init container runs (typesense-server has not started, and
    waits for the list to name every member by address)."""
    if every_pod:
        return list(pods)
    return [
        pod
        for pod in pods
        if "running" in (container_status(pod, WAIT_FOR_ADDRESSES_CONTAINER, init=True).get("state") or {})
    ]


async def _hurry_the_nodes_list(
    scope: Scope, before: dict[str, Any], desired: list[dict[str, Any]], pods: list[dict[str, Any]]
) -> None:
    cluster = scope.cluster
    (nodes_list,) = (
        m
        for m in desired
        if m["kind"] == "ConfigMap" and m["metadata"]["name"] == cluster.nodes_configmap_name
    )
    if (before.get("data") or {}) == nodes_list["data"]:
        return
    await _nudge(scope, pods, NODES_LIST_ANNOTATION, _digest(nodes_list["data"]))


async def _hurry_the_certificate(
    scope: Scope, pods: list[dict[str, Any]], desired: list[dict[str, Any]]
) -> None:
    """When the nodes' copy of the certificate changed (spec.tls), the pods that serve HTTPS nudged, so
    that their kubelet writes the new files now and Typesense reads them within its refresh interval
    (a kubelet otherwise updates a mounted Secret at its next periodic sync, a minute or more)."""
    name = served_secret_name(scope.cluster.name)
    copy = next((m for m in desired if m["kind"] == "Secret" and m["metadata"]["name"] == name), None)
    before = scope.served_before
    if copy is None or before is None or (before.get("data") or {}) == copy["data"]:
        return
    await _nudge(
        scope, [p for p in pods if serves_https(p)], SERVED_CERTIFICATE_ANNOTATION, _digest(copy["data"])
    )


def _digest(data: Any) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


async def _nudge(scope: Scope, pods: list[dict[str, Any]], annotation: str, digest: str) -> None:
    """``annotation`` set to ``digest`` on each of ``pods`` that does not hold it yet: a change of the pod
    makes its kubelet refresh its mounted ConfigMaps and Secrets at once."""
    for pod in pods:
        if (pod["metadata"].get("annotations") or {}).get(annotation) != digest:
            patch = {"metadata": {"annotations": {annotation: digest}}}
            await scope.kube.patch("v1", "Pod", pod["metadata"]["name"], scope.cluster.namespace, patch)
