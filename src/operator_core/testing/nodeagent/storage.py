"""A storage provisioner: every Pending PersistentVolumeClaim gets a hostPath PersistentVolume.

For any claim that is Pending and not yet bound, whatever its StorageClass name,
the agent creates a PersistentVolume whose ``claimRef`` already names the claim
(pre-bound), with a hostPath directory under ``STATE/volumes/``; the real PV
controller then binds the pair, and the scheduler can place the pod. The
directory is not tied to a node or a pod, so it survives pod re-creation.

The agent's volumes have reclaim policy Retain (the controller manager's
hostPath recycler is off) and the agent reclaims them itself: once a volume is
Released (its claim deleted), it deletes the PersistentVolume and its directory.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from operator_core.kube import Kube
from operator_core.testing.nodeagent.nodes import AGENT_LABEL

__all__ = ["PROVISIONER", "Provisioner", "volume_for_claim"]

log = logging.getLogger(__name__)

PROVISIONER = "nodeagent.operator-suite.dev"
Manifest = Mapping[str, Any]


def volume_for_claim(claim: Manifest, root: Path) -> dict[str, Any]:
    """The PersistentVolume, pre-bound to ``claim``, with its directory under ``root`` (pure)."""
    metadata, spec = claim["metadata"], claim.get("spec", {})
    name = f"pvc-{metadata['uid']}"
    size = ((spec.get("resources") or {}).get("requests") or {}).get("storage", "1Gi")
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {
            "name": name,
            "labels": {AGENT_LABEL: "true"},
            "annotations": {"pv.kubernetes.io/provisioned-by": PROVISIONER},
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


def _make_directory(path: str) -> None:
    Path(path).mkdir(parents=True, exist_ok=True)


class Provisioner:
    """Provisions and reclaims the agent's PersistentVolumes by polling."""

    def __init__(self, kube: Kube, root: Path, interval: float = 1.0) -> None:
        self._kube = kube
        self.root = root
        self._interval = interval

    async def sync(self) -> None:
        volumes = await self._kube.list("v1", "PersistentVolume", labels={AGENT_LABEL: "true"})
        claimed = {(v["spec"].get("claimRef") or {}).get("uid") for v in volumes}
        for claim in await self._kube.list("v1", "PersistentVolumeClaim", "*"):  # "*": every namespace
            pending = (claim.get("status") or {}).get("phase") == "Pending"
            if pending and not claim["spec"].get("volumeName") and claim["metadata"]["uid"] not in claimed:
                volume = volume_for_claim(claim, self.root)
                _make_directory(volume["spec"]["hostPath"]["path"])
                await self._kube.create(volume)
                log.info(
                    "provisioned %s for claim %s/%s",
                    volume["metadata"]["name"],
                    claim["metadata"]["namespace"],
                    claim["metadata"]["name"],
                )
        for volume in volumes:
            if (volume.get("status") or {}).get("phase") == "Released":
                await self._kube.delete("v1", "PersistentVolume", volume["metadata"]["name"])
                path = Path(volume["spec"]["hostPath"]["path"])
                if path.is_relative_to(self.root):
                    await asyncio.to_thread(shutil.rmtree, path, True)
                log.info("reclaimed %s", volume["metadata"]["name"])

    async def run(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        while True:
            try:
                await self.sync()
            except Exception as error:  # a failed pass is retried at the next one
                log.warning("provisioner pass failed: %s", error)
            await asyncio.sleep(self._interval)
