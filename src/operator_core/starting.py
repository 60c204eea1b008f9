"""What an operator cannot start without, checked before its caches start (and before a replica waits
for its Lease): an API server that answers within :data:`START_SECONDS` and takes its credentials, and
the operator's own kinds served. Anything else is :class:`~operator_core.errors.StartFailed`, which
the runner prints as one line before it exits 1.

Who calls it: :meth:`operator_core.controller.Operator.check_can_start`.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Sequence
from pathlib import Path

from operator_core import errors
from operator_core.crdgen import CustomResource
from operator_core.kube import Kube

__all__ = ["EXIT_SECONDS", "START_SECONDS", "check_start", "process_started"]

START_SECONDS = 20.0
"""How long a starting operator waits for the API server to answer before it gives up, counted from the
process's start: its pod then restarts with back-off, as a controller-runtime manager's does, and says
why each time."""
_START_RETRY_SECONDS = 1.0
EXIT_SECONDS = 0.5
"""What is kept of :data:`START_SECONDS` for the way out once the start has failed (the client closed,
the line printed, the interpreter ended), so that the process is gone within it."""


def process_started() -> float:
    """When this process started, on :func:`time.monotonic`'s clock (from ``/proc``: the interpreter and
    the imports before the first line of ours count too); now where ``/proc`` cannot tell."""
    try:
        # The fields after the command's closing parenthesis start at the third; starttime is the 22nd.
        fields = Path("/proc/self/stat").read_text().rpartition(")")[2].split()
        started_ticks = int(fields[22 - 3])
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        age = uptime - started_ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        age = 0.0
    return time.monotonic() - max(age, 0.0)


async def check_start(
    kube: Kube,
    resources: Sequence[CustomResource],
    patience: float = START_SECONDS,
    *,
    since: float | None = None,
) -> None:
    """What an operator cannot start without, checked before its caches start: an API server that
    answers within ``patience`` seconds of ``since`` (a :func:`time.monotonic` time; now when None; the
    operators give :func:`process_started`, less :data:`EXIT_SECONDS` for the way out) and takes its
    credentials, and its own kinds served. :class:`~operator_core.errors.StartFailed` names the address
    and the cause otherwise."""
    where = kube.server or "the in-cluster address"
    deadline = (time.monotonic() if since is None else since) + patience
    waiting_said = False
    while True:
        remaining = deadline - time.monotonic()
        try:
            await asyncio.wait_for(kube.version(), timeout=max(remaining, 0.1))
            # Asked in the same try: an API server that goes away between the two (a restart while
            # the operator starts) is waited for as one that had not answered yet.
            missing = [r for r in resources if not await kube.serves(r.api_version, r.kind)]
            break
        except (errors.Unavailable, TimeoutError) as error:
            cause = str(error) or "no answer"
            if time.monotonic() + _START_RETRY_SECONDS >= deadline:
                raise errors.StartFailed(
                    f"the API server at {where} did not answer within {patience:.0f} s: {cause}"
                ) from error
            if not waiting_said:  # once, not once a second
                logging.getLogger(__name__).warning("waiting for the API server at %s: %s", where, cause)
                waiting_said = True
            await asyncio.sleep(_START_RETRY_SECONDS)
        except errors.KubeError as error:
            if error.status == 401:
                raise errors.StartFailed(
                    f"the API server at {where} refused our credentials (401 Unauthorized): the token or "
                    "client certificate is not valid there"
                ) from error
            raise errors.StartFailed(f"the API server at {where} refused us: {error}") from error
    for resource in missing:
        raise errors.StartFailed(
            f"{resource.kind} ({resource.api_version}) is not served at {where}: install its CRD "
            f"{resource.crd_name} first (its chart does, as does kubectl apply -f deploy/crds/)"
        )
