"""OpenSSL's verdict on a certificate, its key and its CA, for the names a cluster's clients use."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from operator_testkit.pki import CertificateAuthority
from typesense_operator.tls.check import Refusal, Refused, Served, check_certificate, covers

NOW = datetime.now(UTC)
NAMES = ("search-svc.ns.svc", "search-sts-0.search-sts-svc.ns.svc")
CA = CertificateAuthority.create()
GOOD = CA.issue("search-svc.ns.svc", "*.search-sts-svc.ns.svc")


def test_a_good_certificate_is_served_with_its_serial_dates_and_names() -> None:
    served = check_certificate(GOOD.cert, GOOD.key, CA.pem, NAMES, NOW)
    assert isinstance(served, Served)
    assert served.serial == GOOD.serial
    assert served.dns_names == ("search-svc.ns.svc", "*.search-sts-svc.ns.svc")
    assert served.not_before < NOW < served.not_after


def refusal(cert: bytes, key: bytes, ca: bytes | None, names: tuple[str, ...] = NAMES) -> Refused:
    refused = check_certificate(cert, key, ca, names, NOW)
    assert isinstance(refused, Refused), refused
    return refused


GOOD_NAMES = ("search-svc.ns.svc", "*.search-sts-svc.ns.svc")


def key_of_another() -> tuple[bytes, bytes, bytes | None]:
    return GOOD.cert, CA.issue(*GOOD_NAMES).key, CA.pem


def dated(days_from: int, days_to: int) -> tuple[bytes, bytes, bytes | None]:
    issued = CA.issue(
        *GOOD_NAMES, not_before=NOW + timedelta(days=days_from), not_after=NOW + timedelta(days=days_to)
    )
    return issued.cert, issued.key, CA.pem


def expired_ca() -> tuple[bytes, bytes, bytes | None]:
    old = CertificateAuthority.create(not_before=NOW - timedelta(days=9), not_after=NOW - timedelta(days=1))
    issued = old.issue(*GOOD_NAMES)
    return issued.cert, issued.key, old.pem


def names_not_covered() -> tuple[bytes, bytes, bytes | None]:
    issued = CA.issue("search-svc.ns.svc")
    return issued.cert, issued.key, CA.pem


CASES = {
    "key of another certificate": (key_of_another, Refusal.KEY_MISMATCH, "is not the key of the certificate"),
    "unreadable certificate": (
        lambda: (b"not a certificate", GOOD.key, CA.pem),
        Refusal.UNREADABLE,
        "tls.crt holds no readable",
    ),
    "unreadable key": (
        lambda: (GOOD.cert, b"not a key", CA.pem),
        Refusal.UNREADABLE,
        "tls.key holds no readable",
    ),
    "another CA": (
        lambda: (GOOD.cert, GOOD.key, CertificateAuthority.create("another-ca").pem),
        Refusal.UNTRUSTED,
        "unable to get local issuer certificate",
    ),
    "expired": (lambda: dated(-3, -1), Refusal.EXPIRED, "the certificate expired at"),
    "not yet valid": (lambda: dated(1, 3), Refusal.NOT_YET_VALID, "is valid only from"),
    "expired CA": (expired_ca, Refusal.EXPIRED, "its CA (ca.crt) expired"),
    "names not covered": (
        names_not_covered,
        Refusal.NAMES_NOT_COVERED,
        "do not cover search-sts-0.search-sts-svc.ns.svc",
    ),
    "no CA and not public": (lambda: (GOOD.cert, GOOD.key, None), Refusal.UNTRUSTED, "the system's CAs"),
}


@pytest.mark.parametrize("case", CASES)
def test_each_broken_certificate_is_refused_with_what_to_fix(case: str) -> None:
    made, expected, words = CASES[case]
    refused = refusal(*made())
    assert refused.refusal is expected
    assert words in refused.message, refused.message


def test_the_key_never_appears_in_a_refusal() -> None:
    stranger = CertificateAuthority.create("another-ca")
    for ca in (stranger.pem, None):
        assert GOOD.key.decode() not in refusal(GOOD.cert, GOOD.key, ca).message


@pytest.mark.parametrize(
    ("pattern", "name", "expected"),
    [
        ("a.b.svc", "a.b.svc", True),
        ("A.B.svc", "a.b.svc.", True),
        ("*.b.svc", "a.b.svc", True),
        ("*.b.svc", "x.a.b.svc", False),
        ("*.b.svc", "b.svc", False),
        ("a.b.svc", "c.b.svc", False),
    ],
)
def test_a_wildcard_covers_one_leftmost_label(pattern: str, name: str, expected: bool) -> None:
    assert covers(pattern, name) is expected
