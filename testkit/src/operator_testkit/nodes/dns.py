"""The cluster's DNS: CoreDNS as a Deployment behind the ``kube-dns`` Service, as kubeadm installs it,
answering for ``cluster.local`` and forwarding nowhere else (a name outside the cluster gets no answer
from elsewhere: nothing is asked outside the machine). Pure: a plan in, manifests out."""

from __future__ import annotations

from typing import Any

from operator_testkit.nodes.images import COREDNS_IMAGE
from operator_testkit.nodes.plan import NodesPlan

__all__ = ["COREFILE", "coredns_manifests"]

_PORT = 1053  # not 53: CoreDNS runs as a user of no privilege, which cannot bind below 1024
# Each plugin named here is built into CoreDNS by hack/coredns/main.go, and only those (a unit test
# checks that they agree).
COREFILE = f""".:{_PORT} {{
    errors
    health :8080
    ready :8181
    kubernetes cluster.local in-addr.arpa ip6.arpa {{
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        ttl 5
    }}
    cache 5
    loop
    reload 5s
}}
"""


def coredns_manifests(plan: NodesPlan) -> list[dict[str, Any]]:
    labels = {"k8s-app": "kube-dns"}
    meta = {"namespace": "kube-system", "labels": labels}
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "coredns", **meta}},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": "system:coredns"},
            "rules": [
                {
                    "apiGroups": [""],
                    "resources": ["endpoints", "services", "pods", "namespaces"],
                    "verbs": ["list", "watch"],
                },
                {
                    "apiGroups": ["discovery.k8s.io"],
                    "resources": ["endpointslices"],
                    "verbs": ["list", "watch"],
                },
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "system:coredns"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "system:coredns",
            },
            "subjects": [{"kind": "ServiceAccount", "name": "coredns", "namespace": "kube-system"}],
        },
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "coredns", **meta},
            "data": {"Corefile": COREFILE},
        },
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "coredns", **meta},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "serviceAccountName": "coredns",
                        "priorityClassName": "system-cluster-critical",
                        "dnsPolicy": "Default",
                        "securityContext": {
                            "runAsUser": 65532,
                            "runAsGroup": 65532,
                            "runAsNonRoot": True,
                            "seccompProfile": {"type": "RuntimeDefault"},
                        },
                        "containers": [
                            {
                                "name": "coredns",
                                "image": COREDNS_IMAGE,
                                "imagePullPolicy": "Never",
                                "args": ["-conf", "/etc/coredns/Corefile"],
                                "ports": [
                                    {"name": "dns", "containerPort": _PORT, "protocol": "UDP"},
                                    {"name": "dns-tcp", "containerPort": _PORT, "protocol": "TCP"},
                                ],
                                "readinessProbe": {
                                    "httpGet": {"path": "/ready", "port": 8181},
                                    "periodSeconds": 2,
                                },
                                "livenessProbe": {
                                    "httpGet": {"path": "/health", "port": 8080},
                                    "periodSeconds": 10,
                                },
                                "resources": {
                                    "limits": {"memory": "170Mi"},
                                    "requests": {"cpu": "50m", "memory": "50Mi"},
                                },
                                "securityContext": {
                                    "allowPrivilegeEscalation": False,
                                    "readOnlyRootFilesystem": True,
                                    "capabilities": {"drop": ["ALL"]},
                                },
                                "volumeMounts": [
                                    {"name": "config", "mountPath": "/etc/coredns", "readOnly": True}
                                ],
                            }
                        ],
                        "volumes": [{"name": "config", "configMap": {"name": "coredns"}}],
                    },
                },
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "kube-dns", **meta},
            "spec": {
                "selector": labels,
                "clusterIP": str(plan.dns_service_ip),
                "ports": [
                    {"name": "dns", "port": 53, "targetPort": _PORT, "protocol": "UDP"},
                    {"name": "dns-tcp", "port": 53, "targetPort": _PORT, "protocol": "TCP"},
                ],
            },
        },
    ]
