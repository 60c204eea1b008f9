"""Faults on demand on real nodes, through the mechanisms a node really has; a fault that cannot be
made (no such pod, a container not running, a volume that is not size-limited) raises
:class:`FaultError` with why.

==========================  ================================================================
fault                       how
==========================  ================================================================
``kill`` (a signal)         ``ctr tasks kill --all``: the signal to every process of the container;
                            the kubelet restarts it per the pod's restartPolicy
``freeze`` / ``thaw``       ``ctr tasks pause`` / ``resume``: the cgroup freezer; a frozen node
                            holds its ports and answers nothing
``down`` / ``up``           rules in the pod's own network namespace reject every connection to or
                            from it (but its loopback), then SIGKILL: it restarts behind the rules,
                            refusing every connection and reaching no peer, until ``up`` drops them
``partition`` / ``heal``    the same rules without the kill
``delete_pod``              through the API, as ``kubectl delete pod``
``crash_pods``,             a power cut: SIGKILL every container, then the pod objects removed at
``restart_statefulset``     once (grace 0); they come back with new addresses
``wipe_volume``             everything in the claim's volume removed, on its node's disk
``fill_volume`` / ``free``  the size-limited claim's tmpfs filled to the last byte, and emptied
==========================  ================================================================

Faults of a whole node (a power cut and a reboot, the kubelet isolated from the API server, a drain)
are :mod:`.power`'s.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal as signals
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from operator_core import errors
from operator_core.errors import OperatorError
from operator_core.kube import Kube
from operator_testkit.nodes.storage import SIZE_LIMITED_CLASS

__all__ = ["FILL_FILE", "FaultError", "NodeFaults"]

Answer = dict[str, Any]
FILL_FILE = ".operator-suite-fill"
PARTITION_CHAIN = "OPERATOR-SUITE-DOWN"
_DELETE_WAIT_SECONDS = 120.0


class FaultError(OperatorError):
    """A fault could not be made, and why."""


class TargetGone(FaultError):
    """The pod, its container or its claim is not there to act on: not found, not started yet, or ended
    (killed, fenced, between two runs). A fault on it cannot be made; one made before has nothing left
    to end."""


@dataclass(frozen=True)
class NodeFaults:
    """Faults of one cluster of real nodes: ``ctr`` is a function from a node's name to the ``ctr``
    command that talks to its containerd; ``kube`` is an admin client of its control plane."""

    kube: Kube
    ctr_of: Callable[[str], list[str]]
    nodes: tuple[str, ...] = ()
    """The nodes' names: where a container is looked for when the API server does not answer."""

    # -- reading a container

    async def _pod(self, namespace: str, pod: str) -> dict[str, Any]:
        found = await self.kube.get("v1", "Pod", pod, namespace)
        if found is None:
            raise TargetGone(f"pod {namespace}/{pod} not found")
        return found

    async def _container(self, namespace: str, pod: str, container: str | None) -> tuple[str, str, str]:
        """The container's node, name and containerd id; FaultError while it has none.

        From the pod's status; while the API server does not answer (a fault of its own), from the
        nodes' containerd, by the labels the kubelet gives every container: a node's fault (a thaw
        above all) needs no control plane."""
        try:
            found = await self._pod(namespace, pod)
        except errors.Unavailable:
            if container is None or not self.nodes:
                raise
            return await self._container_on_nodes(namespace, pod, container)
        statuses = (found.get("status") or {}).get("containerStatuses") or []
        name = container or found["spec"]["containers"][0]["name"]
        status = next((s for s in statuses if s["name"] == name), None)
        if status is None or not status.get("containerID"):
            raise TargetGone(f"container {name} of {namespace}/{pod} is not started")
        return found["spec"]["nodeName"], name, status["containerID"].removeprefix("containerd://")

    async def _container_on_nodes(self, namespace: str, pod: str, container: str) -> tuple[str, str, str]:
        labels = {
            "io.kubernetes.pod.namespace": namespace,
            "io.kubernetes.pod.name": pod,
            "io.kubernetes.container.name": container,
        }
        wanted = ",".join(f'labels."{key}"=={value}' for key, value in labels.items())
        for node in self.nodes:
            for container_id in (await self._ctr(node, "containers", "list", "--quiet", wanted)).split():
                try:
                    await self._task(node, container_id)
                except TargetGone:
                    continue  # an earlier run of the container, ended
                return node, container, container_id
        raise TargetGone(f"container {container} of {namespace}/{pod} is not running on any node")

    async def _ctr(self, node: str, *arguments: str, check: bool = True) -> str:
        command = [*self.ctr_of(node), "--namespace", "k8s.io", *arguments]
        done = await asyncio.to_thread(subprocess.run, command, capture_output=True, text=True, check=False)
        if check and done.returncode != 0:
            raise FaultError(f"ctr {' '.join(arguments)} on {node}: {done.stderr.strip()}")
        return done.stdout

    async def _task(self, node: str, container_id: str) -> tuple[int, str]:
        """The container's main pid and its task's state (RUNNING, PAUSED)."""
        for line in (await self._ctr(node, "tasks", "ls")).splitlines()[1:]:
            task, pid, status = line.split()
            if task == container_id and status in ("RUNNING", "PAUSED", "PAUSING"):
                return int(pid), status
        raise TargetGone(f"container {container_id[:12]} on {node} is not running")

    async def _task_pid(self, node: str, container_id: str) -> int:
        return (await self._task(node, container_id))[0]

    async def _netns(self, node: str, container_id: str) -> str:
        spec = json.loads(await self._ctr(node, "containers", "info", container_id))["Spec"]
        for namespace in spec["linux"]["namespaces"]:
            if namespace["type"] == "network" and namespace.get("path"):
                return str(namespace["path"])
        raise FaultError(f"container {container_id[:12]} on {node} has no network namespace of its own")

    # -- processes

    async def pid(self, namespace: str, pod: str, container: str | None = None) -> int:
        """The host pid of the container's main process (its /proc shows the container as it is)."""
        node, _, container_id = await self._container(namespace, pod, container)
        return await self._task_pid(node, container_id)

    async def kill(
        self, namespace: str, pod: str, container: str | None = None, signal: str = "KILL"
    ) -> Answer:
        """Send ``signal`` to every process of the container; the kubelet restarts it per policy."""
        node, name, container_id = await self._container(namespace, pod, container)
        number = signals.Signals[f"SIG{signal}"]
        pid = await self._task_pid(node, container_id)
        await self._ctr(node, "tasks", "kill", "--all", "--signal", number.name, container_id)
        return {"pod": f"{namespace}/{pod}", "container": name, "pid": pid, "node": node}

    async def freeze(self, namespace: str, pod: str, container: str | None = None) -> Answer:
        """Freeze the container's cgroup: it holds its ports and answers nothing."""
        node, name, container_id = await self._container(namespace, pod, container)
        if (await self._task(node, container_id))[1] == "RUNNING":
            await self._ctr(node, "tasks", "pause", container_id)
        return {"pod": f"{namespace}/{pod}", "container": name, "frozen": True}

    async def thaw(self, namespace: str, pod: str, container: str | None = None) -> Answer:
        """Thaw the container; one that is not frozen (a pod fenced and made anew meanwhile) is left
        as it is, as SIGCONT leaves a running process."""
        try:
            node, name, container_id = await self._container(namespace, pod, container)
            state = (await self._task(node, container_id))[1]
        except TargetGone:
            # Ended meanwhile (a downgrade or a fence restarted it, even between the pod's status and
            # containerd's list): nothing of it is left frozen.
            return {"pod": f"{namespace}/{pod}", "container": container, "frozen": False}
        if state != "RUNNING":
            await self._resume(node, container_id)
        return {"pod": f"{namespace}/{pod}", "container": name, "frozen": False}

    async def _resume(self, node: str, container_id: str) -> None:
        """Resume a paused task. runc refuses one that is not paused (still PAUSING on a loaded node,
        or thawed and running already), so a refusal is judged by the task's state after it: running
        or gone is thawed; still pausing is asked again."""
        deadline = asyncio.get_running_loop().time() + 30
        while True:
            try:
                await self._ctr(node, "tasks", "resume", container_id)
                return
            except FaultError:
                try:
                    state = (await self._task(node, container_id))[1]
                except TargetGone:
                    return
                if state == "RUNNING":
                    return
                if asyncio.get_running_loop().time() > deadline:
                    raise
            await asyncio.sleep(0.5)

    async def partition(self, namespace: str, pod: str) -> Answer:
        """Cut the pod off: every connection to or from it is refused (its own loopback still works)."""
        node, _, container_id = await self._container(namespace, pod, None)
        path = await self._netns(node, container_id)
        rules = [
            ["-N", PARTITION_CHAIN],
            ["-A", PARTITION_CHAIN, "-i", "lo", "-j", "RETURN"],
            ["-A", PARTITION_CHAIN, "-o", "lo", "-j", "RETURN"],
            ["-A", PARTITION_CHAIN, "-p", "tcp", "-j", "REJECT", "--reject-with", "tcp-reset"],
            ["-A", PARTITION_CHAIN, "-j", "REJECT"],
            ["-I", "INPUT", "1", "-j", PARTITION_CHAIN],
            ["-I", "OUTPUT", "1", "-j", PARTITION_CHAIN],
        ]
        for rule in rules:
            await _in_netns(path, "iptables", "-w", *rule)
        return {"pod": f"{namespace}/{pod}", "partitioned": True}

    async def heal(self, namespace: str, pod: str) -> Answer:
        node, _, container_id = await self._container(namespace, pod, None)
        path = await self._netns(node, container_id)
        for rule in (["-D", "INPUT", "-j", PARTITION_CHAIN], ["-D", "OUTPUT", "-j", PARTITION_CHAIN],
                     ["-F", PARTITION_CHAIN], ["-X", PARTITION_CHAIN]):  # fmt: skip
            await _in_netns(path, "iptables", "-w", *rule, check=False)
        return {"pod": f"{namespace}/{pod}", "partitioned": False}

    async def down(self, namespace: str, pod: str, container: str | None = None) -> Answer:
        """Partition the pod, then SIGKILL the container: it restarts, but nobody can reach it."""
        await self.partition(namespace, pod)
        answer = await self.kill(namespace, pod, container)
        return {**answer, "down": True}

    async def up(self, namespace: str, pod: str, container: str | None = None) -> Answer:
        answer = await self.heal(namespace, pod)
        return {**answer, "down": False}

    async def environment(self, namespace: str, pod: str, container: str | None = None) -> dict[str, str]:
        """The environment the container's main process really has."""
        node, _, container_id = await self._container(namespace, pod, container)
        pid = await self._task_pid(node, container_id)
        raw = (await asyncio.to_thread(Path(f"/proc/{pid}/environ").read_bytes)).decode(errors="replace")
        return dict(item.split("=", 1) for item in raw.split("\0") if "=" in item)

    # -- pods

    async def delete_pod(
        self, namespace: str, pod: str, *, grace_period_seconds: int | None = None, wait: bool = True
    ) -> Answer:
        if not await self.kube.delete("v1", "Pod", pod, namespace, grace_period=grace_period_seconds):
            raise TargetGone(f"pod {namespace}/{pod} not found")
        if wait:
            deadline = time.monotonic() + _DELETE_WAIT_SECONDS
            while await self.kube.get("v1", "Pod", pod, namespace) is not None:
                if time.monotonic() > deadline:
                    raise FaultError(
                        f"pod {namespace}/{pod} is still there after {_DELETE_WAIT_SECONDS:.0f} s"
                    )
                await asyncio.sleep(0.3)
        return {"pod": f"{namespace}/{pod}", "deleted": True}

    async def _crash(self, namespace: str, pods: list[dict[str, Any]]) -> list[Answer]:
        async def kill_all(pod: dict[str, Any]) -> None:
            node = pod["spec"].get("nodeName")
            for status in (pod.get("status") or {}).get("containerStatuses") or []:
                if node and status.get("containerID"):
                    container_id = status["containerID"].removeprefix("containerd://")
                    await self._ctr(
                        node, "tasks", "kill", "--all", "--signal", "SIGKILL", container_id, check=False
                    )

        await asyncio.gather(*(kill_all(p) for p in pods))
        await asyncio.gather(
            *(self.kube.delete("v1", "Pod", p["metadata"]["name"], namespace, grace_period=0) for p in pods)
        )
        return [
            {
                "name": p["metadata"]["name"],
                "uid": p["metadata"]["uid"],
                "podIP": (p.get("status") or {}).get("podIP"),
            }
            for p in pods
        ]

    async def crash_pods(self, namespace: str, pods: list[str]) -> list[Answer]:
        """A power cut for these pods: SIGKILL, then the pod objects removed at once; returns the old pods."""
        return await self._crash(namespace, [await self._pod(namespace, name) for name in pods])

    async def restart_statefulset(self, namespace: str, name: str) -> list[Answer]:
        """Crash every pod of the StatefulSet at once; they come back with new addresses."""
        pods = [
            pod
            for pod in await self.kube.list("v1", "Pod", namespace)
            if any(
                o.get("kind") == "StatefulSet" and o.get("name") == name
                for o in pod["metadata"].get("ownerReferences") or []
            )
        ]
        if not pods:
            raise FaultError(f"statefulset {namespace}/{name} has no pods")
        return await self._crash(namespace, pods)

    # -- volumes

    async def _volume(self, namespace: str, claim: str) -> tuple[Path, str]:
        found = await self.kube.get("v1", "PersistentVolumeClaim", claim, namespace)
        if found is None:
            raise TargetGone(f"claim {namespace}/{claim} not found")
        volume_name = (found.get("spec") or {}).get("volumeName")
        volume = volume_name and await self.kube.get("v1", "PersistentVolume", volume_name, None)
        if not volume or "hostPath" not in volume["spec"]:
            raise FaultError(f"claim {namespace}/{claim} is not bound to a volume on a node")
        return Path(volume["spec"]["hostPath"]["path"]), found["spec"].get("storageClassName") or ""

    async def wipe_volume(self, namespace: str, claim: str) -> Answer:
        """Remove everything in the claim's volume."""
        path, _ = await self._volume(namespace, claim)
        removed = await asyncio.to_thread(_wipe, path)
        return {"path": str(path), "removed": removed}

    async def fill_volume(self, namespace: str, claim: str) -> Answer:
        """Fill a size-limited claim's volume to the last byte."""
        path, storage_class = await self._volume(namespace, claim)
        if storage_class != SIZE_LIMITED_CLASS:
            raise FaultError(f"the claim's volume is not size-limited ({SIZE_LIMITED_CLASS} class)")
        written = await asyncio.to_thread(_fill, path / FILL_FILE)
        usage = os.statvfs(path)
        return {"path": str(path), "written": written, "free": usage.f_bavail * usage.f_frsize}

    async def free_volume(self, namespace: str, claim: str) -> Answer:
        path, _ = await self._volume(namespace, claim)
        fill = path / FILL_FILE
        existed = fill.exists()
        fill.unlink(missing_ok=True)
        return {"path": str(path), "freed": existed}


async def _in_netns(path: str, *argv: str, check: bool = True) -> None:
    command = ["nsenter", f"--net={path}", "--", *argv]
    done = await asyncio.to_thread(subprocess.run, command, capture_output=True, text=True, check=False)
    if check and done.returncode != 0:
        raise FaultError(f"{' '.join(argv)} in {path}: {done.stderr.strip()}")


def _wipe(path: Path) -> int:
    removed = 0
    for entry in path.iterdir():
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()
        removed += 1
    return removed


def _fill(path: Path) -> int:
    """Write zeros until the filesystem is full, to the last byte (unbuffered, so nothing is held back)."""
    written = 0
    with path.open("ab", buffering=0) as out:
        for size in (1 << 20, 4096, 1):
            block = b"\0" * size
            try:
                while True:
                    written += out.write(block) or 0
            except OSError:
                continue
    return written
