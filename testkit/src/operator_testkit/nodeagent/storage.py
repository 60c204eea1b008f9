"""A storage provisioner: every Pending PersistentVolumeClaim gets a hostPath PersistentVolume.

For any claim that is Pending and not yet bound, whatever its StorageClass name,
the agent creates a PersistentVolume whose ``claimRef`` already names the claim
(pre-bound), with a hostPath directory under ``STATE/volumes/``; the real PV
controller then binds the pair, and the scheduler can place the pod. The
directory is not tied to a node or a pod, so it survives pod re-creation.

The agent's volumes have reclaim policy Retain (the controller manager's
hostPath recycler is off) and the agent reclaims them itself: once a volume is
Released (its claim deleted), it deletes the PersistentVolume and its directory.

A claim that asks to be size-limited (see :mod:`.disks`) gets a tmpfs of its
requested size mounted on its directory; the PersistentVolume records the limit
in :data:`SIZE_LIMIT_ANNOTATION`, so an agent that restarts mounts it again.
The provisioner unmounts its volumes when it stops.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from operator_core.kube import Kube
from operator_testkit.nodeagent import disks
from operator_testkit.nodeagent.nodes import AGENT_LABEL

__all__ = ["PROVISIONER", "SIZE_LIMIT_ANNOTATION", "Provisioner", "volume_for_claim"]

log = logging.getLogger(__name__)

PROVISIONER = "nodeagent.operator-suite.io"
SIZE_LIMIT_ANNOTATION = "nodeagent.operator-suite.io/size-limit-bytes"
Manifest = Mapping[str, Any]


def volume_for_claim(claim: Manifest, root: Path) -> dict[str, Any]:
    """The PersistentVolume, pre-bound to ``claim``, with its directory under ``root`` (pure)."""
    metadata, spec = claim["metadata"], claim.get("spec", {})
    name = f"pvc-{metadata['uid']}"
    size = ((spec.get("resources") or {}).get("requests") or {}).get("storage", "1Gi")
    annotations = {"pv.kubernetes.io/provisioned-by": PROVISIONER}
    limit = disks.size_limit(claim)
    if limit is not None:
        annotations[SIZE_LIMIT_ANNOTATION] = str(limit)
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {
            "name": name,
            "labels": {AGENT_LABEL: "true"},
            "annotations": annotations,
        },
        "spec": {
            "capacity": {"storage": size},
            "accessModes": spec.get("accessModes") or ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": spec.get("storageClassName") or "",
            "volumeMode": spec.get("volumeMode") or "Filesystem",
            "hostPath": {"path": str(root / name), "type": "DirectoryOrCreate"},
            "claimRef": {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "namespace": metadata["namespace"],
                "name": metadata["name"],
                "uid": metadata["uid"],
            },
        },
    }


def _limit_of(volume: Manifest) -> int | None:
    text = ((volume.get("metadata") or {}).get("annotations") or {}).get(SIZE_LIMIT_ANNOTATION)
    return int(text) if text and str(text).isdigit() else None


class Provisioner:
    """Provisions and reclaims the agent's PersistentVolumes by polling.

    ``mounts`` says whether size-limited volumes may be mounted (the agent runs in a
    mount namespace of its own); without it they are plain directories, and cannot be filled.
    """

    def __init__(self, kube: Kube, root: Path, interval: float = 1.0, *, mounts: bool = False) -> None:
        self._kube = kube
        self.root = root
        self._interval = interval
        self._mounts = mounts
        self._mounted: set[Path] = set()

    async def _prepare(self, volume: Manifest) -> None:
        """Make the volume's directory, and mount its tmpfs if it is size-limited (idempotent)."""
        path = Path(volume["spec"]["hostPath"]["path"])
        if not path.is_relative_to(self.root):
            return
        limit = _limit_of(volume)
        if limit is None or not self._mounts:
            await asyncio.to_thread(path.mkdir, parents=True, exist_ok=True)
            return
        await asyncio.to_thread(disks.mount_size_limited, path, limit)
        self._mounted.add(path)

    async def path_of_claim(self, namespace: str, name: str) -> Path:
        """The directory behind a bound claim that this agent provisioned."""
        claim = await self._kube.get("v1", "PersistentVolumeClaim", name, namespace)
        volume_name = ((claim or {}).get("spec") or {}).get("volumeName")
        if not volume_name:
            raise LookupError(f"persistentvolumeclaim {namespace}/{name} is not bound")
        volume = await self._kube.get("v1", "PersistentVolume", volume_name)
        path = Path(str((((volume or {}).get("spec") or {}).get("hostPath") or {}).get("path", "/")))
        if not path.is_relative_to(self.root):
            raise LookupError(f"persistentvolumeclaim {namespace}/{name} is not backed by this agent")
        return path

    async def unmount_all(self) -> None:
        for path in list(self._mounted):
            await asyncio.to_thread(disks.unmount, path)
        self._mounted.clear()

    async def sync(self) -> None:
        volumes = await self._kube.list("v1", "PersistentVolume", labels={AGENT_LABEL: "true"})
        claimed = {(v["spec"].get("claimRef") or {}).get("uid") for v in volumes}
        for claim in await self._kube.list("v1", "PersistentVolumeClaim", "*"):  # "*": every namespace
            pending = (claim.get("status") or {}).get("phase") == "Pending"
            if pending and not claim["spec"].get("volumeName") and claim["metadata"]["uid"] not in claimed:
                volume = volume_for_claim(claim, self.root)
                await self._prepare(volume)
                await self._kube.create(volume)
                log.info(
                    "provisioned %s for claim %s/%s",
                    volume["metadata"]["name"],
                    claim["metadata"]["namespace"],
                    claim["metadata"]["name"],
                )
        for volume in volumes:
            path = Path(volume["spec"]["hostPath"]["path"])
            if (volume.get("status") or {}).get("phase") == "Released":
                await self._kube.delete("v1", "PersistentVolume", volume["metadata"]["name"])
                if path.is_relative_to(self.root):
                    await asyncio.to_thread(disks.unmount, path)
                    self._mounted.discard(path)
                    await asyncio.to_thread(shutil.rmtree, path, True)
                log.info("reclaimed %s", volume["metadata"]["name"])
            elif self._mounts and path not in self._mounted and _limit_of(volume) is not None:
                await self._prepare(volume)  # provisioned before this agent started: mount it again

    async def run(self) -> None:
        """Provision and reclaim until cancelled; then unmount every size-limited volume."""
        self.root.mkdir(parents=True, exist_ok=True)
        try:
            while True:
                try:
                    await self.sync()
                except Exception as error:  # a failed pass is retried at the next one
                    log.warning("provisioner pass failed: %s", error)
                await asyncio.sleep(self._interval)
        finally:
            await self.unmount_all()
