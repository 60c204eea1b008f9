"""A certificate's Secret judged: each way it can fail says which and why; a good one is Checked."""

from __future__ import annotations

import base64
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from operator_testkit.pki import CertificateAuthority
from typesense_operator.tls.secret import Checked, NotServed, judge_secret

NOW = datetime.now(UTC)
AUTHORITY = CertificateAuthority.create("unit-ca")
NAMES = ["search-svc", "search-sts-0.search-sts-svc.shop.svc"]
GOOD = AUTHORITY.issue("search-svc", "*.search-sts-svc.shop.svc")


def secret(secret_type: str = "kubernetes.io/tls", **data: bytes) -> dict[str, Any]:  # noqa: S107
    return {
        "type": secret_type,
        "data": {k.replace("_", "."): base64.b64encode(v).decode() for k, v in data.items()},
    }


def judged(found: dict[str, Any] | None, *, issued: bool = False) -> Checked | NotServed:
    return judge_secret(found, source="search-tls", namespace="shop", issued=issued, names=NAMES, now=NOW)


@pytest.mark.parametrize(
    ("found", "issued", "reason", "words"),
    [
        (None, False, "SecretNotFound", "Secret search-tls (spec.tls.certificateSecret) does not exist"),
        (None, True, "NotIssuedYet", "cert-manager has not issued the Certificate search-tls"),
        (secret("Opaque", tls_crt=GOOD.cert, tls_key=GOOD.key), False, "WrongSecretType", "of type Opaque"),
        (secret(tls_crt=GOOD.cert), False, "KeysMissing", "has no tls.key"),
        (secret(), False, "KeysMissing", "has no tls.crt and tls.key"),
        (
            secret(tls_crt=GOOD.cert, tls_key=AUTHORITY.issue("x").key, ca_crt=AUTHORITY.pem),
            False,
            "KeyMismatch",
            "Secret search-tls: tls.key is not the key",
        ),
        (
            secret(tls_crt=GOOD.cert, tls_key=GOOD.key, ca_crt=CertificateAuthority.create("other").pem),
            False,
            "CertificateUntrusted",
            "refuses it",
        ),
        (
            secret(
                tls_crt=(
                    late := AUTHORITY.issue(
                        *NAMES, not_before=NOW - timedelta(days=9), not_after=NOW - timedelta(days=1)
                    )
                ).cert,
                tls_key=late.key,
                ca_crt=AUTHORITY.pem,
            ),
            False,
            "CertificateExpired",
            "expired at",
        ),
    ],
)
def test_each_way_a_secret_fails_says_which_and_why(
    found: dict[str, Any] | None, issued: bool, reason: str, words: str
) -> None:
    verdict = judged(found, issued=issued)
    assert isinstance(verdict, NotServed), verdict
    assert verdict.reason == reason
    assert words in verdict.message


def test_a_good_secret_is_checked_with_what_it_is_made_of() -> None:
    verdict = judged(secret(tls_crt=GOOD.cert, tls_key=GOOD.key, ca_crt=AUTHORITY.pem))
    assert isinstance(verdict, Checked), verdict
    assert (verdict.cert, verdict.key, verdict.ca) == (GOOD.cert, GOOD.key, AUTHORITY.pem)
    assert verdict.served.serial == GOOD.serial
