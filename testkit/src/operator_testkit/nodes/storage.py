"""The cluster's volumes: Rancher's local-path-provisioner, run as a Deployment as upstream ships it,
with the StorageClasses the samples and tests name (pure: a plan in, manifests out).

Each node keeps its volumes in its own ``storage/`` directory (a PersistentVolume is a hostPath with
affinity to its node, as local-path makes them). The class :data:`SIZE_LIMITED_CLASS` gives each volume
a real size limit: the provisioner's helper pod mounts a tmpfs of the claim's size on it, through a
bidirectional mount on the node's storage directory (a shared mount, made by :mod:`.host`), so ``df``
in the pod shows the limit and a full volume answers ENOSPC. tmpfs costs memory only for what is
written. local-path cannot expand a volume: the size-limited class allows expansion, and the test kit's
resizer (:mod:`.resizer`) grows its tmpfs volumes as a CSI driver's resizer would; the other classes
do not allow it.
"""

from __future__ import annotations

import json
from typing import Any

import yaml

from operator_testkit.nodes.images import BUSYBOX_IMAGE, LOCAL_PATH_IMAGE
from operator_testkit.nodes.plan import NodesPlan

__all__ = ["DEFAULT_CLASS", "SIZE_LIMITED_CLASS", "STORAGE_CLASSES", "storage_manifests"]

NAMESPACE = "local-path-storage"
PROVISIONER = "rancher.io/local-path"
DEFAULT_CLASS = "standard"
SIZE_LIMITED_CLASS = "size-limited"
STORAGE_CLASSES = (DEFAULT_CLASS, "local-path", "gp2", "csi-disk", SIZE_LIMITED_CLASS)
LOST_NODE_TOLERATION_SECONDS = 10
"""How long the provisioner stays on a node the control plane has lost before it is made elsewhere."""
"""The default class, local-path's own, the classes the specification's samples name (AWS's gp2, Open
Telekom Cloud's csi-disk), and the size-limited one."""

SETUP = f"""set -eu
mkdir -m 0777 -p "$VOL_DIR"
case "$VOL_DIR" in
  */{SIZE_LIMITED_CLASS}/*) mount -t tmpfs -o "size=$VOL_SIZE_BYTES,mode=0777" tmpfs "$VOL_DIR" ;;
esac
"""
TEARDOWN = """set -eu
umount "$VOL_DIR" 2>/dev/null || true
rm -rf "$VOL_DIR"
"""


def _config(plan: NodesPlan) -> dict[str, Any]:
    def paths(kind: str) -> list[dict[str, Any]]:
        return [{"node": node.name, "paths": [str(node.directory / "storage" / kind)]} for node in plan.nodes]

    return {
        "storageClassConfigs": {
            name: {"nodePathMap": paths(SIZE_LIMITED_CLASS if name == SIZE_LIMITED_CLASS else "plain")}
            for name in STORAGE_CLASSES
        }
    }


_HELPER_POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "helper-pod"},
    "spec": {
        "priorityClassName": "system-node-critical",
        "containers": [
            {
                "name": "helper-pod",
                "image": BUSYBOX_IMAGE,
                "imagePullPolicy": "Never",
                # Mounting the size-limited tmpfs takes privilege, and its reaching the node takes a
                # bidirectional mount (the provisioner fills in its path).
                "securityContext": {"privileged": True},
                "volumeMounts": [{"name": "data", "mountPath": "", "mountPropagation": "Bidirectional"}],
            }
        ],
    },
}


def storage_manifests(plan: NodesPlan) -> list[dict[str, Any]]:
    labels = {"app": "local-path-provisioner"}
    account = "local-path-provisioner-service-account"
    role_rules = [
        {
            "apiGroups": [""],
            "resources": ["pods"],
            "verbs": ["get", "list", "watch", "create", "patch", "update", "delete"],
        }
    ]
    cluster_rules = [
        {
            "apiGroups": [""],
            "resources": ["nodes", "persistentvolumeclaims", "configmaps", "pods", "pods/log"],
            "verbs": ["get", "list", "watch"],
        },
        {
            "apiGroups": [""],
            "resources": ["persistentvolumes"],
            "verbs": ["get", "list", "watch", "create", "patch", "update", "delete"],
        },
        {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]},
        {"apiGroups": ["storage.k8s.io"], "resources": ["storageclasses"], "verbs": ["get", "list", "watch"]},
    ]
    subject = [{"kind": "ServiceAccount", "name": account, "namespace": NAMESPACE}]
    classes = [
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {
                "name": name,
                "annotations": {
                    "storageclass.kubernetes.io/is-default-class": str(name == DEFAULT_CLASS).lower()
                },
            },
            "provisioner": PROVISIONER,
            "volumeBindingMode": "WaitForFirstConsumer",
            "reclaimPolicy": "Delete",
            # The test kit's resizer grows these (operator_testkit.nodes.resizer); local-path grows none.
            **({"allowVolumeExpansion": True} if name == SIZE_LIMITED_CLASS else {}),
        }
        for name in STORAGE_CLASSES
    ]
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": account, "namespace": NAMESPACE}},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": "local-path-provisioner-role", "namespace": NAMESPACE},
            "rules": role_rules,
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": "local-path-provisioner-role"},
            "rules": cluster_rules,
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "local-path-provisioner-bind", "namespace": NAMESPACE},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Role",
                "name": "local-path-provisioner-role",
            },
            "subjects": subject,
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "local-path-provisioner-bind"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "local-path-provisioner-role",
            },
            "subjects": subject,
        },
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "local-path-config", "namespace": NAMESPACE},
            "data": {
                "config.json": json.dumps(_config(plan), indent=2),
                "setup": SETUP,
                "teardown": TEARDOWN,
                "helperPod.yaml": yaml.safe_dump(_HELPER_POD, sort_keys=False),
            },
        },
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "local-path-provisioner", "namespace": NAMESPACE},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "serviceAccountName": account,
                        "securityContext": {"runAsUser": 65532, "runAsGroup": 65532, "runAsNonRoot": True},
                        # Off a lost node in 10 s, not Kubernetes' 300 s, as a cluster's critical add-ons
                        # are set: a volume for a member replaced elsewhere must not wait for it.
                        "tolerations": [
                            {
                                "key": f"node.kubernetes.io/{taint}",
                                "operator": "Exists",
                                "effect": "NoExecute",
                                "tolerationSeconds": LOST_NODE_TOLERATION_SECONDS,
                            }
                            for taint in ("unreachable", "not-ready")
                        ],
                        "containers": [
                            {
                                "name": "local-path-provisioner",
                                "image": LOCAL_PATH_IMAGE,
                                "imagePullPolicy": "Never",
                                "command": [
                                    "/local-path-provisioner",
                                    "--debug",
                                    "start",
                                    "--config",
                                    "/etc/config/config.json",
                                ],
                                "volumeMounts": [{"name": "config-volume", "mountPath": "/etc/config/"}],
                                "env": [
                                    {
                                        "name": "POD_NAMESPACE",
                                        "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}},
                                    },
                                    {"name": "CONFIG_MOUNT_PATH", "value": "/etc/config/"},
                                ],
                            }
                        ],
                        "volumes": [{"name": "config-volume", "configMap": {"name": "local-path-config"}}],
                    },
                },
            },
        },
        *classes,
    ]
