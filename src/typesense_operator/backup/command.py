"""``typesense-backup``: what the backup Job and a restoring pod run (this suite's own image).

- ``upload --snapshot DIR --to LOCATION --node POD ...``: a snapshot's files, then its manifest;
  the snapshot directory is removed afterwards (``--keep-snapshot`` keeps it);
- ``restore --from LOCATION --data-dir DIR``: a backup into an empty Typesense data directory,
  every file checked; a data directory that holds anything is left alone;
- ``remove --location LOCATION``: a backup's objects, its manifest first.

LOCATION is ``s3://bucket/prefix`` or a directory (a mounted volume). S3 is configured by the
variables AWS's tools read: ``AWS_ENDPOINT_URL_S3`` (or ``AWS_ENDPOINT_URL``), ``AWS_REGION`` (or
``AWS_DEFAULT_REGION``), ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY`` and ``AWS_CA_BUNDLE`` (trusted
besides the system's CAs). What was done is printed as one JSON line, and written to ``--result``
(the pod's termination message by default, where the operator reads it). A failure is one line on
standard error and exit code 1; credentials never appear in either.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

from typesense_operator.backup.storage import S3Settings, StorageError, open_storage
from typesense_operator.backup.transfer import SnapshotFacts, TransferError, download, remove, upload

__all__ = ["main"]

TERMINATION_LOG = Path("/dev/termination-log")
RESTORED_MARKER = ".restored-from"
"""Written into a data directory a backup was restored into: a restarted pod does not restore again."""
RETRY_SECONDS = 2.0
"""The wait before an upload's second attempt (twice that before the third, and so on)."""
_STAGING = (".restoring", ".restoring.partial")
"""Where a restore downloads to (``download`` writes the second, then renames it to the first)."""


def s3_settings(environment: dict[str, str]) -> S3Settings | None:
    """The S3 settings in ``environment``, or None when no credentials are set."""
    access, secret = environment.get("AWS_ACCESS_KEY_ID"), environment.get("AWS_SECRET_ACCESS_KEY")
    if not access or not secret:
        return None
    bundle = environment.get("AWS_CA_BUNDLE")
    return S3Settings(
        endpoint=environment.get("AWS_ENDPOINT_URL_S3") or environment.get("AWS_ENDPOINT_URL") or None,
        region=environment.get("AWS_REGION") or environment.get("AWS_DEFAULT_REGION") or "us-east-1",
        access_key=access,
        secret_key=secret,
        ca_bundle=Path(bundle) if bundle else None,
    )


def check_typesense_snapshot(snapshot: Path) -> None:
    """Refuse a folder that is not a whole Typesense snapshot: typesense-server 0.24.1 confirms a
    snapshot whose copy into ``snapshot_path`` failed (it does not check the copy), so the folder is
    looked at before anything goes up: raft's meta, and a raft snapshot with its meta file."""
    if not (snapshot / "state" / "meta" / "raft_meta").is_file():
        raise TransferError(f"{snapshot} is not a Typesense snapshot: it has no state/meta/raft_meta")
    if not any((snapshot / "state" / "snapshot").glob("snapshot_*/__raft_snapshot_meta")):
        raise TransferError(f"{snapshot} is not a whole Typesense snapshot: no state/snapshot/snapshot_*")


class AttemptsFailed(TransferError):
    """Every attempt of an upload failed; the message is the last one's reason."""

    def __init__(self, attempts: int, reason: str) -> None:
        super().__init__(f"{attempts} attempts failed; the last: {reason}")
        self.attempts = attempts


async def _upload(arguments: argparse.Namespace, s3: S3Settings | None) -> dict[str, Any]:
    """The attempts are made here, not by the Job's pod retries: only the last attempt may remove the
    snapshot from the node's volume, and it always does (a failed backup leaves nothing on the node)."""
    facts = SnapshotFacts(
        node=arguments.node,
        typesense_version=arguments.typesense_version,
        collections=arguments.collections,
        documents=arguments.documents,
        taken_at=arguments.taken_at,
    )
    # A folder that is not a Typesense snapshot is refused before anything, and never removed: it
    # may be anything.
    await asyncio.to_thread(check_typesense_snapshot, arguments.snapshot)
    try:
        for attempt in range(1, arguments.attempts + 1):
            try:
                async with open_storage(arguments.to, s3) as storage:
                    manifest = await upload(arguments.snapshot, storage, facts)
                break
            except (TransferError, StorageError) as error:
                if attempt == arguments.attempts:
                    raise AttemptsFailed(attempt, str(error)) from None
                print(f"typesense-backup: attempt {attempt} failed: {error}; trying again", file=sys.stderr)
                await asyncio.sleep(RETRY_SECONDS * attempt)
    finally:
        if not arguments.keep_snapshot:
            shutil.rmtree(arguments.snapshot, ignore_errors=True)
    return {
        "location": arguments.to,
        "files": len(manifest.files),
        "size": manifest.size,
        "attempts": attempt,
    }


async def _restore(arguments: argparse.Namespace, s3: S3Settings | None) -> dict[str, Any]:
    data: Path = arguments.data_dir
    before = _restored_before(data)
    if before is not None:
        return {"location": before, "restored": False, "reason": "restored before"}
    staging = data / _STAGING[0]
    async with open_storage(arguments.source, s3) as storage:
        manifest = await download(storage, staging)
    _move_into_place(staging, data, arguments.source)
    return {
        "location": arguments.source,
        "restored": True,
        "files": len(manifest.files),
        "size": manifest.size,
    }


def _restored_before(data: Path) -> str | None:
    """Where ``data`` was restored from before, or None for an empty one; a :class:`TransferError` for a
    data directory that holds anything else (a live node's data is never overwritten)."""
    marker = data / RESTORED_MARKER
    if marker.exists():
        return marker.read_text().strip()
    for leftover in _STAGING:  # a restore cut short (its process killed): never a whole backup
        shutil.rmtree(data / leftover, ignore_errors=True)
    # A new ext4 volume comes with lost+found: it is empty all the same.
    if data.exists() and any(entry.name != "lost+found" for entry in data.iterdir()):
        raise TransferError(f"the data directory {data} is not empty: a backup goes only into an empty one")
    return None


def _move_into_place(staging: Path, data: Path, source: str) -> None:
    for entry in staging.iterdir():
        entry.rename(data / entry.name)
    staging.rmdir()
    (data / RESTORED_MARKER).write_text(source + "\n")


async def _remove(arguments: argparse.Namespace, s3: S3Settings | None) -> dict[str, Any]:
    async with open_storage(arguments.location, s3) as storage:
        removed = await remove(storage)
    return {"location": arguments.location, "removed": removed}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="typesense-backup", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--result", type=Path, help="also write the result here (default: the termination log)"
    )
    commands = parser.add_subparsers(dest="command", required=True)
    up = commands.add_parser("upload", help="a snapshot's files, then its manifest")
    up.add_argument("--snapshot", type=Path, required=True)
    up.add_argument("--to", required=True, help="s3://bucket/prefix or a directory")
    up.add_argument("--node", required=True, help="the pod whose snapshot this is")
    up.add_argument("--typesense-version", required=True)
    up.add_argument("--collections", type=int, required=True)
    up.add_argument("--documents", type=int, required=True)
    up.add_argument("--taken-at", required=True, help="RFC 3339")
    up.add_argument("--keep-snapshot", action="store_true")
    up.add_argument("--attempts", type=int, default=3, help="uploads tried before giving up (default 3)")
    up.set_defaults(run=_upload)
    down = commands.add_parser("restore", help="a backup into an empty data directory")
    down.add_argument("--from", dest="source", required=True)
    down.add_argument("--data-dir", type=Path, required=True)
    down.set_defaults(run=_restore)
    gone = commands.add_parser("remove", help="a backup's objects, its manifest first")
    gone.add_argument("--location", required=True)
    gone.set_defaults(run=_remove)
    return parser


def _write_result(path: Path | None, text: str) -> None:
    target = path or (TERMINATION_LOG if os.access(TERMINATION_LOG, os.W_OK) else None)
    if target is not None:
        target.write_text(text + "\n")


def main(argv: list[str] | None = None) -> int:
    arguments = _parser().parse_args(argv)
    try:
        result = asyncio.run(arguments.run(arguments, s3_settings(dict(os.environ))))
    except (TransferError, StorageError) as error:
        message = f"typesense-backup: {arguments.command} failed: {error}"
        print(message, file=sys.stderr)
        attempts = {"attempts": error.attempts} if isinstance(error, AttemptsFailed) else {}
        _write_result(arguments.result, json.dumps({"error": str(error), **attempts}))
        return 1
    except KeyboardInterrupt:
        print(f"typesense-backup: {arguments.command} interrupted; nothing half was kept", file=sys.stderr)
        return 130
    text = json.dumps(result, sort_keys=True)
    print(text)
    _write_result(arguments.result, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
