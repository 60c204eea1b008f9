"""The restricted Pod Security Standard, as pod and container security contexts; pure.

Every pod the operators ask for passes a namespace labelled
``pod-security.kubernetes.io/enforce: restricted``. Who calls it: the operators'
``resources`` builders.
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
    """A container context: non-root, no privilege escalation, every capability dropped."""
    return {
        "allowPrivilegeEscalation": False,
        "runAsNonRoot": True,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }
