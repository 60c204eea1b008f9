"""The view of one TypesenseCluster that every builder takes: identity, spec, and derived names.

Builders never see a raw dict; they see a :class:`Cluster`, so a name or a
label is computed in exactly one place: labels, selectors, the owner reference
and child metadata come from :class:`operator_core.children.Owner`.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

from operator_core.children import Manifest, Owner
from typesense_operator.api import TYPESENSE_CLUSTER, TypesenseClusterSpec

__all__ = ["API_KEY_DATA_KEY", "MANAGED_BY", "Cluster", "Manifest", "secret_bytes"]

API_KEY_DATA_KEY = "typesense-api-key"
MANAGED_BY = "typesense-operator"
DATA_DIR = "/usr/share/typesense/data"
NODELIST_DIR = "/usr/share/typesense/nodelist"
NODELIST_KEY = "nodes"


def secret_bytes(secret: Mapping[str, Any] | None, data_key: str) -> bytes | None:
    """The bytes under ``data_key`` of a Secret (the API server keeps its data base64); None when the
    Secret or the key is absent, or the value empty."""
    encoded = ((secret or {}).get("data") or {}).get(data_key)
    return base64.b64decode(encoded) if encoded else None


class Cluster(Owner[TypesenseClusterSpec]):
    """One TypesenseCluster: where it lives, its uid for owner references, and its validated spec."""

    resource = TYPESENSE_CLUSTER
    app = "typesense"
    managed_by = MANAGED_BY

    # -- names (the Go operator's, so that existing clusters keep their objects)

    @property
    def statefulset_name(self) -> str:
        return f"{self.name}-sts"

    @property
    def headless_service_name(self) -> str:
        return f"{self.name}-sts-svc"

    @property
    def client_service_name(self) -> str:
        return f"{self.name}-svc"

    @property
    def nodes_configmap_name(self) -> str:
        return f"{self.name}-nodeslist"

    @property
    def generated_secret_name(self) -> str:
        return f"{self.name}-admin-key"

    @property
    def admin_key_secret_name(self) -> str:
        """The Secret the pods read the key from: the user's, or the generated one."""
        reference = self.spec.admin_api_key
        return reference.name if reference else self.generated_secret_name

    @property
    def pdb_name(self) -> str:
        return f"{self.name}-pdb"

    def pulling(self, pod_spec: dict[str, Any]) -> dict[str, Any]:
        """``pod_spec`` with the spec's imagePullSecrets (every pod of the cluster gets them)."""
        if self.spec.image_pull_secrets:
            pod_spec["imagePullSecrets"] = [{"name": secret.name} for secret in self.spec.image_pull_secrets]
        return pod_spec

    @property
    def proxy_name(self) -> str:
        return f"{self.name}-reverse-proxy"

    def pod_name(self, index: int) -> str:
        return f"{self.statefulset_name}-{index}"

    def scraper_name(self, scraper: str) -> str:
        return f"{self.name}-scraper-{scraper}"

    def pod_endpoint(self, index: int) -> str:
        """The raft endpoint of pod ``index``: host:peeringPort:apiPort."""
        host = f"{self.pod_name(index)}.{self.headless_service_name}"
        return f"{host}:{self.spec.peering_port}:{self.spec.api_port}"
