"""The size-limited class's volumes grown when their claims ask for more: what a CSI driver's
external-resizer and its node plugin do for a real cloud disk, done here for the test kit's tmpfs volumes.

local-path (the real nodes' provisioner) cannot expand a volume, so without this a StorageClass that
allows expansion would take a larger claim and leave the volume as it was. Once a claim bound to a
size-limited volume asks for more than its volume holds, the volume's tmpfs is remounted with the new
size (tmpfs grows in place, its files kept), then the PersistentVolume's capacity and the claim's
``status.capacity`` say the new size, as Kubernetes' own resize flow ends. Only growing: tmpfs could
shrink below its contents, and Kubernetes never asks for that.

It runs as a daemon of the real nodes (``python -m operator_testkit.nodes.resizer KUBECONFIG``),
looking at the claims every second; its API calls go as the control plane's admin.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from operator_core.kube import ALL, Kube
from operator_core.quantity import parse_quantity
from operator_testkit.nodes.storage import SIZE_LIMITED_CLASS

__all__ = ["grow_claims", "main"]

LOOK_SECONDS = 1.0


def _size(manifest: dict[str, Any] | None, *path: str) -> str | None:
    found: Any = manifest or {}
    for key in path:
        found = (found or {}).get(key)
    return found if isinstance(found, str) else None


def _grow_in_place(path: Path, size_bytes: int) -> str | None:
    """The tmpfs at ``path`` remounted with ``size_bytes`` when it is smaller; None when done (or not
    needed), else what mount said. A path that is not there (a volume deleted meanwhile) is left."""
    if not path.is_dir():
        return None
    usage = os.statvfs(path)
    if usage.f_blocks * usage.f_frsize >= size_bytes:
        return None
    done = subprocess.run(
        ["mount", "-o", f"remount,size={size_bytes}", str(path)], capture_output=True, text=True, check=False
    )
    return done.stderr.strip() or f"mount exited with {done.returncode}" if done.returncode else None


async def grow_claims(kube: Kube, paths: dict[str, str]) -> list[str]:
    """Every size-limited claim whose request is beyond its volume, grown; returns what was grown.
    ``paths``: each volume's host path by volume name, kept between looks (a volume never moves)."""
    grown = []
    for claim in await kube.list("v1", "PersistentVolumeClaim", ALL):
        spec = claim.get("spec") or {}
        wanted = _size(spec, "resources", "requests", "storage")
        wanted_bytes = parse_quantity(wanted)
        volume_name = spec.get("volumeName")
        if spec.get("storageClassName") != SIZE_LIMITED_CLASS or not volume_name or wanted_bytes is None:
            continue
        volume = None
        if volume_name not in paths:
            volume = await kube.get_live("v1", "PersistentVolume", volume_name)
            host_path = _size(volume, "spec", "hostPath", "path")
            if host_path is None:
                continue
            paths[volume_name] = host_path
        name, namespace = claim["metadata"]["name"], claim["metadata"]["namespace"]
        refused = await asyncio.to_thread(_grow_in_place, Path(paths[volume_name]), int(wanted_bytes))
        if refused is not None:
            print(f"resizer: {namespace}/{name}: {refused}", file=sys.stderr, flush=True)
            continue
        if parse_quantity(_size(claim, "status", "capacity", "storage")) == wanted_bytes:
            continue
        volume = volume or await kube.get_live("v1", "PersistentVolume", volume_name)
        if (
            volume is not None
            and parse_quantity(_size(volume, "spec", "capacity", "storage")) != wanted_bytes
        ):
            await kube.patch(
                "v1", "PersistentVolume", volume_name, None, {"spec": {"capacity": {"storage": wanted}}}
            )
        await kube.patch_status(
            "v1",
            "PersistentVolumeClaim",
            name,
            namespace,
            {"capacity": {"storage": wanted}, "conditions": None, "allocatedResourceStatuses": None},
        )
        grown.append(f"{namespace}/{name} to {wanted}")
    return grown


async def _run(kubeconfig: Path) -> None:
    paths: dict[str, str] = {}
    async with Kube.connect(kubeconfig) as kube:
        while True:
            try:
                for line in await grow_claims(kube, paths):
                    print(f"resizer: grew {line}", flush=True)
            except Exception as error:  # the API server restarting (a chaos step): look again
                print(f"resizer: {type(error).__name__}: {error}", file=sys.stderr, flush=True)
            await asyncio.sleep(LOOK_SECONDS)


def main() -> None:
    asyncio.run(_run(Path(sys.argv[1])))


if __name__ == "__main__":
    main()
