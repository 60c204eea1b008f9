"""The suite's error tree, the one place where it is drawn, and the policy that says what each error costs.

::

    OperatorError                   anything this suite raises on purpose
    ├── KubeError                   a Kubernetes API call failed (wraps the client error once)
    │   ├── NotFound                404: the object, or its kind, does not exist
    │   ├── Conflict                409: stale resourceVersion or a server-side apply field conflict
    │   ├── Invalid                 422 (and 400): refused by the schema, a CEL rule or admission
    │   ├── Forbidden               403: RBAC said no
    │   ├── Unavailable             no answer: connection lost or refused, time-out, 429 or 5xx
    │   └── Expired                 410: a watch's resourceVersion is too old; the cache lists again
    ├── NotSynced                   a destructive step refused a watch cache that may be stale
    ├── Unwatchable                 RBAC forbids watching a kind a controller needs
    ├── PermanentError              only a change of the object (or of what it names) can fix this
    │   ├── InvalidSpec             the spec passed the CRD's schema but its model refuses it
    │   └── InvalidKubeconfig       a kubeconfig read from a Secret is malformed or would run a command
    ├── SettingsError               an OPERATOR_SUITE_* variable has a value the setting does not allow
    ├── StartFailed                 what an operator cannot start without is wrong (kubeconfig, token, CRD)
    └── CRDGenerationError          a model cannot become a structural CRD schema

(The test kit adds its own branch: ``operator_testkit.errors.ControlPlaneError``.)

The policy (:func:`retry_policy`), applied by the per-object loop of
:mod:`operator_core.reconciling`, and nowhere else:

- **permanent**: :class:`PermanentError` (a spec that fails its model's validation is
  raised as :class:`InvalidSpec`). The object's loop logs it once, the shared
  controller step sets Ready=False with one Warning, and the loop waits until the
  object changes; no timer retries it, because the same input fails the same way.
  A step that finds a Secret the spec names missing, or without the key it needs, is
  the same case without an exception: it sets its condition, stops the steps, and its
  reconcile returns :data:`operator_core.reconciling.WAIT_FOR_CHANGE`; the Secret's
  creation or change wakes the object.
- **temporary**: everything else, a bug included (:class:`Conflict`,
  :class:`Unavailable`, :class:`NotSynced`, :class:`Unwatchable`, :class:`Forbidden`, :class:`NotFound`,
  any other exception).
  The loop backs off (2, 5, 10, 30 s) and tries again; a bug is logged with its
  traceback. :class:`Invalid` is temporary too: a child the API server refuses is
  often fixed by someone else (a conflicting object of the same name removed), and
  nothing would wake the owner then.

The operators run their own loop per object (:func:`operator_core.reconciling.run_object_loop`);
:class:`StartFailed` is the runner's, never a reconcile's. Messages never carry Secret values:
:mod:`operator_core.secrets` scrubs server text before an error is built from it.
"""

from __future__ import annotations

import logging
from enum import Enum

__all__ = [
    "CRDGenerationError",
    "Conflict",
    "Expired",
    "Forbidden",
    "Invalid",
    "InvalidSpec",
    "KubeError",
    "NotFound",
    "NotSynced",
    "OperatorError",
    "PermanentError",
    "Retry",
    "SettingsError",
    "StartFailed",
    "Unavailable",
    "Unwatchable",
    "retry_log_level",
    "retry_policy",
    "said_already",
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


class Unavailable(KubeError):
    """The API server did not answer usefully: no connection, a time-out, too many requests, or a 5xx.

    ``outage``: no answer at all from an API server that answered before, which the client has said
    once in the log (:func:`said_already`); whoever retries it need not say it again."""

    def __init__(self, message: str, *, status: int = 0, reason: str = "", outage: bool = False) -> None:
        super().__init__(message, status=status, reason=reason)
        self.outage = outage


def said_already(error: BaseException) -> bool:
    """Whether the log has this error's cause already: an API server outage, said once when it began
    and once when it ended, not by every request and watch that retries meanwhile (they log at debug)."""
    return isinstance(error, Unavailable) and error.outage


def retry_log_level(error: BaseException) -> int:
    """The level at which a retried failure is logged: a warning, or debug when the log has its cause
    already (:func:`said_already`)."""
    return logging.DEBUG if said_already(error) else logging.WARNING


class Expired(KubeError):
    """410 Gone: a watch asked for a resourceVersion the API server no longer keeps; list again."""


class NotSynced(OperatorError):
    """A destructive step refused to act on a watch cache that may be stale (temporary)."""


class Unwatchable(OperatorError):
    """RBAC forbids listing or watching a kind that a controller needs (temporary: a rule may be
    granted). The shared controller step reports it on each object of that controller, Ready=False with
    reason WatchForbidden and one Warning; the other controllers go on."""


class PermanentError(OperatorError):
    """Retrying cannot help until the object, or something it names, changes."""


class InvalidSpec(PermanentError):
    """The spec passed the CRD's schema but its model refuses it."""


class InvalidKubeconfig(PermanentError):
    """A kubeconfig read from a Secret (a workload cluster's) is malformed, or would make this process
    run a command or read its own files; only a new Secret helps."""


class SettingsError(OperatorError):
    """An OPERATOR_SUITE_* variable holds a value its setting does not allow."""


class StartFailed(OperatorError):
    """An operator cannot start: its kubeconfig cannot be read, the API server does not answer or refuses
    its credentials, or one of its own kinds is not served. The process exits 1 with this message."""


class CRDGenerationError(OperatorError):
    """A pydantic model cannot be turned into a structural CRD schema."""


class Retry(Enum):
    """What an error costs the object's loop."""

    BACK_OFF = "back off"
    """Try again after a growing delay: the same call may succeed later."""
    WAIT_FOR_CHANGE = "wait for a change"
    """Do not try again until the object, or something it names or owns, changes."""


def retry_policy(error: BaseException) -> Retry:
    """The policy for one error; pure, table-tested."""
    if isinstance(error, PermanentError):
        return Retry.WAIT_FOR_CHANGE
    return Retry.BACK_OFF
