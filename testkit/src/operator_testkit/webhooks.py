"""The Cluster Stack operator's admission webhooks outside a cluster: what a test or the journey needs to
turn them on by a loopback URL (a CA and serving certificate made for the run, laid out as a mounted
cert-manager Secret, and the extra RBAC to register the webhooks), and the operator's settings for it."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from operator_testkit.pki import create_pki

__all__ = ["CONFIGURATION_NAME", "registration_rbac", "serving_certificates", "webhook_settings"]

CONFIGURATION_NAME = "cluster-stack-operator.clusterstack.x-k8s.io"
REGISTRATION_ROLE = "cluster-stack-operator-webhook-registration"


def registration_rbac() -> list[dict[str, Any]]:
    """What registering by URL needs beyond the chart's RBAC: its one ValidatingWebhookConfiguration."""
    return [
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": REGISTRATION_ROLE},
            "rules": [
                {
                    "apiGroups": ["admissionregistration.k8s.io"],
                    "resources": ["validatingwebhookconfigurations"],
                    "verbs": ["get", "create", "patch", "delete"],
                }
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": REGISTRATION_ROLE},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": REGISTRATION_ROLE,
            },
            "subjects": [
                {
                    "kind": "ServiceAccount",
                    "name": "cluster-stack-operator",
                    "namespace": "cluster-stack-system",
                }
            ],
        },
    ]


def serving_certificates(directory: Path) -> Path:
    """A CA made for this run, and a serving certificate it signed for 127.0.0.1, laid out as a
    cert-manager Certificate's Secret is when mounted."""
    pki = create_pki(directory / "pki", service_ip="127.0.0.1")
    mounted = directory / "webhook-tls"
    mounted.mkdir()
    shutil.copy(pki.serving_cert, mounted / "tls.crt")
    shutil.copy(pki.serving_key, mounted / "tls.key")
    shutil.copy(pki.ca_cert, mounted / "ca.crt")
    return mounted


def webhook_settings(directory: Path, port: int) -> dict[str, str]:
    """The operator's settings to serve its webhooks on 127.0.0.1:``port`` with certificates made in
    ``directory``, and to register them by that URL."""
    return {
        "OPERATOR_SUITE_WEBHOOK": "true",
        "OPERATOR_SUITE_WEBHOOK_HOST": "127.0.0.1",
        "OPERATOR_SUITE_WEBHOOK_PORT": str(port),
        "OPERATOR_SUITE_WEBHOOK_CERT_DIR": str(serving_certificates(directory)),
        "OPERATOR_SUITE_WEBHOOK_URL": f"https://127.0.0.1:{port}",
    }
