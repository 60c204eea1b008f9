"""What a backup holds (``manifest.json``), written last so that its presence means the backup is
whole, and read back with every field checked. Pure."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import PurePosixPath
from typing import Any

__all__ = ["MANIFEST", "FileEntry", "Manifest", "ManifestError", "mismatches"]

MANIFEST = "manifest.json"
FORMAT = 1


class ManifestError(ValueError):
    """A manifest that cannot be trusted: not JSON, a field missing or wrong, or a path that would
    leave the backup's directory."""


@dataclass(frozen=True)
class FileEntry:
    """One file of the snapshot: its path inside it, size in bytes and sha256 (hex)."""

    path: str
    size: int
    sha256: str


@dataclass(frozen=True)
class Manifest:
    """A backup's contents and what Typesense said about them when it was taken."""

    files: tuple[FileEntry, ...]
    typesense_version: str
    collections: int
    documents: int
    node: str
    """The pod whose snapshot this is."""
    taken_at: str
    """When the snapshot was taken (RFC 3339, UTC)."""
    format: int = FORMAT
    extra: dict[str, Any] = field(default_factory=dict)
    """Fields a newer writer added, kept as read."""

    @property
    def size(self) -> int:
        return sum(entry.size for entry in self.files)

    def to_json(self) -> str:
        document = asdict(self)
        extra = document.pop("extra")
        document["files"] = [asdict(entry) for entry in self.files]
        return json.dumps({**extra, **document}, indent=2, sort_keys=True) + "\n"

    @classmethod
    def parse(cls, text: str | bytes) -> Manifest:
        try:
            document = json.loads(text)
        except ValueError as error:
            raise ManifestError(f"{MANIFEST} is not JSON: {error}") from None
        if not isinstance(document, dict):
            raise ManifestError(f"{MANIFEST} is not a JSON object")
        if document.get("format") != FORMAT:
            found = document.get("format")
            raise ManifestError(f"{MANIFEST} has format {found!r}; this version reads {FORMAT}")
        known = {"files", "typesense_version", "collections", "documents", "node", "taken_at", "format"}
        try:
            files = tuple(_entry(item) for item in document["files"])
            manifest = cls(
                files=files,
                typesense_version=_text(document, "typesense_version"),
                collections=_count(document, "collections"),
                documents=_count(document, "documents"),
                node=_text(document, "node"),
                taken_at=_text(document, "taken_at"),
                extra={k: v for k, v in document.items() if k not in known},
            )
        except KeyError as error:
            raise ManifestError(f"{MANIFEST} lacks {error.args[0]!r}") from None
        except TypeError as error:
            raise ManifestError(f"{MANIFEST}: {error}") from None
        if len({entry.path for entry in files}) != len(files):
            raise ManifestError(f"{MANIFEST} names a file twice")
        return manifest


def _text(document: dict[str, Any], key: str) -> str:
    value = document[key]
    if not isinstance(value, str):
        raise TypeError(f"{key} must be a string, not {type(value).__name__}")
    return value


def _count(document: dict[str, Any], key: str) -> int:
    value = document[key]
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise TypeError(f"{key} must be a count, not {value!r}")
    return value


def _entry(item: Any) -> FileEntry:
    if not isinstance(item, dict):
        raise TypeError("each of files must be an object")
    path = _text(item, "path")
    pure = PurePosixPath(path)
    # A path the restore would write outside the data directory is refused outright.
    if pure.is_absolute() or ".." in pure.parts or not pure.parts or path != pure.as_posix():
        raise TypeError(f"file path {path!r} is not a plain relative path")
    sha = _text(item, "sha256")
    if len(sha) != 64 or any(c not in "0123456789abcdef" for c in sha):
        raise TypeError(f"{path}: sha256 {sha!r} is not 64 lower-case hex digits")
    return FileEntry(path, _count(item, "size"), sha)


def mismatches(manifest: Manifest, found: dict[str, tuple[int, str]]) -> list[str]:
    """How the files found (path → (size, sha256)) differ from the manifest, one line each; empty
    when they are the same."""
    problems: list[str] = []
    for entry in manifest.files:
        if entry.path not in found:
            problems.append(f"{entry.path}: missing")
            continue
        size, sha = found[entry.path]
        if size != entry.size:
            problems.append(f"{entry.path}: {size} bytes, the manifest says {entry.size}")
        elif sha != entry.sha256:
            problems.append(f"{entry.path}: sha256 {sha[:12]}…, the manifest says {entry.sha256[:12]}…")
    expected = {entry.path for entry in manifest.files}
    problems.extend(f"{path}: not in the manifest" for path in sorted(set(found) - expected))
    return problems
