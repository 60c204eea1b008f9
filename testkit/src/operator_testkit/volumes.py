"""Storage for tests of volume growth on a control plane without a storage driver: a StorageClass
that allows expansion or not, and statically provisioned PersistentVolumes that the real PV
controller binds to the claims a StatefulSet makes (``Immediate`` binding, no provisioner)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

from operator_core.kube import Kube

__all__ = ["static_storage"]


@asynccontextmanager
async def static_storage(
    kube: Kube, storage_class: str, volumes: Sequence[str] = (), *, expandable: bool, capacity: str = "5Gi"
) -> AsyncIterator[None]:
    """The class and ``volumes`` (host paths under /tmp, never mounted here) for the ``with`` block;
    both deleted after it."""
    await kube.apply(
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": storage_class},
            "provisioner": "kubernetes.io/no-provisioner",
            "allowVolumeExpansion": expandable,
            "volumeBindingMode": "Immediate",
        }
    )
    try:
        for volume in volumes:
            await kube.apply(
                {
                    "apiVersion": "v1",
                    "kind": "PersistentVolume",
                    "metadata": {"name": volume},
                    "spec": {
                        "capacity": {"storage": capacity},
                        "accessModes": ["ReadWriteOnce"],
                        "storageClassName": storage_class,
                        # Never mounted: no kubelet runs these claims' pods here.
                        "hostPath": {"path": f"/tmp/{volume}"},  # noqa: S108
                    },
                }
            )
        yield
    finally:
        for volume in volumes:
            await kube.delete("v1", "PersistentVolume", volume)
        await kube.delete("storage.k8s.io/v1", "StorageClass", storage_class)
