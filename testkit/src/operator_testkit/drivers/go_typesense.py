"""A Typesense cluster exactly as the Go typesense-operator 0.4.1 leaves it, for hand-over tests where
its binary cannot be built (its module is not served here).

Every object is shaped after the Go source at tag ``typesense-operator-0.4.1`` (commit 2cbfce3 of
akyriako/typesense-operator); ``internal/controller/`` files are cited as ``file:line``. The facts
are collected in docs/research/go-operator-0.4.1-objects.md. :func:`play_go_operator` then does what
that operator does once the pods run: it writes the pods' IPs into the nodes list
(``typesensecluster_configmap.go:290-317``) and sets each pod's ``RaftQuorumReady`` condition
(``typesensecluster_quorum.go:358-393``), which its pods' readiness gate waits for.
"""

from __future__ import annotations

import base64
import os
import secrets
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from operator_core.kube import Kube
from operator_testkit.controlplane import ControlPlane
from operator_testkit.drivers.typesense import TypesenseCluster
from operator_testkit.fixtures import wait_until
from operator_testkit.operators import OperatorProcess, account_kubeconfig

__all__ = [
    "GO_OPERATOR_USER",
    "GO_SELECTOR_LABEL",
    "QUORUM_READY_GATE",
    "go_made_children",
    "go_operator_process",
    "handed_over",
    "play_go_operator",
]

Manifest = dict[str, Any]

GO_SELECTOR_LABEL = "app"
"""The only label the Go operator selects its nodes by, ``app={name}-sts`` (``utils.go:98-102``)."""
QUORUM_READY_GATE = "RaftQuorumReady"
"""The pods' readiness gate, a condition only the Go operator sets (``typesensecluster_quorum.go:18``)."""
EXPORTER_IMAGE = "quay.io/akyriako/typesense-prometheus-exporter:0.1.9"
HEALTHCHECK_IMAGE = "quay.io/akyriako/typesense-healthcheck:0.2.0"


def _meta(cluster: Manifest, name: str, annotations: Mapping[str, str] | None = None) -> Manifest:
    """``getObjectMeta`` (``utils.go:104-115``): default labels plus ``app``, and a controller owner
    reference to the TypesenseCluster (``ctrl.SetControllerReference``)."""
    cluster_name = cluster["metadata"]["name"]
    meta: Manifest = {
        "name": name,
        "namespace": cluster["metadata"]["namespace"],
        "labels": {
            "app.kubernetes.io/managed-by": "typesense-operator",
            "app.kubernetes.io/name": "typesense",
            "app.kubernetes.io/instance": cluster_name,
            GO_SELECTOR_LABEL: f"{cluster_name}-sts",
        },
        "ownerReferences": [
            {
                "apiVersion": cluster["apiVersion"],
                "kind": cluster["kind"],
                "name": cluster_name,
                "uid": cluster["metadata"]["uid"],
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
    }
    if annotations:
        meta["annotations"] = dict(annotations)
    return meta


def _key_env(secret: str) -> Manifest:
    return {
        "name": "TYPESENSE_API_KEY",
        "valueFrom": {"secretKeyRef": {"name": secret, "key": "typesense-api-key"}},
    }


def go_made_children(cluster: Manifest, api_key: str | None = None) -> list[Manifest]:
    """The admin-key Secret, nodes ConfigMap, both Services and the StatefulSet that the Go operator
    creates for ``cluster`` (a TypesenseCluster read back from the API server, with its uid and spec)."""
    name, namespace = cluster["metadata"]["name"], cluster["metadata"]["namespace"]
    spec = cluster["spec"]
    api_port, peering_port = spec.get("apiPort", 8108), spec.get("peeringPort", 8107)
    replicas = spec.get("replicas", 3)
    selector = {GO_SELECTOR_LABEL: f"{name}-sts"}
    secret = f"{name}-admin-key"
    # typesensecluster_configmap.go:216: the bootstrap list is the pods' DNS names, in both keys.
    dns_nodes = ",".join(f"{name}-sts-{i}.{name}-sts-svc:{peering_port}:{api_port}" for i in range(replicas))
    storage = spec.get("storage") or {}
    # typesensecluster_secret.go:48-62 (utils.go:24-33 makes 256 random bytes, base64: 344 characters).
    key = api_key or base64.b64encode(secrets.token_bytes(256)).decode()
    statefulset_annotations = spec.get("statefulSetAnnotations") or {}
    pod_annotations = {
        "ts.opentelekomcloud.com/read-lag-threshold": "1000",
        "ts.opentelekomcloud.com/write-lag-threshold": "500",
        **(spec.get("podAnnotations") or {}),
        "ts.opentelekomcloud.com/pod-template-hash": "0000000000000000",
    }
    return [
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": _meta(cluster, secret),
            "type": "Opaque",
            "immutable": True,
            "data": {"typesense-api-key": base64.b64encode(key.encode()).decode()},
        },
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": _meta(cluster, f"{name}-nodeslist"),
            "data": {"nodes": dns_nodes, "fallback": dns_nodes},
        },
        {  # typesensecluster_services.go:119-147
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": _meta(cluster, f"{name}-sts-svc"),
            "spec": {
                "clusterIP": "None",
                "publishNotReadyAddresses": True,
                "selector": selector,
                "ports": [{"name": "http", "port": api_port, "targetPort": 8108}],
            },
        },
        {  # typesensecluster_services.go:160-205
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": _meta(cluster, f"{name}-svc"),
            "spec": {
                "type": "ClusterIP",
                "selector": selector,
                "ports": [
                    {"name": "http", "port": api_port, "targetPort": 8108},
                    {"name": "healthcheck", "port": 8808, "targetPort": 8808},
                ],
            },
        },
        {  # typesensecluster_statefulset.go:213-505
            "apiVersion": "apps/v1",
            "kind": "StatefulSet",
            "metadata": _meta(cluster, f"{name}-sts", statefulset_annotations),
            "spec": {
                "serviceName": f"{name}-sts-svc",
                "podManagementPolicy": "Parallel",
                "replicas": replicas,
                "selector": {"matchLabels": selector},
                "template": {
                    "metadata": {
                        "labels": _meta(cluster, name)["labels"],
                        "annotations": pod_annotations,
                    },
                    "spec": {
                        "securityContext": {
                            "runAsUser": 10000,
                            "fsGroup": 2000,
                            "runAsGroup": 3000,
                            "runAsNonRoot": True,
                        },
                        "terminationGracePeriodSeconds": 5,
                        "readinessGates": [{"conditionType": QUORUM_READY_GATE}],
                        "containers": [
                            {
                                "name": "typesense",
                                "image": spec["image"],
                                "imagePullPolicy": "IfNotPresent",
                                "ports": [{"name": "http", "containerPort": api_port}],
                                "env": [
                                    _key_env(secret),
                                    {"name": "TYPESENSE_NODES", "value": "/usr/share/typesense/nodes"},
                                    {"name": "TYPESENSE_DATA_DIR", "value": "/usr/share/typesense/data"},
                                    {"name": "TYPESENSE_API_PORT", "value": str(api_port)},
                                    {"name": "TYPESENSE_PEERING_PORT", "value": str(peering_port)},
                                    {
                                        "name": "TYPESENSE_PEERING_ADDRESS",
                                        "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}},
                                    },
                                    {"name": "TYPESENSE_ENABLE_CORS", "value": "false"},
                                    {"name": "TYPESENSE_CORS_DOMAINS", "value": ""},
                                    {"name": "TYPESENSE_RESET_PEERS_ON_ERROR", "value": "true"},
                                ],
                                "volumeMounts": [
                                    {"mountPath": "/usr/share/typesense", "name": "nodeslist"},
                                    {"mountPath": "/usr/share/typesense/data", "name": "data"},
                                ],
                            },
                            {
                                "name": "metrics-exporter",
                                "image": EXPORTER_IMAGE,
                                "imagePullPolicy": "IfNotPresent",
                                "ports": [{"name": "metrics", "containerPort": 9100}],
                                "env": [
                                    _key_env(secret),
                                    {"name": "LOG_LEVEL", "value": "0"},
                                    {"name": "TYPESENSE_PROTOCOL", "value": "http"},
                                    {"name": "TYPESENSE_HOST", "value": "localhost"},
                                    {"name": "TYPESENSE_PORT", "value": str(api_port)},
                                    {"name": "METRICS_PORT", "value": "9100"},
                                    {"name": "TYPESENSE_CLUSTER", "value": name},
                                ],
                            },
                            {
                                "name": "healthcheck",
                                "image": HEALTHCHECK_IMAGE,
                                "imagePullPolicy": "IfNotPresent",
                                "ports": [{"name": "healthcheck", "containerPort": 8808}],
                                "env": [
                                    _key_env(secret),
                                    {"name": "LOG_LEVEL", "value": "0"},
                                    {"name": "TYPESENSE_PROTOCOL", "value": "http"},
                                    {"name": "TYPESENSE_API_PORT", "value": str(api_port)},
                                    {"name": "TYPESENSE_PEERING_PORT", "value": str(peering_port)},
                                    {"name": "HEALTHCHECK_PORT", "value": "8808"},
                                    {"name": "TYPESENSE_NODES", "value": "/usr/share/typesense/fallback"},
                                    {"name": "CLUSTER_NAMESPACE", "value": namespace},
                                ],
                                "volumeMounts": [
                                    {
                                        "mountPath": "/usr/share/typesense",
                                        "name": "nodeslist",
                                        "readOnly": True,
                                    }
                                ],
                            },
                        ],
                        "volumes": [
                            {"name": "nodeslist", "configMap": {"name": f"{name}-nodeslist"}},
                            {"name": "data", "persistentVolumeClaim": {"claimName": "data"}},
                        ],
                    },
                },
                "volumeClaimTemplates": [
                    {
                        "metadata": {
                            "name": "data",
                            "labels": selector,
                            **({"annotations": storage["annotations"]} if storage.get("annotations") else {}),
                        },
                        "spec": {
                            "accessModes": [storage.get("accessMode", "ReadWriteOnce")],
                            "resources": {"requests": {"storage": storage.get("size", "100Mi")}},
                            "storageClassName": storage.get("storageClassName", "standard"),
                        },
                    }
                ],
            },
        },
    ]


async def play_go_operator(kube: Kube, cluster: Manifest, api_key: str, timeout: float = 120) -> None:
    """Create what the Go operator creates for ``cluster``, then do what it does once the pods run:
    the nodes list names the pods' IPs (its steady state), and every pod's ``RaftQuorumReady`` is True
    (it sets it once the node is healthy; here, once the pod runs)."""
    for manifest in go_made_children(cluster, api_key):
        await kube.create(manifest)
    name, namespace = cluster["metadata"]["name"], cluster["metadata"]["namespace"]
    replicas = cluster["spec"].get("replicas", 3)
    spec = cluster["spec"]
    selector = {GO_SELECTOR_LABEL: f"{name}-sts"}

    async def addressed() -> list[Manifest] | None:
        pods = await kube.list("v1", "Pod", namespace, labels=selector)
        running = [p for p in pods if (p.get("status") or {}).get("podIP")]
        return running if len(running) == replicas else None

    found = await wait_until(addressed, timeout=timeout, interval=0.5, what=f"{replicas} pods of {name}-sts")
    pods: list[Manifest] = list(found)  # type: ignore[call-overload]
    ips = ",".join(
        f"{p['status']['podIP']}:{spec.get('peeringPort', 8107)}:{spec.get('apiPort', 8108)}"
        for p in sorted(pods, key=lambda p: p["metadata"]["name"])
    )
    await kube.patch("v1", "ConfigMap", f"{name}-nodeslist", namespace, {"data": {"nodes": ips}})
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    for pod in pods:
        conditions = [
            c for c in (pod.get("status") or {}).get("conditions") or [] if c.get("type") != QUORUM_READY_GATE
        ]
        conditions.append(
            {"type": QUORUM_READY_GATE, "status": "True", "reason": "NodeHealthy", "lastTransitionTime": now}
        )
        await kube.patch_status("v1", "Pod", pod["metadata"]["name"], namespace, {"conditions": conditions})


async def handed_over(cluster: TypesenseCluster) -> bool:
    """Whether our operator has taken the cluster over: its StatefulSet (our selector) runs every node
    at its revision, the roll is done, and the cluster is Ready."""
    sts = await cluster.kube.get("apps/v1", "StatefulSet", f"{cluster.name}-sts", cluster.namespace)
    if sts is None or GO_SELECTOR_LABEL in sts["spec"]["selector"]["matchLabels"]:
        return False
    status, obj = sts.get("status") or {}, await cluster.get()
    conditions = {c["type"]: c for c in (obj.get("status") or {}).get("conditions") or []}
    return (
        status.get("updatedReplicas") == sts["spec"]["replicas"]
        and status.get("currentRevision") == status.get("updateRevision")
        and conditions.get("Ready", {}).get("status") == "True"
        and conditions.get("Progressing", {}).get("reason") == "UpToDate"
    )


GO_OPERATOR_RBAC = """\
apiVersion: v1
kind: Namespace
metadata: {name: typesense-go}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: typesense-operator, namespace: typesense-go}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: typesense-go-operator}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}
subjects: [{kind: ServiceAccount, name: typesense-operator, namespace: typesense-go}]
"""
GO_OPERATOR_USER = "system:serviceaccount:typesense-go:typesense-operator"
"""Who the Go operator is to the API server (for counting its requests in the audit log)."""


def go_operator_process(plane: ControlPlane, binary: Path, home: Path) -> OperatorProcess:
    """The Go operator's manager (not started) on ``plane``, out of cluster, as its own ServiceAccount
    bound to cluster-admin, with leader election and metrics off and info-level logs."""
    kubeconfig = account_kubeconfig(
        plane, list(yaml.safe_load_all(GO_OPERATOR_RBAC)), home / "operator.kubeconfig"
    )
    # No proxy settings, and no KUBECONFIG to compete with the flag.
    environment = {k: v for k, v in os.environ.items() if "proxy" not in k.lower() and k != "KUBECONFIG"}
    return OperatorProcess.of_command(
        "the Go operator",
        lambda port: [
            str(binary),
            f"--kubeconfig={kubeconfig}",
            "--leader-elect=false",
            "--metrics-bind-address=0",
            f"--health-probe-bind-address=127.0.0.1:{port}",
            "--zap-log-level=info",
        ],
        home / "operator.log",
        environment=environment,
    )
