"""Certificates and keys for one local control plane.

One CA signs the API server's serving certificate and the admin client
certificate (group ``system:masters``); a separate RSA key signs
service-account tokens. Everything is written under the control plane's own
directory and lives only as long as it does.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["CertificateAuthority", "Pki", "ServerCertificate", "create_pki", "issue_client_certificate"]

_VALIDITY = datetime.timedelta(days=30)


@dataclass(frozen=True)
class Pki:
    """Paths of the files one control plane needs."""

    ca_cert: Path
    ca_key: Path
    serving_cert: Path
    serving_key: Path
    admin_cert: Path
    admin_key: Path
    service_account_key: Path
    service_account_public_key: Path


def _pem_key(key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _certificate(
    subject: x509.Name,
    public_key: ec.EllipticCurvePublicKey,
    issuer: x509.Name,
    signing_key: ec.EllipticCurvePrivateKey,
    *,
    is_ca: bool = False,
    usages: list[x509.ObjectIdentifier] | None = None,
    alt_names: list[x509.GeneralName] | None = None,
    not_before: datetime.datetime | None = None,
    not_after: datetime.datetime | None = None,
) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before or now - datetime.timedelta(minutes=5))
        .not_valid_after(not_after or now + _VALIDITY)
        .add_extension(x509.BasicConstraints(ca=is_ca, path_length=None), critical=True)
    )
    if is_ca:
        builder = builder.add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
    if usages:
        builder = builder.add_extension(x509.ExtendedKeyUsage(usages), critical=False)
    if alt_names:
        builder = builder.add_extension(x509.SubjectAlternativeName(alt_names), critical=False)
    return builder.sign(signing_key, hashes.SHA256())


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    path.chmod(0o600)
    return path


def _client(
    ca_name: x509.Name, ca_key: ec.EllipticCurvePrivateKey, common_name: str, organizations: tuple[str, ...]
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, group) for group in organizations]
    subject.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    certificate = _certificate(
        x509.Name(subject), key.public_key(), ca_name, ca_key, usages=[ExtendedKeyUsageOID.CLIENT_AUTH]
    )
    return certificate, key


def issue_client_certificate(
    pki: Pki, directory: Path, common_name: str, organizations: tuple[str, ...] = ()
) -> tuple[Path, Path]:
    """A client certificate and key signed by ``pki``'s CA, for user ``common_name`` in groups
    ``organizations`` (a kubelet is ``system:node:<name>`` in ``system:nodes``); their paths."""
    ca_key = serialization.load_pem_private_key(pki.ca_key.read_bytes(), password=None)
    ca = x509.load_pem_x509_certificate(pki.ca_cert.read_bytes())
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise TypeError(f"{pki.ca_key} is not the EC key this kit makes")
    certificate, key = _client(ca.subject, ca_key, common_name, organizations)
    directory.mkdir(parents=True, exist_ok=True)
    stem = common_name.replace(":", "-")
    return (
        _write(directory / f"{stem}.crt", certificate.public_bytes(serialization.Encoding.PEM)),
        _write(directory / f"{stem}.key", _pem_key(key)),
    )


def create_pki(directory: Path, *, service_ip: str, addresses: tuple[str, ...] = ()) -> Pki:
    """Create a CA, serving and admin certificates, and the service-account key pair in ``directory``.

    The serving certificate names 127.0.0.1, ``service_ip`` (the ``kubernetes`` Service) and any
    further ``addresses`` the API server is reached at (a real node's pods reach it on the machine's
    end of their link)."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "operator-suite-local-ca")])
    ca = _certificate(ca_name, ca_key.public_key(), ca_name, ca_key, is_ca=True)

    serving_key = ec.generate_private_key(ec.SECP256R1())
    serving = _certificate(
        x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")]),
        serving_key.public_key(),
        ca_name,
        ca_key,
        usages=[ExtendedKeyUsageOID.SERVER_AUTH],
        alt_names=[
            x509.DNSName("localhost"),
            x509.DNSName("kubernetes"),
            x509.DNSName("kubernetes.default"),
            x509.DNSName("kubernetes.default.svc"),
            x509.DNSName("kubernetes.default.svc.cluster.local"),
            x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
            x509.IPAddress(ipaddress.ip_address(service_ip)),
            *(x509.IPAddress(ipaddress.ip_address(address)) for address in addresses),
        ],
    )

    admin, admin_key = _client(ca_name, ca_key, "operator-suite-admin", ("system:masters",))

    sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = serialization.Encoding.PEM
    return Pki(
        ca_cert=_write(directory / "ca.crt", ca.public_bytes(pem)),
        ca_key=_write(directory / "ca.key", _pem_key(ca_key)),
        serving_cert=_write(directory / "apiserver.crt", serving.public_bytes(pem) + ca.public_bytes(pem)),
        serving_key=_write(directory / "apiserver.key", _pem_key(serving_key)),
        admin_cert=_write(directory / "admin.crt", admin.public_bytes(pem)),
        admin_key=_write(directory / "admin.key", _pem_key(admin_key)),
        service_account_key=_write(directory / "sa.key", _pem_key(sa_key)),
        service_account_public_key=_write(
            directory / "sa.pub",
            sa_key.public_key().public_bytes(pem, serialization.PublicFormat.SubjectPublicKeyInfo),
        ),
    )


@dataclass(frozen=True)
class ServerCertificate:
    """A server certificate and its key, in PEM, as a ``kubernetes.io/tls`` Secret holds them."""

    cert: bytes
    key: bytes
    serial: str
    """The serial number in hex (an even number of digits, as OpenSSL prints it)."""


@dataclass(frozen=True)
class CertificateAuthority:
    """A CA of its own, for tests of a server's TLS: it issues server certificates for DNS names."""

    name: x509.Name
    key: ec.EllipticCurvePrivateKey
    certificate: x509.Certificate

    @classmethod
    def create(
        cls,
        common_name: str = "test-ca",
        *,
        not_before: datetime.datetime | None = None,
        not_after: datetime.datetime | None = None,
    ) -> CertificateAuthority:
        key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
        certificate = _certificate(
            name, key.public_key(), name, key, is_ca=True, not_before=not_before, not_after=not_after
        )
        return cls(name, key, certificate)

    @property
    def pem(self) -> bytes:
        return self.certificate.public_bytes(serialization.Encoding.PEM)

    def issue(
        self,
        *dns_names: str,
        not_before: datetime.datetime | None = None,
        not_after: datetime.datetime | None = None,
    ) -> ServerCertificate:
        key = ec.generate_private_key(ec.SECP256R1())
        certificate = _certificate(
            x509.Name([]),
            key.public_key(),
            self.name,
            self.key,
            usages=[ExtendedKeyUsageOID.SERVER_AUTH],
            alt_names=[x509.DNSName(name) for name in dns_names],
            not_before=not_before,
            not_after=not_after,
        )
        serial = format(certificate.serial_number, "x")
        return ServerCertificate(
            certificate.public_bytes(serialization.Encoding.PEM),
            _pem_key(key),
            serial if len(serial) % 2 == 0 else f"0{serial}",
        )
