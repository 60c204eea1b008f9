"""What the Typesense operator's reconciles share in one process, made by its start hook
(:attr:`operator_core.reconciling.Context.runtime`): its settings, how the nodes are reached, the
furthest commit seen of each cluster, and the guard that lets a cluster take one backup at a time.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from operator_core.kube import Kube
from typesense_operator.api.backups import TYPESENSE_BACKUP
from typesense_operator.content.versions import ServerVersion
from typesense_operator.controller.cluster.nodes import CommitMemory, SilenceMemory
from typesense_operator.controller.settings import TypesenseSettings
from typesense_operator.quorum.probe import ApiServerProxy, DirectToPod, NodeAddressing
from typesense_operator.resources.backup import Backup

__all__ = ["FINAL_PHASES", "OneBackupAtATime", "TypesenseRuntime"]

FINAL_PHASES = ("Completed", "Failed")
"""A backup's phases after which it is never written again."""


class OneBackupAtATime:
    """A cluster takes one backup at a time: typesense-server 0.24.1 confirms a second snapshot asked
    for while one is being written, and writes nothing (seen when two backups started together). The
    lock covers a backup's start, up to its status saying Running; ``under_way`` remembers what this
    process started, which the watch cache may not show yet; after a restart, the cache tells."""

    def __init__(self) -> None:
        self.locks: dict[tuple[str, str], asyncio.Lock] = {}
        self.under_way: dict[tuple[str, str], str] = {}

    def lock(self, key: tuple[str, str]) -> asyncio.Lock:
        return self.locks.setdefault(key, asyncio.Lock())

    async def other(self, kube: Kube, backup: Backup) -> str | None:
        """Another backup of the same cluster under way (Running), by name; None when there is none."""
        key = (backup.namespace, backup.spec.cluster.name)
        started = self.under_way.get(key)
        if started and started != backup.name:
            found = await kube.get(
                TYPESENSE_BACKUP.api_version, TYPESENSE_BACKUP.kind, started, backup.namespace
            )
            if found is not None and ((found.get("status") or {}).get("phase")) not in FINAL_PHASES:
                return started
            self.under_way.pop(key, None)
        for found in await kube.list(TYPESENSE_BACKUP.api_version, TYPESENSE_BACKUP.kind, backup.namespace):
            same_cluster = ((found.get("spec") or {}).get("cluster") or {}).get(
                "name"
            ) == backup.spec.cluster.name
            running = (found.get("status") or {}).get("phase") == "Running"
            if same_cluster and running and found["metadata"]["name"] != backup.name:
                return str(found["metadata"]["name"])
        return None


@dataclass
class TypesenseRuntime:
    """The Typesense operator's runtime."""

    settings: TypesenseSettings
    addressing: NodeAddressing
    """How the node probes reach the pods: directly, or through the API server's pod proxy."""
    commits: CommitMemory = field(default_factory=CommitMemory)
    silences: SilenceMemory = field(default_factory=SilenceMemory)
    backups: OneBackupAtATime = field(default_factory=OneBackupAtATime)
    server_versions: dict[tuple[str, str], ServerVersion | None] = field(default_factory=dict)
    """Each cluster's server version by its uid and image (the content kinds speak its API)."""
    set_locks: dict[tuple[str, str, str], asyncio.Lock] = field(default_factory=dict)
    """One per cluster uid, set route and set name: two rules of a set that does not exist yet must
    not both make it (the second, empty, would take the first's item out)."""

    @classmethod
    def of(cls, settings: TypesenseSettings, kube: Kube) -> TypesenseRuntime:
        addressing = ApiServerProxy(kube) if settings.probe_via == "api-proxy" else DirectToPod()
        return cls(settings, addressing)

    async def close(self) -> None:
        if isinstance(self.addressing, DirectToPod):
            await self.addressing.aclose()
