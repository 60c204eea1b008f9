"""The view of one TypesenseCluster that every builder takes: identity, spec, and derived names.

Builders never see a raw dict; they see a :class:`Cluster`, so a name or a
label is computed in exactly one place.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from typesense_operator.api import TYPESENSE_CLUSTER, TypesenseClusterSpec

__all__ = ["API_KEY_DATA_KEY", "MANAGED_BY", "Cluster", "Manifest"]

Manifest = dict[str, Any]
API_KEY_DATA_KEY = "typesense-api-key"
MANAGED_BY = "typesense-operator"
DATA_DIR = "/usr/share/typesense/data"
NODELIST_DIR = "/usr/share/typesense/nodelist"
NODELIST_KEY = "nodes"


@dataclass(frozen=True)
class Cluster:
    """One TypesenseCluster: where it lives, its uid for owner references, and its validated spec."""

    name: str
    namespace: str
    uid: str
    spec: TypesenseClusterSpec

    @classmethod
    def from_object(cls, obj: dict[str, Any]) -> Cluster:
        metadata = obj["metadata"]
        return cls(
            name=metadata["name"],
            namespace=metadata["namespace"],
            uid=metadata.get("uid", ""),
            spec=TypesenseClusterSpec.model_validate(obj.get("spec") or {}),
        )

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

    # -- labels and ownership

    def labels(self, component: str) -> dict[str, str]:
        return {**self.selector(component), "app.kubernetes.io/managed-by": MANAGED_BY}

    def selector(self, component: str) -> dict[str, str]:
        return {
            "app.kubernetes.io/name": "typesense",
            "app.kubernetes.io/instance": self.name,
            "app.kubernetes.io/component": component,
        }

    def instance_selector(self) -> dict[str, str]:
        """Every child of this cluster, whatever its component."""
        return {"app.kubernetes.io/instance": self.name, "app.kubernetes.io/managed-by": MANAGED_BY}

    def owner_reference(self) -> dict[str, Any]:
        return {
            "apiVersion": TYPESENSE_CLUSTER.api_version,
            "kind": TYPESENSE_CLUSTER.kind,
            "name": self.name,
            "uid": self.uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }

    def metadata(self, name: str, component: str, **extra: Any) -> dict[str, Any]:
        """Metadata of a child: namespace, labels and the owner reference that makes GC remove it."""
        return {
            "name": name,
            "namespace": self.namespace,
            "labels": self.labels(component),
            "ownerReferences": [self.owner_reference()],
            **extra,
        }
