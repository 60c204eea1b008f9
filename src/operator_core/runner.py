"""Start one operator process: kopf, pointed at a kubeconfig or the in-cluster config.

Each operator's console script calls :func:`run_operator` with its name, the
module that registers its kopf handlers, and its own settings types. The
options are the same for all three, so that operating them feels the same.
Every setting is read first: a bad OPERATOR_SUITE_* value stops the operator
(exit code 2, one line that names the variable and what is allowed) before
it imports its handlers or connects to any cluster.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import logging
import os
import signal
import sys
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

import aiohttp
import kopf

from operator_core.errors import SettingsError
from operator_core.identity import pod_name, process_identity
from operator_core.kube import Kube
from operator_core.leader import LeaderElectionSettings, LeaderElector, default_namespace
from operator_core.logs import LOG_FORMATS, LOG_LEVELS, LogFormat, LogLevel, configure_logging
from operator_core.metrics import REPLICA, count_request, serve_probes
from operator_core.settings import KubeSettings, from_env

__all__ = ["ProcessSettings", "check_settings", "configure_kopf", "parse_operator_arguments", "run_operator"]


def parse_operator_arguments(name: str, argv: Sequence[str] | None = None) -> argparse.Namespace:
    try:
        process = from_env(ProcessSettings)
    except SettingsError as error:
        print(f"{name}: {error}", file=sys.stderr)
        raise SystemExit(2) from None
    parser = argparse.ArgumentParser(prog=name, description=f"Run the {name} against a Kubernetes cluster.")
    parser.add_argument(
        "--kubeconfig",
        type=Path,
        help="kubeconfig file; default: in-cluster config, $KUBECONFIG, ~/.kube/config",
    )
    parser.add_argument(
        "--namespace", "-n", action="append", default=[], help="watch only this namespace (repeatable)"
    )
    parser.add_argument(
        "--liveness",
        default=None,
        help="kopf's own liveness endpoint URL, with its probes' answers (e.g. http://0.0.0.0:8080/healthz); "
        "default: none (--health-address serves /healthz)",
    )
    parser.add_argument(
        "--health-address",
        default=process.health_address,
        help="host:port serving /healthz, /readyz and /metrics (default: %(default)s; "
        "OPERATOR_SUITE_HEALTH_ADDRESS); an empty value serves none",
    )
    parser.add_argument(
        "--log-level", choices=LOG_LEVELS, default=process.log_level, help="default: %(default)s"
    )
    parser.add_argument(
        "--log-format", choices=LOG_FORMATS, default=process.log_format, help="default: %(default)s"
    )
    parser.add_argument("--verbose", action="store_true", help="debug logging (--log-level debug)")
    parser.add_argument(
        "--leader-elect",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="elect a leader among replicas with a Lease (default: OPERATOR_SUITE_LEADER_ELECTION, off)",
    )
    return parser.parse_args(argv)


@dataclass(frozen=True)
class ProcessSettings:
    """How an operator process logs and where it answers its probes (a flag overrides each)."""

    log_level: LogLevel = "info"
    """The least severe records logged."""
    log_format: LogFormat = "text"
    """``json``: one JSON object per line, with the object and namespace as fields."""
    health_address: str = "0.0.0.0:8081"
    """host:port of /healthz (alive), /readyz (ready to act or to stand by) and /metrics."""


def check_settings(
    name: str, settings_types: Sequence[type[Any]], checks: Sequence[Callable[[], object]] = ()
) -> None:
    """Read every settings type once, then run ``checks`` (settings that only make sense together);
    exit with code 2 and the reason when one is refused."""
    types: list[type[Any]] = [KubeSettings, ProcessSettings, LeaderElectionSettings, *settings_types]
    every: list[Callable[[], object]] = [
        *(partial(from_env, kind) for kind in types),
        lambda: from_env(LeaderElectionSettings).check(),
        *checks,
    ]
    for check in every:
        try:
            check()
        except SettingsError as error:
            print(f"{name}: {error}", file=sys.stderr)
            raise SystemExit(2) from None


def _address(name: str, value: str) -> tuple[str, int] | None:
    """``host:port`` as a pair; None for an empty value; exit code 2 with the reason otherwise, as for
    every refused setting."""
    if not value:
        return None
    host, _, port = value.rpartition(":")
    if not port.isdigit() or not 0 < int(port) < 65536:
        print(f"{name}: --health-address {value!r}: expected host:port, e.g. 0.0.0.0:8081", file=sys.stderr)
        raise SystemExit(2)
    return host or "0.0.0.0", int(port)  # noqa: S104 -- a pod's probes come from its node


def run_operator(
    name: str,
    handlers_module: str,
    argv: Sequence[str] | None = None,
    *,
    settings: Sequence[type[Any]] = (),
    checks: Sequence[Callable[[], object]] = (),
) -> None:
    """Check the settings, import the handlers, then run kopf until SIGTERM or SIGINT (as the leader,
    once elected, with ``--leader-elect``)."""
    arguments = parse_operator_arguments(name, argv)
    check_settings(name, settings, checks)
    health = _address(name, arguments.health_address)
    if arguments.kubeconfig:
        os.environ["KUBECONFIG"] = str(arguments.kubeconfig.resolve())
    configure_logging("debug" if arguments.verbose else arguments.log_level, arguments.log_format)
    # One line per HTTP request (a node probe every few seconds, each API call), and one per handled
    # watch event, would bury what matters; they are there with --log-level debug.
    if not arguments.verbose and arguments.log_level != "debug":
        for quiet_logger in ("httpx", "httpx2", "httpcore", "kopf.objects"):
            logging.getLogger(quiet_logger).setLevel(logging.WARNING)
    importlib.import_module(handlers_module)
    election = from_env(LeaderElectionSettings)
    if arguments.leader_elect is not None:
        election = replace(election, leader_election=arguments.leader_elect)
    namespaces = arguments.namespace
    _watch_only(namespaces)
    kopf_run = partial(
        kopf.operator,
        clusterwide=not namespaces,
        namespaces=namespaces,
        standalone=True,
        liveness_endpoint=arguments.liveness,
        # kopf's default id asks the user database (getpass), which has no entry for a pod's user.
        identity=pod_name(),  # type: ignore[arg-type]  # kopf.peering.Identity is a NewType of str
    )
    asyncio.run(_quiet_at_exit(_lead_then_run(name, kopf_run, health, election)))


async def _lead_then_run(
    name: str,
    kopf_run: Callable[..., Coroutine[Any, Any, None]],
    health: tuple[str, int] | None,
    election: LeaderElectionSettings,
) -> None:
    """Serve the probes, win the Lease when electing, run kopf; release the Lease after a clean stop.

    A leader that loses its Lease exits at once with code 1 (:meth:`LeaderElector.keep`): it must
    not act any more, and its pod's restart makes it a standby.
    """
    server = await serve_probes(*health) if health is not None else None
    try:
        if not election.leader_election:
            REPLICA.leading(True)
            await kopf_run()
            return
        await _run_as_leader(name, kopf_run, election)
    finally:
        if server is not None:
            await server.cleanup()


async def _run_as_leader(
    name: str, kopf_run: Callable[..., Coroutine[Any, Any, None]], election: LeaderElectionSettings
) -> None:
    loop = asyncio.get_running_loop()
    # One flag for the whole life: a SIGTERM while standing by ends the wait, and one that comes
    # before kopf has installed its own handlers still stops kopf (its stop flag).
    stopping = asyncio.Event()
    for signal_number in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signal_number, stopping.set)
    kube = Kube.connect(on_request=count_request)
    elector = LeaderElector(
        kube,
        election,
        name=election.leader_election_lease or f"{name}-leader",
        namespace=election.leader_election_namespace or default_namespace(),
        identity=process_identity(),
    )
    REPLICA.leading(False)
    try:
        if not await elector.acquire(stopping):
            return
        REPLICA.leading(True)

        def leadership_lost() -> None:
            # Another replica may lead within a few seconds: act no more, at once (no clean-up handlers).
            logging.getLogger(__name__).error("leadership lost: exiting so that only one replica acts")
            sys.stderr.flush()
            os._exit(1)

        keeping = asyncio.create_task(elector.keep(leadership_lost), name="lease renewal")
        try:
            await _run_kopf_until(kopf_run, stopping)
        finally:
            keeping.cancel()
            await asyncio.gather(keeping, return_exceptions=True)
        await elector.release()
    finally:
        REPLICA.leading(False)
        await kube.close()


async def _run_kopf_until(
    kopf_run: Callable[..., Coroutine[Any, Any, None]], stopping: asyncio.Event
) -> None:
    """Run kopf until ``stopping`` is set (by SIGTERM or SIGINT, or before kopf started).

    kopf puts signal handlers of its own in as it starts. They stop it too, but leave its waiter of
    the stop flag pending, and kopf then gives that waiter 5 s before it returns: the Lease was
    released 5 s late. Once kopf is ready, the signals set ``stopping`` again, and kopf stops
    through its flag at once.
    """
    ready = asyncio.Event()
    running = asyncio.create_task(kopf_run(stop_flag=stopping, ready_flag=ready))
    readying = asyncio.create_task(ready.wait())
    try:
        await asyncio.wait({running, readying}, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        running.cancel()
        raise
    finally:
        readying.cancel()
    if ready.is_set():
        loop = asyncio.get_running_loop()
        for signal_number in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signal_number, stopping.set)
    await running


async def _quiet_at_exit(operator: Coroutine[Any, Any, None]) -> None:
    asyncio.get_running_loop().set_exception_handler(_report_loop_error)
    await operator


_KOPF_API_SCANS = frozenset({"_read_new_apis", "_read_old_api"})


def _report_loop_error(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """Pass every loop error on, except two harmless kopf races, which get one line and no traceback.

    - A kopf watcher cancelled between two events leaves its watch generators
      suspended. At exit, asyncio closes every such generator at once, in no fixed
      order, so kopf's inner streaming_block can be closed before the
      infinite_watch generator that is still inside it. contextlib then complains
      that the closed inner generator "didn't stop after athrow()", while nothing
      is left undone.
    - kopf's API scan (``_read_new_apis`` for the groups, ``_read_old_api`` for the
      core API) runs as tasks that nobody awaits. When a connection closes under one
      (an operator stopped while it scans), asyncio reports the lost exception with a
      traceback; kopf scans again by itself.
    """
    log = logging.getLogger(__name__)
    generator = context.get("asyncgen")
    error = context.get("exception")
    task = context.get("future")
    if (
        isinstance(error, RuntimeError)
        and "didn't stop after athrow()" in str(error)
        and getattr(generator, "__qualname__", None) == "infinite_watch"
    ):
        log.debug("kopf watch stream closed out of order at exit")
        return
    coroutine = task.get_coro() if isinstance(task, asyncio.Task) else None
    if isinstance(error, aiohttp.ClientConnectionError) and getattr(coroutine, "__qualname__", None) in (
        _KOPF_API_SCANS
    ):
        log.warning("kopf's scan of the served APIs lost its connection: %s", error)
        return
    loop.default_exception_handler(context)


_watched_namespaces: tuple[str, ...] | None = None


def _watch_only(namespaces: Sequence[str]) -> None:
    global _watched_namespaces  # one scope per process, set once before kopf starts, as kopf's own
    _watched_namespaces = tuple(namespaces) or None


def watched_namespaces() -> tuple[str, ...] | None:
    """The namespaces this process watches (``--namespace``; None: every one). Its controllers' watch
    caches list and watch only there, which is all a namespace-scoped operator's Roles allow."""
    return _watched_namespaces


def kopf_finalizer(api_group: str) -> str:
    """The finalizer kopf puts on the objects its daemons run for, in this suite."""
    return f"{api_group}/finalizer"


def configure_kopf(settings: kopf.OperatorSettings, api_group: str) -> None:
    """Settings every operator of the suite shares; called from each operator's startup handler."""
    # kopf watches no resource of ours (the watch caches start the loops, decision 20); should a kopf
    # resource handler come back, its finalizer, progress and diff-base are under the operator's own
    # API group, so that they never clash between operators watching the same objects.
    settings.persistence.finalizer = kopf_finalizer(api_group)
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=api_group)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=api_group, key="last-handled-configuration"
    )
    # Our own Events carry a fixed vocabulary; kopf's per-handler chatter would drown them.
    settings.posting.level = logging.WARNING
    settings.watching.server_timeout = 270
    settings.networking.request_timeout = 30
