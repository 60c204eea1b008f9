"""The restricted Pod Security Standard, as pod and container security contexts.

Every pod the operator asks for (Elasticsearch, API, crawler, the
update-idents Job) passes a namespace labelled
``pod-security.kubernetes.io/enforce: restricted``.
"""

from __future__ import annotations

from typing import Any

__all__ = ["restricted_container", "restricted_pod"]


def restricted_pod(uid: int) -> dict[str, Any]:
    """A pod context that runs as ``uid``; fsGroup makes mounted volumes writable by it."""
    return {
        "runAsNonRoot": True,
        "runAsUser": uid,
        "runAsGroup": uid,
        "fsGroup": uid,
        "fsGroupChangePolicy": "OnRootMismatch",
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def restricted_container() -> dict[str, Any]:
    return {
        "allowPrivilegeEscalation": False,
        "runAsNonRoot": True,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }
