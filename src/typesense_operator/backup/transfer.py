"""A snapshot up to storage and a backup down from it, so that a backup is only ever whole or absent.

Up: every file, then ``manifest.json`` last; a failure deletes what this upload wrote. Down: only a
backup with a manifest, every file checked against it, into a folder beside the target that is
renamed into place only when all is well. Removal: the manifest first, so that a removal cut short
leaves files no restore will take for a backup.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
from dataclasses import dataclass
from pathlib import Path

from typesense_operator.backup.manifest import MANIFEST, FileEntry, Manifest, ManifestError, mismatches
from typesense_operator.backup.storage import Storage, StorageError

__all__ = ["SnapshotFacts", "TransferError", "download", "read_manifest", "remove", "upload"]


class TransferError(Exception):
    """A backup could not be written, read or removed whole; the message says which file and why."""


@dataclass(frozen=True)
class SnapshotFacts:
    """What the operator knew of the node when it took the snapshot (for the manifest)."""

    node: str
    typesense_version: str
    collections: int
    documents: int
    taken_at: str


def _snapshot_files(snapshot: Path) -> list[Path]:
    if not snapshot.is_dir():
        raise TransferError(f"the snapshot {snapshot} is not a directory")
    return sorted(path for path in snapshot.rglob("*") if path.is_file())


async def upload(snapshot: Path, storage: Storage, facts: SnapshotFacts) -> Manifest:
    """Every file under ``snapshot`` to ``storage``, then the manifest; the manifest returned."""
    files = await asyncio.to_thread(_snapshot_files, snapshot)
    try:
        existing = await storage.get_bytes(MANIFEST)
    except StorageError as error:
        raise TransferError(f"upload failed, nothing written: {error}") from None
    if existing is not None:
        raise TransferError(f"{storage.description} already holds a backup: nothing was written")
    written: list[str] = []
    try:
        entries = []
        for path in files:
            key = path.relative_to(snapshot).as_posix()
            written.append(key)
            size, sha = await storage.put_file(key, path)
            entries.append(FileEntry(key, size, sha))
        manifest = Manifest(
            files=tuple(entries),
            typesense_version=facts.typesense_version,
            collections=facts.collections,
            documents=facts.documents,
            node=facts.node,
            taken_at=facts.taken_at,
        )
        await storage.put_bytes(MANIFEST, manifest.to_json().encode())
        return manifest
    except BaseException as error:
        # Nothing half is left behind: what this upload wrote goes (not the manifest: it is last).
        with contextlib.suppress(StorageError):
            await asyncio.shield(storage.delete(written))
        if isinstance(error, StorageError):
            raise TransferError(f"upload failed, nothing kept: {error}") from None
        raise


async def read_manifest(storage: Storage) -> Manifest:
    """The backup's manifest; a :class:`TransferError` if there is none (no whole backup there) or it
    cannot be trusted."""
    try:
        text = await storage.get_bytes(MANIFEST)
    except StorageError as error:
        raise TransferError(str(error)) from None
    if text is None:
        raise TransferError(f"{storage.description} holds no {MANIFEST}: there is no whole backup there")
    try:
        return Manifest.parse(text)
    except ManifestError as error:
        raise TransferError(f"{storage.description}: {error}") from None


async def download(storage: Storage, into: Path) -> Manifest:
    """The backup in ``storage`` into the new directory ``into``, every file checked; ``into``
    appears whole or not at all."""
    manifest = await read_manifest(storage)
    partial = into.with_name(into.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    try:
        found: dict[str, tuple[int, str]] = {}
        for entry in manifest.files:
            target = partial / entry.path
            target.parent.mkdir(parents=True, exist_ok=True)
            found[entry.path] = await storage.get_file(entry.path, target)
        problems = mismatches(manifest, found)
        if problems:
            raise TransferError(
                f"{storage.description} does not match its manifest: "
                + "; ".join(problems[:5])
                + (f" (and {len(problems) - 5} more)" if len(problems) > 5 else "")
            )
        partial.rename(into)
    except StorageError as error:
        shutil.rmtree(partial, ignore_errors=True)
        raise TransferError(f"download failed, nothing kept: {error}") from None
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    return manifest


async def remove(storage: Storage) -> int:
    """Every object of the backup, the manifest first; how many were removed."""
    try:
        keys = await storage.keys()
        if MANIFEST in keys:
            await storage.delete([MANIFEST])
        rest = [key for key in keys if key != MANIFEST]
        await storage.delete(rest)
    except StorageError as error:
        raise TransferError(f"removal failed: {error}") from None
    return len(keys)
