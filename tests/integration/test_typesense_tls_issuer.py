"""spec.tls.issuerRef against cert-manager's own CRDs (from its module, as pinned in hack/cert-manager):
without them the cluster says cert-manager is missing; with them the operator's Certificate is accepted
by the API server's validation of cert-manager's schema, asks for every name the nodes are reached by,
and a new cluster waits, with no pod, until the certificate is issued. The issuing itself is played by
the first test (a CA of its own writes the Secret the Certificate names); the second runs cert-manager's
real controllers (operator_testkit.cert_manager) with the chart's ClusterIssuer (values tlsIssuer), whose
CA cert-manager makes itself, and which issues the Certificate and renews it.
The nodes' use of a certificate is tested on real nodes (tests/e2e/nodes/test_typesense_tls.py)."""

from __future__ import annotations

import asyncio
import base64
import datetime
from pathlib import Path
from typing import Any

from operator_core.kube import Kube
from operator_testkit import assertions
from operator_testkit.assertions import wait_for_object
from operator_testkit.cert_manager import running_cert_manager
from operator_testkit.charts import render_chart
from operator_testkit.controlplane import ControlPlane
from operator_testkit.drivers.typesense import certificate_secret
from operator_testkit.fixtures import Kubectl, crd_documents, wait_until, wait_until_established
from operator_testkit.module_crds import ensure_cert_manager_crds
from operator_testkit.operators import OperatorProcess
from operator_testkit.pki import CertificateAuthority
from operator_testkit.servers import log_tail
from typesense_operator.tls.check import covers

API = "ts.opentelekomcloud.com/v1alpha1"
CERTIFICATE = ("cert-manager.io/v1", "Certificate")


def _cluster(namespace: str, tls: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "TypesenseCluster",
        "metadata": {"name": "cluster-1", "namespace": namespace},
        "spec": {"image": "typesense/typesense:27.1", "replicas": 3, "tls": tls},
    }


async def _serve_cert_manager_api(kube: Kube, kubectl: Kubectl) -> None:
    crds = ensure_cert_manager_crds()
    await asyncio.to_thread(kubectl, "apply", "--server-side", "-f", str(crds))
    # Every one of them, not the Certificate's alone: a ClusterIssuer applied before its CRD was
    # Established was "not served" (seen with three workers starting their control planes at once).
    await wait_until_established(kube, [str(d["metadata"]["name"]) for d in crd_documents(crds)])


async def _certificate_ready(
    kube: Kube, namespace: str, status: str, reason: str, timeout: float = 60
) -> dict[str, Any]:
    return await assertions.wait_for_condition(
        kube, API, "TypesenseCluster", "cluster-1", namespace, "CertificateReady", status, reason,
        timeout=timeout,
    )  # fmt: skip


async def test_an_issuer_makes_a_certificate_for_every_name_and_a_new_cluster_waits_for_it_to_be_issued(
    kube: Kube, namespace: str, kubectl: Kubectl, typesense_operator: OperatorProcess
) -> None:
    issuer = {"issuerRef": {"name": "shop-ca", "kind": "ClusterIssuer"}}
    await kube.apply(_cluster(namespace, issuer))
    if not await kube.serves(*CERTIFICATE):  # the first time in a control plane's life
        missing = await _certificate_ready(kube, namespace, "False", "CertManagerMissing")
        assert "the Certificate CRD (cert-manager.io/v1) is not installed" in missing["message"]

    await _serve_cert_manager_api(kube, kubectl)
    certificate = await wait_for_object(kube, *CERTIFICATE, "cluster-1-tls", namespace, timeout=60)
    spec = certificate["spec"]
    assert spec["issuerRef"] == {"name": "shop-ca", "kind": "ClusterIssuer", "group": "cert-manager.io"}
    assert spec["secretName"] == "cluster-1-tls"
    assert certificate["metadata"]["ownerReferences"][0]["name"] == "cluster-1"
    wanted = [
        "cluster-1-svc",
        f"cluster-1-svc.{namespace}.svc.cluster.local",
        *(f"cluster-1-sts-{n}.cluster-1-sts-svc.{namespace}.svc" for n in range(7)),
    ]
    assert all(any(covers(pattern, name) for pattern in spec["dnsNames"]) for name in wanted), spec[
        "dnsNames"
    ]
    waiting = await _certificate_ready(kube, namespace, "False", "NotIssuedYet")
    assert "kubectl describe certificate cluster-1-tls" in waiting["message"]
    assert await kube.get_live("apps/v1", "StatefulSet", "cluster-1-sts", namespace) is None, (
        "no pod before it"
    )

    # Issued (the test stands in for the issuer): checked, copied for the nodes, and the nodes made.
    authority = CertificateAuthority.create("shop-ca")
    issued = authority.issue(*spec["dnsNames"])
    await kube.create(certificate_secret("cluster-1-tls", namespace, issued, authority.pem))
    served = await _certificate_ready(kube, namespace, "True", "Served")
    assert issued.serial in served["message"]
    statefulset = await wait_for_object(
        kube, "apps/v1", "StatefulSet", "cluster-1-sts", namespace, timeout=60
    )
    template = statefulset["spec"]["template"]
    assert template["metadata"]["annotations"]["ts.opentelekomcloud.com/api-scheme"] == "https"
    assert {
        "name": "tls",
        "secret": {"secretName": "cluster-1-tls-served", "defaultMode": 0o440},
    } in template["spec"]["volumes"]
    copy = await wait_for_object(kube, "v1", "Secret", "cluster-1-tls-served", namespace)
    assert (
        copy["data"]["tls.crt"]
        == certificate_secret("x", namespace, issued, authority.pem)["data"]["tls.crt"]
    )
    obj = await kube.get_live(API, "TypesenseCluster", "cluster-1", namespace)
    assert obj is not None
    assert obj["status"]["tls"]["serial"] == issued.serial

    # A Secret of the user's instead: the operator's Certificate goes.
    await kube.create(certificate_secret("mine", namespace, issued, authority.pem))
    await kube.apply(_cluster(namespace, {"certificateSecret": {"name": "mine"}}))

    async def certificate_gone() -> bool:
        return await kube.get_live(*CERTIFICATE, "cluster-1-tls", namespace) is None

    await wait_until(certificate_gone, timeout=30, what="the operator's Certificate pruned")
    assert "Traceback" not in typesense_operator.log()


async def _served_serial(kube: Kube, namespace: str) -> str | None:
    obj = await kube.get_live(API, "TypesenseCluster", "cluster-1", namespace)
    return ((obj or {}).get("status") or {}).get("tls", {}).get("serial")


async def test_cert_manager_issues_the_operators_certificate_and_its_renewal_is_taken_up(
    kube: Kube,
    namespace: str,
    kubectl: Kubectl,
    control_plane: ControlPlane,
    typesense_operator: OperatorProcess,
    tmp_path: Path,
) -> None:
    await _serve_cert_manager_api(kube, kubectl)
    # The chart's ClusterIssuer (tlsIssuer), whose CA cert-manager makes itself, in the namespace it
    # reads ClusterIssuers' Secrets from.
    resources, issuer_name = f"{namespace}-cm", f"{namespace}-ca"
    await kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": resources}})
    issuer_objects = render_chart(
        tmp_path / "helm",
        "typesense-operator",
        "--show-only=templates/tls-issuer.yaml",
        "--set=tlsIssuer.create=true",
        f"--set=tlsIssuer.name={issuer_name}",
        f"--set=tlsIssuer.clusterResourceNamespace={resources}",
    )
    assert sorted(o["kind"] for o in issuer_objects) == ["Certificate", "ClusterIssuer", "ClusterIssuer"]
    try:
        for issuer_object in issuer_objects:
            await kube.apply(issuer_object)
        with running_cert_manager(
            control_plane.kubeconfig, tmp_path, cluster_resource_namespace=resources
        ) as cert_manager:
            root = await wait_for_object(kube, "v1", "Secret", f"{issuer_name}-root", resources, timeout=60)
            await _issued_and_renewed(kube, namespace, issuer_name, base64.b64decode(root["data"]["tls.crt"]))
            assert cert_manager.alive(), log_tail(cert_manager.log)
    finally:
        for issuer_object in issuer_objects:
            if issuer_object["kind"] == "ClusterIssuer":
                await kube.delete("cert-manager.io/v1", "ClusterIssuer", issuer_object["metadata"]["name"])
        await kube.delete("v1", "Namespace", resources, None)
    assert "Traceback" not in typesense_operator.log()


async def _issued_and_renewed(kube: Kube, namespace: str, issuer_name: str, ca: bytes) -> None:
    await kube.apply(_cluster(namespace, {"issuerRef": {"name": issuer_name, "kind": "ClusterIssuer"}}))
    # Issued by cert-manager: checked against the CA cert-manager put beside it, copied, nodes made.
    served = await _certificate_ready(kube, namespace, "True", "Served", timeout=90)
    issued = await wait_for_object(kube, "v1", "Secret", "cluster-1-tls", namespace)
    assert base64.b64decode(issued["data"]["ca.crt"]) == ca
    first = await _served_serial(kube, namespace)
    assert first is not None
    assert first in served["message"], served
    await wait_for_object(kube, "apps/v1", "StatefulSet", "cluster-1-sts", namespace, timeout=60)
    copy = await wait_for_object(kube, "v1", "Secret", "cluster-1-tls-served", namespace)
    assert copy["data"]["tls.crt"] == issued["data"]["tls.crt"]

    # Renewed as `cmctl renew` asks for it (the Issuing condition): a new certificate, taken up.
    certificate = await wait_for_object(kube, *CERTIFICATE, "cluster-1-tls", namespace)
    conditions = certificate["status"].get("conditions", [])
    await kube.patch_status(*CERTIFICATE, "cluster-1-tls", namespace, {
        "conditions": [*conditions, {
            "type": "Issuing",
            "status": "True",
            "reason": "ManuallyTriggered",
            "message": "renewal asked for by the test",
            "lastTransitionTime": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        }],
    })  # fmt: skip

    async def renewed() -> bool:
        serial = await _served_serial(kube, namespace)
        return serial is not None and serial != first

    await wait_until(renewed, timeout=90, what="the renewed certificate in status.tls")
    copy = await wait_for_object(kube, "v1", "Secret", "cluster-1-tls-served", namespace)
    issued = await wait_for_object(kube, "v1", "Secret", "cluster-1-tls", namespace)
    assert copy["data"]["tls.crt"] == issued["data"]["tls.crt"]
    await _certificate_ready(kube, namespace, "True", "Served")
