"""Clients of workload clusters, made from the kubeconfig Secrets that Cluster API writes.

Cluster API writes ``<cluster>-kubeconfig`` (its kubeconfig under the key ``value``, labelled
``cluster.x-k8s.io/cluster-name``) once the workload control plane has its certificates. A
client is made from it once and kept while the Secret's resourceVersion stays the same: a rotated
kubeconfig makes a new one, and the old one is closed. The kubeconfig is vetted first
(:func:`operator_core.kube.vet_kubeconfig`): whoever can write that Secret must not make this
process run a command or read its files.

Who calls it: the ClusterAddon controller (:mod:`clusterstack_operator.controller.addon.reconcile`).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from typing import Any

import yaml

from operator_core import errors
from operator_core.kube import ApiOutages, Kube, vet_kubeconfig

__all__ = ["KUBECONFIG_KEY", "WorkloadClients", "kubeconfig_of", "kubeconfig_secret_name"]

KUBECONFIG_KEY = "value"
WORKLOAD_TIMEOUT_SECONDS = 5.0
"""How long a call to a workload cluster may take: one that does not answer is reported, not waited on."""


def kubeconfig_secret_name(cluster: str) -> str:
    return f"{cluster}-kubeconfig"


def kubeconfig_of(secret: Mapping[str, Any]) -> Mapping[str, Any]:
    """The vetted kubeconfig a Secret holds; :class:`~operator_core.errors.InvalidKubeconfig` otherwise
    (never with the Secret's content in the message)."""
    name = (secret.get("metadata") or {}).get("name")
    encoded = (secret.get("data") or {}).get(KUBECONFIG_KEY)
    if not encoded:
        raise errors.InvalidKubeconfig(f"Secret {name} has no key {KUBECONFIG_KEY!r}")
    try:
        document = yaml.safe_load(base64.b64decode(encoded, validate=True))
    except (binascii.Error, ValueError, yaml.YAMLError):
        raise errors.InvalidKubeconfig(
            f"Secret {name}: {KUBECONFIG_KEY!r} is not a base64 YAML kubeconfig"
        ) from None
    try:
        return vet_kubeconfig(document)
    except errors.InvalidKubeconfig as error:
        raise errors.InvalidKubeconfig(f"Secret {name}: {error}") from None


class WorkloadClients:
    """One client per workload cluster, (namespace, Cluster name), remade when its Secret changes."""

    def __init__(self, field_manager: str) -> None:
        self.field_manager = field_manager
        self._clients: dict[tuple[str, str], tuple[str, Kube]] = {}
        self._outages = ApiOutages()
        """One memory of outages for every client made here: a client remade during its workload
        cluster's outage still knows that the API server answered before."""

    async def client(self, namespace: str, cluster: str, secret: Mapping[str, Any]) -> Kube:
        version = str((secret.get("metadata") or {}).get("resourceVersion", ""))
        key = (namespace, cluster)
        held = self._clients.get(key)
        if held is not None and held[0] == version:
            return held[1]
        document = kubeconfig_of(secret)
        await self.forget(namespace, cluster)
        client = Kube.from_kubeconfig(
            document,
            field_manager=self.field_manager,
            timeout=WORKLOAD_TIMEOUT_SECONDS,
            outages=self._outages,
        )
        self._clients[key] = (version, client)
        return client

    async def forget(self, namespace: str, cluster: str) -> None:
        held = self._clients.pop((namespace, cluster), None)
        if held is not None:
            await held[1].close()

    async def close(self) -> None:
        for namespace, cluster in list(self._clients):
            await self.forget(namespace, cluster)
