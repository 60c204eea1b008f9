"""The suite's error tree, and the one place where it is drawn.

::

    OperatorError                   anything this suite raises on purpose
    ├── KubeError                   a Kubernetes API call failed (wraps the client error once)
    │   ├── NotFound                404
    │   ├── Conflict                409: stale resourceVersion or a server-side apply field conflict
    │   ├── Invalid                 422: rejected by the schema, a CEL rule or admission
    │   └── Forbidden               403: RBAC said no
    ├── CRDGenerationError          a model cannot become a structural CRD schema
    └── ControlPlaneError           the local test control plane failed to build, start or stop

Handlers map these to kopf's temporary or permanent errors at their edge only
(see each operator's ``controller`` room); nothing below the edge imports kopf.
Messages never carry Secret values: :mod:`operator_core.secrets` scrubs them
before an error is built from server text.
"""

from __future__ import annotations

__all__ = [
    "CRDGenerationError",
    "Conflict",
    "ControlPlaneError",
    "Forbidden",
    "Invalid",
    "KubeError",
    "NotFound",
    "OperatorError",
]


class OperatorError(Exception):
    """Base of every error this suite raises on purpose."""


class KubeError(OperatorError):
    """A Kubernetes API call failed. ``status`` is the HTTP code, ``reason`` the API's reason word."""

    def __init__(self, message: str, *, status: int = 0, reason: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason


class NotFound(KubeError):
    """The object (or its kind) does not exist."""


class Conflict(KubeError):
    """A write lost a race (stale resourceVersion) or a server-side apply field conflict."""


class Invalid(KubeError):
    """The API server refused the object: schema, CEL rule or admission."""


class Forbidden(KubeError):
    """RBAC denied the call."""


class CRDGenerationError(OperatorError):
    """A pydantic model cannot be turned into a structural CRD schema."""


class ControlPlaneError(OperatorError):
    """The local control plane could not be built, started, or stopped."""
