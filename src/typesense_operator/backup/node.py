"""Asking one Typesense node for a snapshot, and for what goes into the manifest beside it (its
version, its collections and documents). A thin HTTP adapter over the quorum probes' addressing
(straight to the pod, or through the API server's pod proxy): nothing here decides."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from typesense_operator.quorum.probe import API_KEY_HEADER, NodeAddressing, NodeTarget, Unreachable

__all__ = ["SnapshotFailed", "SnapshotTaken", "take_snapshot"]


class SnapshotFailed(Exception):
    """The node gave no snapshot; the message says what it answered (never the key)."""


@dataclass(frozen=True)
class SnapshotTaken:
    """What the node said of itself just before its snapshot was taken."""

    typesense_version: str
    collections: int
    documents: int


def _parsed(body: bytes) -> Any:
    try:
        return json.loads(body)
    except ValueError:
        return None


async def _ask(
    addressing: NodeAddressing, method: str, target: NodeTarget, path: str, api_key: str, timeout: float
) -> Any:
    request = addressing.post if method == "POST" else addressing.get
    asked = f"{method} {path.split('?')[0]}"
    try:
        code, body = await request(target, path, {API_KEY_HEADER: api_key}, timeout)
    except Unreachable as error:
        raise SnapshotFailed(f"pod {target.pod} did not answer {asked}: {error}") from None
    answer = _parsed(body)
    if code not in (200, 201):
        said = answer.get("message") if isinstance(answer, dict) else body[:200].decode(errors="replace")
        raise SnapshotFailed(f"pod {target.pod} answered {asked} with HTTP {code}: {said}")
    return answer


async def take_snapshot(
    addressing: NodeAddressing, target: NodeTarget, api_key: str, snapshot_path: str, *, timeout: float = 300
) -> SnapshotTaken:
    """Count the node's collections and documents, then have it write a snapshot to
    ``snapshot_path`` (a folder of its own data volume). Documents written between the count and the
    snapshot are in the snapshot, not in the count."""
    debug = await _ask(addressing, "GET", target, "/debug", api_key, 10)
    collections = await _ask(addressing, "GET", target, "/collections", api_key, 30)
    if not isinstance(collections, list):
        raise SnapshotFailed(f"pod {target.pod} answered GET /collections with something that is not a list")
    documents = sum(int(c.get("num_documents") or 0) for c in collections if isinstance(c, dict))
    path = f"/operations/snapshot?snapshot_path={quote(snapshot_path, safe='/')}"
    answer = await _ask(addressing, "POST", target, path, api_key, timeout)
    if not (isinstance(answer, dict) and answer.get("success") is True):
        raise SnapshotFailed(f"pod {target.pod} did not confirm the snapshot: {answer!r}")
    version = str(debug.get("version") or "unknown") if isinstance(debug, dict) else "unknown"
    return SnapshotTaken(typesense_version=version, collections=len(collections), documents=documents)
