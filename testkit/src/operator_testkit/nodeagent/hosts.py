"""Per-pod hosts files: the names cluster DNS would answer, built from Services and EndpointSlices.

There is no cluster DNS here. Each container process instead gets a private
``/etc/hosts`` (bind-mounted in its own mount namespace, see :mod:`.processes`)
that lists what CoreDNS would answer for it:

- its own hostname (and FQDN when the pod has a subdomain), as the kubelet writes;
- every Service with a ClusterIP: ``svc.ns``, ``svc.ns.svc``, ``svc.ns.svc.cluster.local``,
  and plain ``svc`` within the pod's own namespace (the search path's job in real DNS);
- every endpoint with a hostname under a Service (a StatefulSet pod under its headless
  Service): ``pod.svc.ns.svc.cluster.local`` and shorter forms, ``pod.svc`` within the namespace.

Endpoints that are not ready are left out, as CoreDNS leaves them out; a Service
with ``publishNotReadyAddresses`` has every endpoint counted as ready, so its pods
are listed from the start. Only loopback addresses are ever written, so nothing
can resolve to an address off this machine.

Why not only the real EndpointSlices: the API server refuses endpoint addresses
in 127.0.0.0/8 ("may not be in the loopback range"), so the EndpointSlice
controller can never publish the agent's pod addresses. :func:`endpoints_from_pods`
therefore computes the same endpoints from Services and Pods, as that controller
would (selector, podIP, readiness, hostname under a matching subdomain); real
EndpointSlices are still read, for any endpoint the API did accept.

:func:`build_hosts` is pure; :func:`write_in_place` rewrites a file without
replacing its inode, which a bind mount needs to see the change.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from operator_core.conditions import reports_true

__all__ = ["CLUSTER_DOMAIN", "build_hosts", "endpoints_from_pods", "write_in_place"]

CLUSTER_DOMAIN = "cluster.local"
Manifest = Mapping[str, Any]

_HEADER = """# Written by the operator-suite node agent: the names cluster DNS would answer for this pod.
127.0.0.1\tlocalhost
::1\tlocalhost ip6-localhost ip6-loopback
"""


def _is_loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


def _names(prefix: str, namespace: str, own_namespace: str) -> list[str]:
    names = [
        f"{prefix}.{namespace}.svc.{CLUSTER_DOMAIN}",
        f"{prefix}.{namespace}.svc",
        f"{prefix}.{namespace}",
    ]
    if namespace == own_namespace:
        names.append(prefix)
    return names


def build_hosts(
    *,
    namespace: str,
    hostname: str,
    subdomain: str | None,
    pod_ip: str,
    services: Iterable[Manifest],
    endpoint_slices: Iterable[Manifest],
) -> str:
    """The hosts file for one pod in ``namespace``; stable output for the same input."""
    lines: list[tuple[str, list[str]]] = []
    own = [f"{hostname}.{subdomain}.{namespace}.svc.{CLUSTER_DOMAIN}"] if subdomain else []
    lines.append((pod_ip, [*own, hostname]))
    seen: set[tuple[str, str]] = set()
    entries: list[tuple[str, list[str]]] = []
    for service in services:
        metadata, spec = service.get("metadata", {}), service.get("spec", {})
        cluster_ip = spec.get("clusterIP")
        if cluster_ip and cluster_ip != "None" and _is_loopback(cluster_ip):
            entries.append((cluster_ip, _names(metadata["name"], metadata["namespace"], namespace)))
    for endpoint_slice in endpoint_slices:
        metadata = endpoint_slice.get("metadata", {})
        service_name = (metadata.get("labels") or {}).get("kubernetes.io/service-name")
        if not service_name:
            continue
        for endpoint in endpoint_slice.get("endpoints") or []:
            if (endpoint.get("conditions") or {}).get("ready") is False or not endpoint.get("hostname"):
                continue
            prefix = f"{endpoint['hostname']}.{service_name}"
            for address in endpoint.get("addresses") or []:
                if _is_loopback(address):
                    entries.append((address, _names(prefix, metadata["namespace"], namespace)))
    for address, names in sorted(entries, key=lambda entry: (entry[1][0], entry[0])):
        if (address, names[0]) not in seen:  # the same endpoint from a real and a computed slice
            seen.add((address, names[0]))
            lines.append((address, names))
    return _HEADER + "".join(f"{address}\t{' '.join(names)}\n" for address, names in lines)


def endpoints_from_pods(services: Iterable[Manifest], pods: Iterable[Manifest]) -> list[dict[str, Any]]:
    """One EndpointSlice-shaped dict per Service with a selector, as the EndpointSlice controller makes it."""
    by_namespace: dict[str, list[Manifest]] = {}
    for pod in pods:
        status = pod.get("status") or {}
        serving = status.get("podIP") and status.get("phase") not in ("Succeeded", "Failed")
        if serving and not pod["metadata"].get("deletionTimestamp"):
            by_namespace.setdefault(pod["metadata"]["namespace"], []).append(pod)
    slices = []
    for service in services:
        metadata, spec = service.get("metadata", {}), service.get("spec", {})
        selector = spec.get("selector") or {}
        if not selector:
            continue
        endpoints = []
        for pod in by_namespace.get(metadata["namespace"], []):
            labels = pod["metadata"].get("labels") or {}
            if any(labels.get(key) != value for key, value in selector.items()):
                continue
            endpoint: dict[str, Any] = {
                "addresses": [pod["status"]["podIP"]],
                "conditions": {"ready": bool(spec.get("publishNotReadyAddresses")) or reports_true(pod)},
            }
            pod_spec = pod.get("spec") or {}
            if pod_spec.get("hostname") and pod_spec.get("subdomain") == metadata["name"]:
                endpoint["hostname"] = pod_spec["hostname"]
            endpoints.append(endpoint)
        slices.append(
            {
                "metadata": {
                    "namespace": metadata["namespace"],
                    "labels": {"kubernetes.io/service-name": metadata["name"]},
                },
                "endpoints": endpoints,
            }
        )
    return slices


def write_in_place(path: Path, text: str) -> bool:
    """Rewrite ``path`` in place (same inode) when its content differs; returns whether it changed."""
    try:
        if path.read_text() == text:
            return False
    except FileNotFoundError:
        pass
    # Opening with "w" truncates the existing inode instead of creating a new one, so every
    # process that has this file bind-mounted over /etc/hosts sees the new content.
    with path.open("w") as handle:
        handle.write(text)
    return True
