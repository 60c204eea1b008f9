"""``typesense-backup`` against a real S3-compatible server (versitygw over HTTPS, its own CA) and a
directory, as the backup Job and a restoring pod run it: a snapshot goes up with its manifest last and
comes back whole and checked; a wrong secret, an unreachable endpoint, a corrupted object and a
missing manifest each fail with a reason, leave nothing behind, and never show a credential."""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import subprocess
import sys
import time
from pathlib import Path

import pytest

from operator_testkit.controlplane import free_port
from operator_testkit.s3 import RunningS3
from typesense_operator.backup.command import RESTORED_MARKER, s3_settings
from typesense_operator.backup.manifest import MANIFEST, Manifest
from typesense_operator.backup.storage import DirectoryStorage, S3Settings, S3Storage, Storage
from typesense_operator.backup.transfer import SnapshotFacts, TransferError, download, remove, upload

FACTS = SnapshotFacts(
    node="search-sts-1", typesense_version="29.0", collections=2, documents=3, taken_at="2026-11-25T23:00:00Z"
)


def environment(server: RunningS3, **overrides: str) -> dict[str, str]:
    """What the backup Job's container gets: the endpoint, the region, the credentials from the Secret
    and the CA, under AWS's names."""
    return {**server.aws_environment(), **overrides}


def settings(server: RunningS3, **overrides: str) -> S3Settings:
    found = s3_settings(environment(server, **overrides))
    assert found is not None
    return found


@pytest.fixture
def snapshot(tmp_path: Path) -> Path:
    """A snapshot as Typesense lays one out: nested folders, small files and a big one (11 MiB)."""
    root = tmp_path / "snapshot"
    raft = root / "state" / "snapshot" / "snapshot_00000000000000000007"
    (raft / "db_snapshot").mkdir(parents=True)
    (raft / "__raft_snapshot_meta").write_bytes(b"meta" * 30)
    (raft / "db_snapshot" / "CURRENT").write_text("MANIFEST-000001\n")
    (raft / "db_snapshot" / "000012.sst").write_bytes(os.urandom(11 * 1024 * 1024))
    (root / "state" / "meta").mkdir()
    (root / "state" / "meta" / "raft_meta").write_bytes(b"term 3")
    return root


def files_of(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


async def objects(storage: Storage) -> list[str]:
    return await storage.keys()


async def test_a_snapshot_goes_up_in_parts_with_its_manifest_last_and_comes_back_whole(
    s3_server: RunningS3, bucket: str, snapshot: Path, tmp_path: Path
) -> None:
    storage = S3Storage(settings(s3_server), bucket, "default/search/nightly-1")
    storage.part_size = 5 * 1024 * 1024  # the 11 MiB file goes up in three parts
    try:
        manifest = await upload(snapshot, storage, FACTS)
        assert sorted(await objects(storage)) == sorted([*files_of(snapshot), MANIFEST])
        stored = Manifest.parse(await storage.get_bytes(MANIFEST) or b"")
        assert stored == manifest
        assert (stored.node, stored.collections, stored.documents) == ("search-sts-1", 2, 3)
        assert stored.size == sum(len(data) for data in files_of(snapshot).values())
        restored = await download(storage, tmp_path / "restored")
        assert restored == manifest
        assert files_of(tmp_path / "restored") == files_of(snapshot)
        with pytest.raises(TransferError, match="already holds a backup: nothing was written"):
            await upload(snapshot, storage, FACTS)
        assert await remove(storage) == len(files_of(snapshot)) + 1
        assert await objects(storage) == []
    finally:
        await storage.aclose()


async def test_a_wrong_secret_fails_with_the_servers_reason_and_leaves_nothing(
    s3_server: RunningS3, bucket: str, snapshot: Path
) -> None:
    wrong = "wrong-" + secrets.token_hex(8)
    storage = S3Storage(settings(s3_server, AWS_SECRET_ACCESS_KEY=wrong), bucket, "default/search/bad")
    try:
        with pytest.raises(TransferError) as failed:
            await upload(snapshot, storage, FACTS)
    finally:
        await storage.aclose()
    message = str(failed.value)
    assert "SignatureDoesNotMatch (HTTP 403)" in message
    assert f"s3://{bucket}/default/search/bad at {s3_server.endpoint}" in message
    assert wrong not in message
    assert s3_server.secret_key not in message
    good = S3Storage(settings(s3_server), bucket, "default/search/bad")
    try:
        assert await objects(good) == []
    finally:
        await good.aclose()


async def test_an_upload_cut_off_midway_leaves_no_half_backup(
    s3_server: RunningS3, bucket: str, snapshot: Path
) -> None:
    """The server goes away after the first files: the manifest was never written, and what was
    written is deleted once it can be (here: by the next attempt's clean-up, once it is back)."""
    storage = S3Storage(settings(s3_server), bucket, "default/search/cut")
    (snapshot / "zz-last").write_bytes(b"last")
    original = storage.put_file
    calls = 0

    async def failing_after_two(key: str, path: Path) -> tuple[int, str]:
        nonlocal calls
        calls += 1
        if calls > 2:
            raise asyncio.CancelledError
        return await original(key, path)

    storage.put_file = failing_after_two  # type: ignore[method-assign]
    try:
        with pytest.raises(asyncio.CancelledError):
            await upload(snapshot, storage, FACTS)
        assert await storage.get_bytes(MANIFEST) is None
        assert await objects(storage) == [], "what the cut-off upload wrote was deleted"
    finally:
        await storage.aclose()


async def test_a_corrupted_object_or_a_missing_manifest_is_never_restored(
    s3_server: RunningS3, bucket: str, snapshot: Path, tmp_path: Path
) -> None:
    storage = S3Storage(settings(s3_server), bucket, "default/search/corrupt")
    try:
        await upload(snapshot, storage, FACTS)
        current = "state/snapshot/snapshot_00000000000000000007/db_snapshot/CURRENT"
        await storage.put_bytes(current, b"MANIFEST-000002\n")
        with pytest.raises(TransferError, match=f"does not match its manifest: {current}: sha256"):
            await download(storage, tmp_path / "restored")
        assert not (tmp_path / "restored").exists()
        assert not (tmp_path / "restored.partial").exists()
        await storage.delete([MANIFEST])
        with pytest.raises(TransferError, match=r"holds no manifest\.json: there is no whole backup there"):
            await download(storage, tmp_path / "restored")
    finally:
        await storage.aclose()


async def test_an_unreachable_endpoint_fails_within_seconds(s3_server: RunningS3, snapshot: Path) -> None:
    closed = f"https://127.0.0.1:{free_port()}"
    storage = S3Storage(settings(s3_server, AWS_ENDPOINT_URL_S3=closed), "backups", "x")
    started = time.monotonic()
    try:
        with pytest.raises(TransferError, match=f"Could not connect to the endpoint URL.*{closed}"):
            await upload(snapshot, storage, FACTS)
    finally:
        await storage.aclose()
    assert time.monotonic() - started < 20


async def test_a_volume_destination_works_the_same(snapshot: Path, tmp_path: Path) -> None:
    storage = DirectoryStorage(tmp_path / "volume" / "default" / "search" / "nightly-1")
    manifest = await upload(snapshot, storage, FACTS)
    assert await download(storage, tmp_path / "restored") == manifest
    assert files_of(tmp_path / "restored") == files_of(snapshot)
    await remove(storage)
    assert not (tmp_path / "volume" / "default" / "search" / "nightly-1").exists(), (
        "its emptied folder goes too"
    )


def run_command(*arguments: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "typesense_operator.backup.command", *arguments],
        env={"PATH": os.environ["PATH"], **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_command_uploads_restores_into_an_empty_data_directory_once_and_says_what_it_did(
    s3_server: RunningS3, bucket: str, snapshot: Path, tmp_path: Path
) -> None:
    location = f"s3://{bucket}/default/search/cli"
    env = environment(s3_server)
    expected = files_of(snapshot)
    result = tmp_path / "result.json"
    up = run_command(
        "--result", str(result), "upload", "--snapshot", str(snapshot), "--to", location,
        "--node", "search-sts-1", "--typesense-version", "29.0", "--collections", "2",
        "--documents", "3", "--taken-at", "2026-11-25T23:00:00Z",
        env=env,
    )  # fmt: skip
    assert up.returncode == 0, up.stderr
    assert '"files": 4' in up.stdout
    assert result.read_text() == up.stdout
    assert not snapshot.exists(), "the snapshot is removed from the node's volume once it is up"

    data = tmp_path / "data"
    data.mkdir()
    down = run_command("restore", "--from", location, "--data-dir", str(data), env=env)
    assert down.returncode == 0, down.stderr
    assert {k: v for k, v in files_of(data).items() if k != RESTORED_MARKER} == expected
    again = run_command("restore", "--from", location, "--data-dir", str(data), env=env)
    assert again.returncode == 0
    assert '"restored": false' in again.stdout, "a restarted pod does not restore twice"

    live = tmp_path / "live"
    live.mkdir()
    (live / "db").mkdir()
    refused = run_command("restore", "--from", location, "--data-dir", str(live), env=env)
    not_typesense = run_command(
        "upload", "--snapshot", str(tmp_path), "--to", location + "-2", "--node", "n",
        "--typesense-version", "29.0", "--collections", "0", "--documents", "0", "--taken-at", "t",
        env=env,
    )  # fmt: skip
    assert not_typesense.returncode == 1
    assert "is not a Typesense snapshot: it has no state/meta/raft_meta" in not_typesense.stderr
    assert refused.returncode == 1
    assert refused.stderr.strip().endswith("a backup goes only into an empty one")

    wrong = run_command("remove", "--location", location, env={**env, "AWS_SECRET_ACCESS_KEY": "nope-nope"})
    assert wrong.returncode == 1
    assert wrong.stderr.count("\n") == 1, "one line"
    assert "SignatureDoesNotMatch" in wrong.stderr
    assert "nope-nope" not in wrong.stderr + wrong.stdout
    gone = run_command("remove", "--location", location, env=env)
    assert gone.returncode == 0, gone.stderr
    assert '"removed": 5' in gone.stdout


def test_an_upload_that_keeps_failing_stops_after_its_attempts_and_leaves_nothing_anywhere(
    s3_server: RunningS3, bucket: str, snapshot: Path, tmp_path: Path
) -> None:
    result = tmp_path / "result.json"
    failed = run_command(
        "--result", str(result), "upload", "--snapshot", str(snapshot), "--to", f"s3://{bucket}/x/y/z",
        "--node", "search-sts-1", "--typesense-version", "29.0", "--collections", "2",
        "--documents", "3", "--taken-at", "2026-11-25T23:00:00Z", "--attempts", "2",
        env=environment(s3_server, AWS_SECRET_ACCESS_KEY="nope-nope"),
    )  # fmt: skip
    assert failed.returncode == 1
    assert "attempt 1 failed" in failed.stderr, "each attempt but the last says it is tried again"
    assert "2 attempts failed; the last: " in failed.stderr
    assert "SignatureDoesNotMatch" in failed.stderr
    assert "nope-nope" not in failed.stderr + result.read_text()
    assert json.loads(result.read_text())["attempts"] == 2
    assert not snapshot.exists(), "the last attempt removes the snapshot from the node all the same"
    assert not any((s3_server.storage / bucket).rglob("*.*")), "nothing in the bucket"
