"""Who this process is, as the cluster names it: the pod, never the user database.

A pod's container runs as a numeric user that the image may not list in ``/etc/passwd``, and a
kubelet sets neither ``USER`` nor ``LOGNAME`` nor (without a passwd entry) ``HOME``: anything that
asks for a user name (``getpass.getuser()``) fails there. The Lease holder and the Events' reporting
instance come from here instead.
"""

from __future__ import annotations

import os
import socket

__all__ = ["pod_name", "process_identity"]


def pod_name() -> str:
    """The pod's name: ``POD_NAME`` (the downward API), else ``HOSTNAME`` (which a kubelet sets to it),
    else the host name (the pod's own UTS namespace names it; outside a cluster, the machine)."""
    return os.environ.get("POD_NAME") or os.environ.get("HOSTNAME") or socket.gethostname()


def process_identity() -> str:
    """The pod's name and the process id: unique among replicas, and among restarts in one pod."""
    return f"{pod_name()}_{os.getpid()}"
