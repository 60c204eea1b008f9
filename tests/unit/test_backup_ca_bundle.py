"""A private CA for the S3 endpoint is trusted besides the system's CAs, not instead of them: the one
file botocore takes holds both, and is written where the process may write, not beside the bundle
(a mounted Secret, read-only)."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from typesense_operator.backup.storage import _with_system_cas


def test_the_bundle_and_the_systems_cas_go_into_one_file_of_the_scratch_folder(tmp_path: Path) -> None:
    paths = ssl.get_default_verify_paths()
    system = paths.cafile or paths.openssl_cafile
    if not system or not Path(system).is_file():
        pytest.fail(f"this machine has no system CA file ({paths}): the check needs one")
    mounted = tmp_path / "secret"
    mounted.mkdir()
    bundle = mounted / "ca.crt"
    bundle.write_text("-----BEGIN CERTIFICATE-----\nprivate\n-----END CERTIFICATE-----\n")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    combined = _with_system_cas(bundle, scratch)
    assert combined.parent == scratch
    assert sorted(p.name for p in mounted.iterdir()) == ["ca.crt"], "nothing written beside the bundle"
    text = combined.read_bytes()
    assert text.startswith(bundle.read_bytes())
    assert Path(system).read_bytes() in text
