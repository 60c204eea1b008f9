"""A private registry's CA bundle is trusted besides the system's CAs, not instead of them."""

from __future__ import annotations

import ssl
from pathlib import Path

from clusterstack_operator.sources.http import trusting
from operator_testkit.webhooks import serving_certificates


def test_a_ca_bundle_adds_to_the_systems_cas(tmp_path: Path) -> None:
    system = ssl.create_default_context().cert_store_stats()["x509_ca"]
    assert system > 0, "this machine has system CAs (Debian's ca-certificates)"
    bundle = serving_certificates(tmp_path) / "ca.crt"
    assert trusting(bundle).cert_store_stats()["x509_ca"] == system + 1
