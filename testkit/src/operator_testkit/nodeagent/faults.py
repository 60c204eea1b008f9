"""Faults on demand, for tests: a client of a running agent's control API (:mod:`.control`).

::

    faults = Faults.of(node_agent.state_dir)
    await faults.kill(namespace, "ts-0")                  # restarted per restartPolicy, restartCount+1
    await faults.down(namespace, "ts-0"); await faults.up(namespace, "ts-0")  # dead until released
    await faults.freeze(namespace, "ts-1"); await faults.thaw(namespace, "ts-1")
    await faults.delete_pod(namespace, "ts-2")            # as kubectl delete pod
    await faults.restart_statefulset(namespace, "ts")     # every pod at once, back with new IPs
    await faults.wipe_volume(namespace, "data-ts-0")
    await faults.fill_volume(namespace, "data-ts-0")      # size-limited claims only (see .disks)

The same faults are ``operator-suite-dev agent ...`` subcommands (:mod:`.cli`). Every
call is bounded by :attr:`Faults.timeout`; a refused fault raises :class:`FaultError`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from operator_core.errors import OperatorError

__all__ = ["FaultError", "Faults"]

Answer = dict[str, Any]


class FaultError(OperatorError):
    """The agent refused a fault, or could not be reached."""


@dataclass(frozen=True)
class Faults:
    """One agent's faults; build it with :meth:`of` from the agent's state directory."""

    url: str
    token: str
    timeout: float = 150.0  # above the agent's own longest wait (a deletion with wait=True)

    @classmethod
    def of(cls, state_dir: Path) -> Faults:
        marker = state_dir / "agent.json"
        try:
            control = json.loads(marker.read_text())["control"]
        except (OSError, ValueError, KeyError) as error:
            raise FaultError(f"no running node agent recorded in {state_dir}: {error}") from error
        return cls(url=str(control["url"]), token=str(control["token"]))

    async def _call(self, action: str, body: dict[str, Any]) -> Answer:
        headers = {"Authorization": f"Bearer {self.token}"}
        try:
            async with httpx.AsyncClient(trust_env=False, timeout=self.timeout) as http:
                answer = await http.post(f"{self.url}/v1/{action}", json=body, headers=headers)
        except httpx.HTTPError as error:
            raise FaultError(f"the node agent at {self.url} did not answer: {error}") from error
        try:
            content: Answer = answer.json()
        except ValueError:
            content = {"error": answer.text[:200]}
        if answer.status_code != 200:
            raise FaultError(f"{action}: {content.get('error', answer.status_code)}")
        return content

    # -- processes

    async def kill(
        self, namespace: str, pod: str, container: str | None = None, signal: str = "KILL"
    ) -> Answer:
        """Signal a container's process group (SIGKILL by default); the agent restarts it per policy."""
        body = {"namespace": namespace, "pod": pod, "container": container, "signal": signal}
        return await self._call("signal", body)

    async def freeze(self, namespace: str, pod: str, container: str | None = None) -> Answer:
        """SIGSTOP the container's process group: it holds its ports and answers nothing."""
        return await self.kill(namespace, pod, container, "STOP")

    async def thaw(self, namespace: str, pod: str, container: str | None = None) -> Answer:
        """SIGCONT the container's process group."""
        return await self.kill(namespace, pod, container, "CONT")

    async def down(self, namespace: str, pod: str, container: str | None = None) -> Answer:
        """SIGKILL the container and keep it down (its ports refuse connections) until :meth:`up`."""
        return await self._call("down", {"namespace": namespace, "pod": pod, "container": container})

    async def up(self, namespace: str, pod: str, container: str | None = None) -> Answer:
        """Let a container held down by :meth:`down` start again."""
        return await self._call("up", {"namespace": namespace, "pod": pod, "container": container})

    async def environment(self, namespace: str, pod: str, container: str | None = None) -> dict[str, str]:
        """The environment a running container's process has."""
        answer = await self._call("environment", {"namespace": namespace, "pod": pod, "container": container})
        return dict(answer["environment"])

    # -- pods

    async def delete_pod(
        self, namespace: str, pod: str, *, grace_period_seconds: int | None = None, wait: bool = True
    ) -> Answer:
        """Delete the pod through the API, as ``kubectl delete pod``; ``wait`` until it is gone."""
        body = {"namespace": namespace, "pod": pod, "gracePeriodSeconds": grace_period_seconds, "wait": wait}
        return await self._call("delete", body)

    async def crash_pods(self, namespace: str, pods: list[str]) -> list[Answer]:
        """A power cut for these pods: SIGKILL, then the pod objects removed at once; returns the old pods."""
        answer = await self._call("crash", {"namespace": namespace, "pods": pods})
        return list(answer["crashed"])

    async def restart_statefulset(self, namespace: str, name: str) -> list[Answer]:
        """Crash every pod of the StatefulSet at once; they come back with new IPs. Returns the old pods."""
        answer = await self._call("restart-statefulset", {"namespace": namespace, "name": name})
        return list(answer["crashed"])

    # -- volumes

    async def wipe_volume(self, namespace: str, claim: str) -> Answer:
        """Remove everything in the claim's volume."""
        return await self._call("wipe", {"namespace": namespace, "claim": claim})

    async def fill_volume(self, namespace: str, claim: str) -> Answer:
        """Fill a size-limited claim's volume to the last byte (``written``, ``free`` in the answer)."""
        return await self._call("fill", {"namespace": namespace, "claim": claim})

    async def free_volume(self, namespace: str, claim: str) -> Answer:
        """Remove what :meth:`fill_volume` wrote."""
        return await self._call("unfill", {"namespace": namespace, "claim": claim})
