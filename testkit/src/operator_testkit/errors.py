"""The test kit's branch of the suite's error tree (:mod:`operator_core.errors`)."""

from __future__ import annotations

from operator_core.errors import OperatorError

__all__ = ["ControlPlaneError"]


class ControlPlaneError(OperatorError):
    """The local control plane, the real nodes, an operator process or the sandbox could not be built,
    started, or stopped."""
