"""Whether a certificate, its key and its CA make a server that clients will trust for the names they
use: OpenSSL's own verdict, from a TLS handshake in memory between a server holding the certificate
and a client trusting the CA, with the dates and names checked first so that each refusal says what
to fix (table-tested in tests/unit/test_typesense_tls_check.py).

Pure in effect: no file is written and nothing leaves the process. OpenSSL reads certificates and
keys from paths, so they reach it through anonymous memory files (``memfd``), never a disk. Python's
``ssl`` is the only dependency (no ``cryptography`` in the runtime image). The certificate's dates are
compared with the ``now`` given, not the clock's, and OpenSSL is told not to look at them, so that a
check is the same at any time it is run again.
"""

from __future__ import annotations

import contextlib
import os
import ssl
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

__all__ = ["Refusal", "Refused", "Served", "check_certificate", "covers"]

_NO_CHECK_TIME = 0x200000
"""OpenSSL's X509_V_FLAG_NO_CHECK_TIME: the dates are this module's to judge, against ``now``."""
_HANDSHAKE_ROUNDS = 10


class Refusal(StrEnum):
    """Why a certificate is not served: the reason a condition gives."""

    UNREADABLE = "CertificateUnreadable"
    KEY_MISMATCH = "KeyMismatch"
    UNTRUSTED = "CertificateUntrusted"
    EXPIRED = "CertificateExpired"
    NOT_YET_VALID = "CertificateNotYetValid"
    NAMES_NOT_COVERED = "NamesNotCovered"


@dataclass(frozen=True)
class Served:
    """A certificate clients will trust for every required name: what the status shows of it."""

    serial: str
    """Its serial number, in lower-case hex, as OpenSSL prints it."""
    not_before: datetime
    not_after: datetime
    dns_names: tuple[str, ...]


@dataclass(frozen=True)
class Refused:
    refusal: Refusal
    message: str


@contextlib.contextmanager
def _in_memory(data: bytes) -> Iterator[str]:
    """A path OpenSSL can read ``data`` from, backed by memory only."""
    descriptor = os.memfd_create("typesense-tls", os.MFD_CLOEXEC)
    try:
        os.write(descriptor, data)
        yield f"/proc/self/fd/{descriptor}"
    finally:
        os.close(descriptor)


def _decoded(pem: bytes) -> dict[str, Any]:
    """The first certificate of ``pem``, as Python's ssl decodes one (dates, serial, names)."""
    with _in_memory(pem) as path:
        return dict(ssl._ssl._test_decode_cert(path))  # type: ignore[attr-defined]


def _when(text: str) -> datetime:
    return datetime.fromtimestamp(ssl.cert_time_to_seconds(text), UTC)


def covers(pattern: str, name: str) -> bool:
    """Whether a certificate's DNS name covers ``name``: equal, or a wildcard for one leftmost label."""
    pattern, name = pattern.lower().rstrip("."), name.lower().rstrip(".")
    if pattern.startswith("*."):
        head, _, rest = name.partition(".")
        return bool(head) and rest == pattern[2:]
    return pattern == name


def _dates(decoded: dict[str, Any], now: datetime, whose: str) -> Refused | None:
    not_before, not_after = _when(decoded["notBefore"]), _when(decoded["notAfter"])
    if now >= not_after:
        return Refused(Refusal.EXPIRED, f"{whose} expired at {not_after:%Y-%m-%dT%H:%M:%SZ}")
    if now < not_before:
        return Refused(Refusal.NOT_YET_VALID, f"{whose} is valid only from {not_before:%Y-%m-%dT%H:%M:%SZ}")
    return None


def _handshake(cert: bytes, key: bytes, ca: bytes | None, name: str) -> str | None:
    """OpenSSL's words when a client trusting ``ca`` (the system's CAs when None) refuses a server
    holding ``cert`` and ``key`` for ``name``; None when it completes."""
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    with _in_memory(cert) as cert_path, _in_memory(key) as key_path:
        server.load_cert_chain(cert_path, key_path)
    client = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    client.verify_flags |= _NO_CHECK_TIME
    if ca is None:
        client.load_default_certs()
    else:
        with _in_memory(ca) as ca_path:
            client.load_verify_locations(cafile=ca_path)
    to_server, to_client = ssl.MemoryBIO(), ssl.MemoryBIO()
    client_side = client.wrap_bio(to_client, to_server, server_hostname=name)
    server_side = server.wrap_bio(to_server, to_client, server_side=True)
    done = {"client": False, "server": False}
    try:
        for _ in range(_HANDSHAKE_ROUNDS):
            for side, end in (("client", client_side), ("server", server_side)):
                if not done[side]:
                    with contextlib.suppress(ssl.SSLWantReadError):
                        end.do_handshake()
                        done[side] = True
            if all(done.values()):
                return None
    except ssl.SSLCertVerificationError as error:
        return str(error.verify_message or error.reason)
    except ssl.SSLError as error:
        return str(error.reason or error)
    return "the handshake did not complete"


def check_certificate(
    cert: bytes, key: bytes, ca: bytes | None, names: Sequence[str], now: datetime
) -> Served | Refused:
    """Whether ``cert`` (PEM, the leaf first) with ``key``, trusted through ``ca`` (PEM; None: the
    system's CAs, for a publicly trusted certificate), serves every one of ``names`` at ``now``."""
    try:
        leaf = _decoded(cert)
    except (ssl.SSLError, OSError, ValueError) as error:
        return Refused(Refusal.UNREADABLE, f"tls.crt holds no readable PEM certificate ({error})")
    try:
        server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        with _in_memory(cert) as cert_path, _in_memory(key) as key_path:
            server.load_cert_chain(cert_path, key_path)
    except ssl.SSLError as error:
        if "KEY_VALUES_MISMATCH" in str(error) or "key values mismatch" in str(error):
            return Refused(Refusal.KEY_MISMATCH, "tls.key is not the key of the certificate in tls.crt")
        return Refused(Refusal.UNREADABLE, f"tls.key holds no readable PEM private key ({error.reason})")
    dns_names = tuple(value for kind, value in leaf.get("subjectAltName", ()) if kind == "DNS")
    for decoded, whose in ((leaf, "the certificate"), *(_ca_dates(ca))):
        late = _dates(decoded, now, whose)
        if late is not None:
            return late
    missing = [name for name in names if not any(covers(pattern, name) for pattern in dns_names)]
    if missing:
        held = ", ".join(dns_names) or "none"
        return Refused(
            Refusal.NAMES_NOT_COVERED,
            f"the certificate's DNS names ({held}) do not cover {', '.join(missing)}",
        )
    refused = _handshake(cert, key, ca, names[0]) if names else None
    if refused is not None:
        trusted = "the CA in ca.crt" if ca is not None else "the system's CAs"
        return Refused(Refusal.UNTRUSTED, f"a client trusting {trusted} refuses it: {refused}")
    serial = str(leaf["serialNumber"]).lower()
    return Served(serial, _when(leaf["notBefore"]), _when(leaf["notAfter"]), dns_names)


def _ca_dates(ca: bytes | None) -> list[tuple[dict[str, Any], str]]:
    if ca is None:
        return []
    try:
        return [(_decoded(ca), "its CA (ca.crt)")]
    except (ssl.SSLError, OSError, ValueError):
        return []  # the handshake says why an unreadable CA is no CA
