"""A certificate's Secret judged (pure): what it holds, and whether the nodes may be given it, or the
reason and the words for CertificateReady (table-tested in tests/unit/test_typesense_tls_secret.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from typesense_operator.api.reasons import CertificateReason
from typesense_operator.resources.model import secret_bytes
from typesense_operator.tls.check import Refused, Served, check_certificate

__all__ = ["TLS_SECRET_TYPE", "Checked", "NotServed", "judge_secret"]

TLS_SECRET_TYPE = "kubernetes.io/tls"  # noqa: S105 (a Secret type, not a password)


@dataclass(frozen=True)
class Checked:
    """A certificate the nodes may serve, and what it is made of."""

    served: Served
    cert: bytes
    key: bytes
    ca: bytes | None
    """The CA that signs it (ca.crt); None: a publicly trusted certificate."""


@dataclass(frozen=True)
class NotServed:
    reason: str
    message: str


def judge_secret(
    secret: Mapping[str, Any] | None,
    *,
    source: str,
    namespace: str,
    issued: bool,
    names: Sequence[str],
    now: datetime,
) -> Checked | NotServed:
    """Whether the Secret ``source`` (``issued``: the one cert-manager issues for the operator's
    Certificate) holds a certificate that serves every one of ``names`` at ``now``."""
    if secret is None:
        if issued:
            return NotServed(
                CertificateReason.NOT_ISSUED_YET,
                f"cert-manager has not issued the Certificate {source} into the Secret {source} yet "
                f"(kubectl describe certificate {source} says why)",
            )
        return NotServed(
            CertificateReason.SECRET_NOT_FOUND,
            f"Secret {source} (spec.tls.certificateSecret) does not exist in namespace {namespace}",
        )
    if secret.get("type") != TLS_SECRET_TYPE:
        return NotServed(
            CertificateReason.WRONG_SECRET_TYPE,
            f"Secret {source} is of type {secret.get('type') or 'Opaque'}, not {TLS_SECRET_TYPE}",
        )
    cert, key, ca = (secret_bytes(secret, data_key) for data_key in ("tls.crt", "tls.key", "ca.crt"))
    if cert is None or key is None:
        missing = " and ".join(name for name, value in (("tls.crt", cert), ("tls.key", key)) if value is None)
        return NotServed(CertificateReason.KEYS_MISSING, f"Secret {source} has no {missing}")
    verdict = check_certificate(cert, key, ca, names, now)
    if isinstance(verdict, Refused):
        return NotServed(verdict.refusal, f"Secret {source}: {verdict.message}")
    return Checked(verdict, cert, key, ca)
