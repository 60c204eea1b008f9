"""spec.tls, the cluster's step: the certificate read from its Secret (the user's, or the one cert-manager
issues for the operator's Certificate), checked (:mod:`typesense_operator.tls.check`) for every name
the nodes are reached by, and copied into the Secret the nodes mount (``<cluster>-tls-served``), which
the children's step applies (and, when it changed, nudges the pods for: :mod:`.children`).

A certificate that fails the check is never copied: the condition CertificateReady says why, and the
nodes keep serving the copy they have. A new cluster waits for a good certificate before its first pod,
and a running one keeps its scheme until one comes. Whether the pods serve HTTPS (:attr:`Scope.nodes_tls`)
follows the copy: on once there is one, off when spec.tls is removed; either change rolls the nodes.
The proxy, the scrapers and the exporter follow it too, trusting the copy's CA (:attr:`Scope.nodes_tls`).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from operator_core.clock import utcnow, wire_time
from operator_core.steps import Outcome
from typesense_operator.api.reasons import CertificateReason, ConditionType, EventReason
from typesense_operator.controller.cluster.scope import Scope
from typesense_operator.controller.metrics import observe_certificate
from typesense_operator.resources.model import secret_bytes
from typesense_operator.resources.tls import (
    CERTIFICATE_API_VERSION,
    CERTIFICATE_KIND,
    CertificateCopy,
    NodesTls,
    ca_bundle,
    issued_secret_name,
    required_names,
    served_secret_name,
)
from typesense_operator.tls.check import Served
from typesense_operator.tls.secret import NotServed, judge_secret

__all__ = ["prepare_tls"]


async def _refuse(
    scope: Scope, reason: str, message: str, served: dict[str, Any] | None, *, crd_missing: bool = False
) -> Outcome:
    """CertificateReady False with ``reason``; the nodes keep what they serve, and a new cluster waits."""
    keeping = (
        "the nodes keep serving the certificate they have"
        if served is not None
        else "no node is given a certificate until this is fixed"
    )
    await scope.set_condition(
        ConditionType.CERTIFICATE_READY,
        "False",
        reason,
        f"{message}; {keeping}",
        warn=EventReason.CERTIFICATE_REFUSED,
    )
    # A missing CRD is looked for again (nothing we watch says when it comes); a Secret wakes the cluster.
    if crd_missing:
        scope.waiting_for_crd = True
    else:
        scope.waiting_for_user = True
    # The nodes keep the copy they have, and the clients its CA.
    scope.nodes_tls = NodesTls(secret_bytes(served, "ca.crt") or b"") if served is not None else None
    if served is None and await _is_new(scope):
        # A new cluster never starts in plain HTTP when spec.tls asks for HTTPS; only the Certificate
        # (spec.tls.issuerRef) is made meanwhile, for cert-manager to issue what the cluster waits for.
        scope.certificate_only = True
        return Outcome.APPLY_AND_STOP
    return Outcome.CONTINUE


async def _is_new(scope: Scope) -> bool:
    cluster = scope.cluster
    statefulset = await scope.kube.get("apps/v1", "StatefulSet", cluster.statefulset_name, cluster.namespace)
    return statefulset is None


async def prepare_tls(scope: Scope) -> Outcome:
    """The checked copy of spec.tls's certificate among the children, or why not (CertificateReady)."""
    cluster = scope.cluster
    tls = cluster.spec.tls
    served = await scope.kube.get("v1", "Secret", served_secret_name(cluster.name), cluster.namespace)
    scope.served_before = served
    if tls is None:
        scope.nodes_tls = None
        scope.status["tls"] = None
        observe_certificate(cluster.namespace, cluster.name, None)
        await scope.set_condition(ConditionType.CERTIFICATE_READY, "True", CertificateReason.NOT_REQUESTED)
        return Outcome.CONTINUE
    if tls.issuer_ref is not None:
        if not await scope.kube.serves(*CERTIFICATE_KIND):
            return await _refuse(
                scope,
                CertificateReason.CERT_MANAGER_MISSING,
                f"spec.tls.issuerRef needs cert-manager: the Certificate CRD ({CERTIFICATE_API_VERSION}) is "
                "not installed",
                served,
                crd_missing=True,
            )
        scope.served.add(CERTIFICATE_KIND)  # the desired state has the Certificate
        source = issued_secret_name(cluster.name)
    else:
        assert tls.certificate_secret is not None  # CEL: exactly one of the two
        source = tls.certificate_secret.name
    secret = await scope.kube.get("v1", "Secret", source, cluster.namespace)
    now = utcnow()
    judged = judge_secret(
        secret,
        source=source,
        namespace=cluster.namespace,
        issued=tls.issuer_ref is not None,
        names=required_names(cluster, cluster.spec.replicas),
        now=now,
    )
    if isinstance(judged, NotServed):
        return await _refuse(scope, judged.reason, judged.message, served)
    previous_ca = secret_bytes(served, "ca.crt")
    # No ca.crt (a publicly trusted certificate): an empty bundle, and clients trust the system's CAs.
    bundle = ca_bundle(judged.ca, previous_ca) if judged.ca is not None else b""
    scope.nodes_tls = NodesTls(bundle)
    scope.certificate_copy = CertificateCopy(judged.cert, judged.key)
    await _report_served(scope, source, judged.served, now)
    return Outcome.CONTINUE


async def _report_served(scope: Scope, source: str, served: Served, now: datetime) -> None:
    """CertificateReady True (ExpiresSoon within spec.tls.expiryWarningDays), status.tls, the expiry
    metric, and an Event for each certificate given to the nodes and for each that will soon expire."""
    cluster = scope.cluster
    assert cluster.spec.tls is not None
    expiry = f"{served.not_after:%Y-%m-%dT%H:%M:%SZ}"
    observe_certificate(cluster.namespace, cluster.name, served.not_after.timestamp())
    before = (scope.current.get("tls") or {}).get("serial")
    if before != served.serial:
        await scope.event(
            "Normal",
            EventReason.CERTIFICATE_SERVED,
            f"certificate {served.serial} from Secret {source}, valid until {expiry}, given to the nodes",
        )
    scope.status["tls"] = {
        "secret": source,
        "serial": served.serial,
        "notAfter": wire_time(served.not_after),
        "dnsNames": list(served.dns_names),
    }
    warning = timedelta(days=cluster.spec.tls.expiry_warning_days)
    if served.not_after - now > warning:
        await scope.set_condition(
            ConditionType.CERTIFICATE_READY,
            "True",
            CertificateReason.SERVED,
            f"certificate {served.serial} from Secret {source}, valid until {expiry}",
        )
        return
    said = scope.book.stored.get(ConditionType.CERTIFICATE_READY)
    if said is None or said.reason != CertificateReason.EXPIRES_SOON:
        await scope.event(
            "Warning",
            EventReason.CERTIFICATE_EXPIRES_SOON,
            f"certificate {served.serial} from Secret {source} expires at {expiry}; renew it",
        )
    await scope.set_condition(
        ConditionType.CERTIFICATE_READY,
        "True",
        CertificateReason.EXPIRES_SOON,
        f"certificate {served.serial} from Secret {source} expires at {expiry}, within "
        f"{cluster.spec.tls.expiry_warning_days} days; renew it",
    )
