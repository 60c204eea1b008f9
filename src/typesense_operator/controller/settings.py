"""Settings of the Typesense operator, each overridable by an OPERATOR_SUITE_* environment variable.

The resync interval is every operator's: :attr:`operator_core.settings.KubeSettings.resync_seconds`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["TypesenseSettings"]


@dataclass(frozen=True)
class TypesenseSettings:
    """How the quorum reconciler probes and how patient it is."""

    grace_seconds: float = 20.0
    """How long a leaderless or split-brain state must last before a downgrade.

    braft elects a new leader within its 5 to 6 s election timeout; 20 s covers a failed election
    round and a second one, and still recovers a full outage within a minute."""
    loading_limit_seconds: float = 600.0
    """How long members that are still loading their data may hold the countdown."""
    stuck_pod_grace_seconds: int = 5
    """The termination grace of a pod the operator deletes that cannot shut down cleanly: a fenced
    silent member, a survivor that elected no leader, or a node a roll restarts while it answers
    nothing.

    Neither can shut down cleanly: a silent member answers nothing, and a typesense-server 0.24.1
    whose raft thread is stuck in an HTTP call to a hung peer never finishes its shutdown, so the
    pod's own grace (60 s) would only be waited out. Neither accepts writes then, and what they
    wrote before is in the page cache, which a SIGKILL keeps."""
    roll_back_within_seconds: float = 300.0
    """How long a node the roll restarted may take to come back (Ready, following the leader, caught
    up) before the roll pauses with a Warning; it goes on by itself once the node is back."""
    roll_catch_up_entries: int = 100
    """How far behind the leader's committed index a node may be and still count as caught up."""
    probe_timeout: float = 2.0
    """Seconds before one /status or /health request is given up."""
    probe_concurrency: int = 8
    """At most this many nodes are probed at once."""
    probe_via: Literal["pod-ip", "api-proxy"] = "pod-ip"
    """How nodes are reached: pod-ip (in the cluster, or routable pod IPs) or api-proxy (the pod proxy)."""
    content_check_seconds: float = 60.0
    """How often each collection, alias, synonym and override is compared with what Typesense holds:
    a change made through Typesense's own API is put back within this time (requests to Typesense
    only, none to the API server when nothing changed)."""
    backup_image: str = ""
    """The image backup Jobs run (``typesense-backup``): this suite's own. The chart sets it to the
    operator's image; without it, backups fail with a reason that names this setting."""
