"""The agent's control API: faults on demand, served on a loopback port for :mod:`.faults` and the CLI.

The agent is a separate process, so tests and ``operator-suite-dev agent ...`` reach
it over HTTP on ``127.0.0.1:<free port>``; the address and a bearer token are in
the agent's ``agent.json`` (mode 0600, so only its owner can cause faults).
Every request is a POST of a JSON object; the answer is a JSON object, with
``error`` and a 4xx status when the fault cannot be done.

==========================  ==============================================================
``/v1/signal``              signal a container's process group (``KILL``: it is restarted per
                            ``restartPolicy``; ``STOP`` / ``CONT``: freeze and thaw)
``/v1/down`` / ``/v1/up``   SIGKILL a container and keep it down (a dead node's process: its
                            ports refuse connections) / let it restart again
``/v1/environment``         a running container's environment, as its process has it (``/proc``)
``/v1/delete``              delete a pod through the API, as ``kubectl delete pod`` (optionally waiting)
``/v1/crash``               a power cut: SIGKILL every container of the pods, then remove the pod
                            objects at once, so their controllers re-create them (new IPs)
``/v1/restart-statefulset`` :func:`crash` every pod of a StatefulSet at once
``/v1/wipe``                remove everything in a claim's volume
``/v1/fill`` / ``/v1/unfill``  fill a size-limited volume to the last byte / free it again
==========================  ==============================================================
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import os
import signal
import socket
import time
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

from aiohttp import web

from operator_core.kube import Kube
from operator_testkit.nodeagent import disks
from operator_testkit.nodeagent.pods import PodWorker

__all__ = ["ControlServer", "FaultTarget"]

log = logging.getLogger(__name__)

Manifest = dict[str, Any]
Handler = Callable[[Mapping[str, Any]], Awaitable[Manifest]]
DELETE_WAIT_SECONDS = 120.0


class FaultTarget(Protocol):
    """What the control API needs from the agent."""

    kube: Kube

    def worker_for(self, namespace: str, pod: str) -> PodWorker | None: ...

    async def claim_path(self, namespace: str, claim: str) -> Path: ...


class _Refused(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _text(body: Mapping[str, Any], key: str) -> str:
    value = body.get(key)
    if not isinstance(value, str) or not value:
        raise _Refused(400, f"{key!r} is required")
    return value


def _signal_number(name: object) -> int:
    text = str(name or "KILL").upper().removeprefix("SIG")
    try:
        return int(signal.Signals[f"SIG{text}"])
    except KeyError:
        raise _Refused(400, f"unknown signal {name!r}") from None


class ControlServer:
    """The HTTP server; :meth:`start` returns its URL."""

    def __init__(self, agent: FaultTarget, token: str) -> None:
        self._agent = agent
        self._token = token
        self._runner: web.AppRunner | None = None
        self._routes: dict[str, Handler] = {
            "signal": self.signal,
            "down": self.down,
            "up": self.up,
            "environment": self.environment,
            "delete": self.delete,
            "crash": self.crash,
            "restart-statefulset": self.restart_statefulset,
            "wipe": self.wipe,
            "fill": self.fill,
            "unfill": self.unfill,
        }

    async def start(self) -> str:
        app = web.Application()
        app.router.add_post("/v1/{action}", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.bind(("127.0.0.1", 0))
        await web.SockSite(self._runner, listener).start()
        return f"http://127.0.0.1:{listener.getsockname()[1]}"

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _handle(self, request: web.Request) -> web.Response:
        offered = request.headers.get("Authorization", "").removeprefix("Bearer ")
        if not hmac.compare_digest(offered.encode(), self._token.encode()):
            return web.json_response({"error": "unauthorized"}, status=401)
        action = self._routes.get(request.match_info["action"])
        if action is None:
            return web.json_response({"error": "no such action"}, status=404)
        try:
            body = await request.json()
            if not isinstance(body, dict):
                raise _Refused(400, "the body must be a JSON object")
            log.info("control: %s %s", request.match_info["action"], json.dumps(body, sort_keys=True))
            return web.json_response(await action(body))
        except _Refused as refused:
            return web.json_response({"error": str(refused)}, status=refused.status)
        except LookupError as error:
            return web.json_response({"error": str(error)}, status=404)
        except ValueError as error:
            return web.json_response({"error": str(error)}, status=400)

    def _worker(self, namespace: str, pod: str) -> PodWorker:
        worker = self._agent.worker_for(namespace, pod)
        if worker is None:
            raise _Refused(404, f"pod {namespace}/{pod} does not run on this agent")
        return worker

    # -- the faults

    async def signal(self, body: Mapping[str, Any]) -> Manifest:
        worker = self._worker(_text(body, "namespace"), _text(body, "pod"))
        number = _signal_number(body.get("signal"))
        run = worker.container_run(body.get("container"))
        process = run.process
        if process is None or process.returncode is not None:
            raise _Refused(409, f"container {run.name} of {worker.key} is not running")
        process.signal(number)
        log.info("pod %s: sent %s to container %s", worker.key, signal.Signals(number).name, run.name)
        return {
            "pod": worker.key,
            "container": run.name,
            "pid": process.pid,
            "restartCount": run.restart_count,
        }

    async def down(self, body: Mapping[str, Any]) -> Manifest:
        worker = self._worker(_text(body, "namespace"), _text(body, "pod"))
        run = worker.container_run(body.get("container"))
        run.hold_down()
        process = run.process
        if process is not None and process.returncode is None:
            process.signal(signal.SIGKILL)
            await process.wait()
        log.info("pod %s: container %s is held down", worker.key, run.name)
        return {"pod": worker.key, "container": run.name, "down": True}

    async def up(self, body: Mapping[str, Any]) -> Manifest:
        worker = self._worker(_text(body, "namespace"), _text(body, "pod"))
        run = worker.container_run(body.get("container"))
        run.release()
        return {"pod": worker.key, "container": run.name, "down": False}

    async def environment(self, body: Mapping[str, Any]) -> Manifest:
        """What a test cannot see through the API: the environment a container's process really got."""
        worker = self._worker(_text(body, "namespace"), _text(body, "pod"))
        run = worker.container_run(body.get("container"))
        process = run.process
        if process is None or process.returncode is not None:
            raise _Refused(409, f"container {run.name} of {worker.key} is not running")
        environ = Path(f"/proc/{process.pid}/environ")
        raw = (await asyncio.to_thread(environ.read_bytes)).decode(errors="replace")
        variables = dict(item.split("=", 1) for item in raw.split("\0") if "=" in item)
        return {"pod": worker.key, "container": run.name, "pid": process.pid, "environment": variables}

    async def delete(self, body: Mapping[str, Any]) -> Manifest:
        namespace, name = _text(body, "namespace"), _text(body, "pod")
        grace = body.get("gracePeriodSeconds")
        kube = self._agent.kube
        existed = await kube.delete("v1", "Pod", name, namespace, grace_period=grace)
        if not existed:
            raise _Refused(404, f"pod {namespace}/{name} not found")
        if body.get("wait"):
            deadline = time.monotonic() + DELETE_WAIT_SECONDS
            while await kube.get("v1", "Pod", name, namespace) is not None:
                if time.monotonic() > deadline:
                    raise _Refused(504, f"pod {namespace}/{name} is still there")
                await asyncio.sleep(0.3)
        return {"pod": f"{namespace}/{name}", "deleted": True}

    async def _crash(self, namespace: str, pods: list[Manifest]) -> list[Manifest]:
        """SIGKILL every container of ``pods`` at once, then remove the pod objects at once."""
        workers = [self._agent.worker_for(namespace, p["metadata"]["name"]) for p in pods]
        await asyncio.gather(*(w.crash() for w in workers if w is not None))
        kube = self._agent.kube
        await asyncio.gather(
            *(kube.delete("v1", "Pod", p["metadata"]["name"], namespace, grace_period=0) for p in pods)
        )
        return [
            {
                "name": p["metadata"]["name"],
                "uid": p["metadata"]["uid"],
                "podIP": (p.get("status") or {}).get("podIP"),
            }
            for p in pods
        ]

    async def crash(self, body: Mapping[str, Any]) -> Manifest:
        namespace = _text(body, "namespace")
        names = body.get("pods")
        if not isinstance(names, list) or not names:
            raise _Refused(400, "'pods' must be a list of pod names")
        pods = []
        for name in names:
            pod = await self._agent.kube.get("v1", "Pod", str(name), namespace)
            if pod is None:
                raise _Refused(404, f"pod {namespace}/{name} not found")
            pods.append(pod)
        return {"crashed": await self._crash(namespace, pods)}

    async def restart_statefulset(self, body: Mapping[str, Any]) -> Manifest:
        namespace, name = _text(body, "namespace"), _text(body, "name")
        pods = [
            pod
            for pod in await self._agent.kube.list("v1", "Pod", namespace)
            if any(
                o.get("kind") == "StatefulSet" and o.get("name") == name
                for o in pod["metadata"].get("ownerReferences") or []
            )
        ]
        if not pods:
            raise _Refused(404, f"statefulset {namespace}/{name} has no pods")
        return {"crashed": await self._crash(namespace, pods)}

    async def wipe(self, body: Mapping[str, Any]) -> Manifest:
        path = await self._agent.claim_path(_text(body, "namespace"), _text(body, "claim"))
        return {"path": str(path), "removed": await asyncio.to_thread(disks.wipe, path)}

    async def fill(self, body: Mapping[str, Any]) -> Manifest:
        path = await self._agent.claim_path(_text(body, "namespace"), _text(body, "claim"))
        if not disks.is_mount_point(path):
            raise _Refused(409, f"the claim's volume is not size-limited ({disks.SIZE_LIMITED_CLASS} class)")
        written = await asyncio.to_thread(disks.fill, path)
        usage = os.statvfs(path)
        return {"path": str(path), "written": written, "free": usage.f_bavail * usage.f_frsize}

    async def unfill(self, body: Mapping[str, Any]) -> Manifest:
        path = await self._agent.claim_path(_text(body, "namespace"), _text(body, "claim"))
        return {"path": str(path), "freed": await asyncio.to_thread(disks.unfill, path)}
