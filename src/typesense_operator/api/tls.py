"""spec.tls and status.tls of a TypesenseCluster: where its API's certificate comes from, and which one
its nodes serve (docs/typesense-tls.md)."""

from __future__ import annotations

from datetime import datetime

from pydantic import ConfigDict, Field

from operator_core.apimodel import ApiModel, cel

__all__ = ["CertificateSecretReference", "IssuerReference", "TlsSpec", "TlsStatus"]


class CertificateSecretReference(ApiModel):
    """A Secret in the cluster's namespace holding the certificate."""

    name: str = Field(min_length=1, max_length=253)
    """Name of the Secret: a kubernetes.io/tls Secret with tls.crt (the certificate, then its chain) and
    tls.key, and ca.crt (the CA that signs it) unless a public CA does."""


class IssuerReference(ApiModel):
    """A cert-manager issuer the operator asks for the certificate (it makes a Certificate)."""

    name: str = Field(min_length=1, max_length=253)
    """Name of the Issuer (in the cluster's namespace) or ClusterIssuer."""
    kind: str = Field(default="Issuer", min_length=1, max_length=63)
    """Issuer, ClusterIssuer, or the kind of an external issuer."""
    group: str = Field(default="cert-manager.io", min_length=1, max_length=253)
    """The issuer's API group: cert-manager.io, or an external issuer's."""


class TlsSpec(ApiModel):
    """The REST API served over HTTPS (the raft peering port stays plain: Typesense has no TLS for it).
    Setting it on a running cluster, or removing it, rolls the nodes one at a time, the leader last."""

    certificate_secret: CertificateSecretReference | None = None
    """A certificate you manage, in a kubernetes.io/tls Secret. It must cover the client Service's names
    and every node's name under the headless Service (<pod>.<cluster>-sts-svc.<namespace>.svc), for
    example with a wildcard *.<cluster>-sts-svc.<namespace>.svc."""
    issuer_ref: IssuerReference | None = None
    """A cert-manager issuer: the operator makes a Certificate, <cluster>-tls, for every name the
    nodes are reached by, into the Secret <cluster>-tls, and follows its renewals."""
    refresh_interval_seconds: int = Field(default=30, ge=5, le=3600)
    """How often each node reads its certificate files again: a renewed certificate is served within
    this many seconds of the kubelet updating the files (which the operator hurries), with no restart."""
    expiry_warning_days: int = Field(default=14, ge=1, le=365)
    """Days before the served certificate's expiry from which the CertificateReady condition says
    ExpiresSoon and a Warning Event is posted."""

    model_config = ConfigDict(
        json_schema_extra=cel(
            (
                "has(self.certificateSecret) != has(self.issuerRef)",
                "tls takes exactly one of certificateSecret and issuerRef",
            )
        )
    )


class TlsStatus(ApiModel):
    """The certificate the nodes are given (the operator's checked copy, <cluster>-tls-served)."""

    secret: str | None = None
    """The Secret it was read from."""
    serial: str | None = None
    """Its serial number, in lower-case hex."""
    not_after: datetime | None = None
    """When it expires."""
    dns_names: list[str] | None = None
    """The DNS names it covers."""
