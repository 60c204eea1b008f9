"""A backup's manifest: written and read back the same, refused with a reason when it cannot be
trusted, and compared with the files a restore found."""

from __future__ import annotations

import json
from typing import Any

import pytest

from typesense_operator.backup.manifest import FileEntry, Manifest, ManifestError, mismatches

SHA_A = "a" * 64
SHA_B = "b" * 64
MANIFEST = Manifest(
    files=(
        FileEntry("state/snapshot/__raft_snapshot_meta", 120, SHA_A),
        FileEntry("db/000012.sst", 4096, SHA_B),
    ),
    typesense_version="29.0",
    collections=2,
    documents=1000,
    node="search-sts-1",
    taken_at="2026-11-25T23:00:00Z",
)


def document(**changes: Any) -> str:
    data = json.loads(MANIFEST.to_json())
    for key, value in changes.items():
        if value is None:
            data.pop(key)
        else:
            data[key] = value
    return json.dumps(data)


def test_a_manifest_reads_back_as_written_and_counts_its_size() -> None:
    assert Manifest.parse(MANIFEST.to_json()) == MANIFEST
    assert MANIFEST.size == 4216


def test_fields_a_newer_writer_added_are_kept() -> None:
    read = Manifest.parse(document(compression="none"))
    assert read.extra == {"compression": "none"}
    assert json.loads(read.to_json())["compression"] == "none"


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("not json", "is not JSON"),
        ("[]", "is not a JSON object"),
        (document(format=2), "has format 2; this version reads 1"),
        (document(documents=None), "lacks 'documents'"),
        (document(documents=-1), "documents must be a count"),
        (document(collections=True), "collections must be a count"),
        (document(node=3), "node must be a string"),
        (
            document(files=[{"path": "../etc/passwd", "size": 1, "sha256": SHA_A}]),
            "not a plain relative path",
        ),
        (document(files=[{"path": "/abs", "size": 1, "sha256": SHA_A}]), "not a plain relative path"),
        (document(files=[{"path": "a//b", "size": 1, "sha256": SHA_A}]), "not a plain relative path"),
        (document(files=[{"path": "a", "size": 1, "sha256": "ABC"}]), "is not 64 lower-case hex digits"),
        (
            document(
                files=[{"path": "a", "size": 1, "sha256": SHA_A}, {"path": "a", "size": 1, "sha256": SHA_A}]
            ),
            "names a file twice",
        ),
    ],
)
def test_a_manifest_that_cannot_be_trusted_is_refused_with_its_reason(text: str, reason: str) -> None:
    with pytest.raises(ManifestError, match=reason.replace("(", r"\(").replace(")", r"\)")):
        Manifest.parse(text)


@pytest.mark.parametrize(
    ("found", "problems"),
    [
        ({"state/snapshot/__raft_snapshot_meta": (120, SHA_A), "db/000012.sst": (4096, SHA_B)}, []),
        ({"state/snapshot/__raft_snapshot_meta": (120, SHA_A)}, ["db/000012.sst: missing"]),
        (
            {"state/snapshot/__raft_snapshot_meta": (120, SHA_A), "db/000012.sst": (10, SHA_B)},
            ["db/000012.sst: 10 bytes, the manifest says 4096"],
        ),
        (
            {"state/snapshot/__raft_snapshot_meta": (120, SHA_B), "db/000012.sst": (4096, SHA_B)},
            ["state/snapshot/__raft_snapshot_meta: sha256 bbbbbbbbbbbb…, the manifest says aaaaaaaaaaaa…"],
        ),
        (
            {
                "state/snapshot/__raft_snapshot_meta": (120, SHA_A),
                "db/000012.sst": (4096, SHA_B),
                "extra": (1, SHA_A),
            },
            ["extra: not in the manifest"],
        ),
    ],
)
def test_files_found_are_compared_with_the_manifest(
    found: dict[str, tuple[int, str]], problems: list[str]
) -> None:
    assert mismatches(MANIFEST, found) == problems
