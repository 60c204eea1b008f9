"""Start one operator process: its settings, its probes, its Lease, then the operator until SIGTERM or SIGINT.

Each operator's console script calls :func:`run_operator` with its name, the module that describes
it (an ``OPERATOR``: an :class:`operator_core.controller.Operator`), and its own settings types. The
options are the same for all three, so that operating them feels the same.

- Every setting is read first: a bad OPERATOR_SUITE_* value stops the operator (exit code 2, one line
  that names the variable and what is allowed) before it imports its controllers or connects.
- The probe server (``/healthz``, ``/readyz``, ``/metrics``) starts next, so that a standby answers too.
- With ``--leader-elect``, the process waits for its Lease, and exits at once (code 1) if it loses it.
- The operator runs until SIGTERM or SIGINT: its reconciles in flight get their grace, then are
  cancelled; it releases the Lease, and the process exits 0.
- What the operator cannot start without (a kubeconfig it can read, credentials the API server takes,
  an API server that answers within :data:`operator_core.starting.START_SECONDS`, its own CRDs)
  ends the process with code 1 and one line that says why (:class:`operator_core.errors.StartFailed`);
  the pod then restarts with back-off, as a controller-runtime manager's does.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import logging
import os
import signal
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any, Protocol

from operator_core.errors import SettingsError, StartFailed
from operator_core.identity import process_identity
from operator_core.kube import ApiOutages, Kube
from operator_core.leader import LeaderElectionSettings, LeaderElector, default_namespace
from operator_core.logs import LOG_FORMATS, LOG_LEVELS, LogFormat, LogLevel, configure_logging
from operator_core.metrics import ReplicaState, serve_probes
from operator_core.reconciling import connect_client, unless_stopped
from operator_core.settings import KubeSettings, from_env

__all__ = ["ProcessSettings", "Runnable", "check_settings", "parse_operator_arguments", "run_operator"]


class Runnable(Protocol):
    """What the runner runs: an operator (:class:`operator_core.controller.Operator`)."""

    replica: ReplicaState
    """What /readyz says: the runner tells it whether this replica leads."""
    outages: ApiOutages
    """The process's memory of API server outages, which the Lease's client shares."""

    async def run(self, stopping: asyncio.Event, namespaces: tuple[str, ...] | None = None) -> None:
        """Start, work until ``stopping`` is set, then stop cleanly; raise :class:`StartFailed` when
        something it cannot start without is wrong. ``namespaces``: watch only these (None: all)."""
        ...

    def health(self) -> dict[str, Any]:
        """What ``/healthz`` shows beside "alive": reconciles counted, the caches' state."""
        ...

    def serving(self) -> contextlib.AbstractAsyncContextManager[object]:
        """What the process serves whether it leads or stands by, for its whole life."""
        ...

    async def check_can_start(self, kube: Kube) -> None:
        """Raise :class:`StartFailed` when the API server does not answer, refuses the credentials, or
        does not serve the operator's kinds."""
        ...


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
    operator_module: str,
    argv: Sequence[str] | None = None,
    *,
    settings: Sequence[type[Any]] = (),
    checks: Sequence[Callable[[], object]] = (),
) -> None:
    """Check the settings, import the operator, then run it until SIGTERM or SIGINT (as the leader,
    once elected, with ``--leader-elect``)."""
    arguments = parse_operator_arguments(name, argv)
    check_settings(name, settings, checks)
    health = _address(name, arguments.health_address)
    if arguments.kubeconfig:
        os.environ["KUBECONFIG"] = str(arguments.kubeconfig.resolve())
    configure_logging("debug" if arguments.verbose else arguments.log_level, arguments.log_format)
    # One line per HTTP request (a node probe every few seconds) would bury what matters; they are
    # there with --log-level debug.
    if not arguments.verbose and arguments.log_level != "debug":
        for quiet_logger in ("httpx2", "httpcore"):
            logging.getLogger(quiet_logger).setLevel(logging.WARNING)
    operator: Runnable = importlib.import_module(operator_module).OPERATOR
    election = from_env(LeaderElectionSettings)
    if arguments.leader_elect is not None:
        election = replace(election, leader_election=arguments.leader_elect)
    namespaces = tuple(arguments.namespace) or None
    try:
        asyncio.run(_lead_then_run(name, operator, health, election, namespaces))
    except StartFailed as failure:
        logging.getLogger(name).debug("start failed", exc_info=True)
        print(f"{name}: cannot start: {failure}", file=sys.stderr, flush=True)
        raise SystemExit(1) from None


async def _lead_then_run(
    name: str,
    operator: Runnable,
    health: tuple[str, int] | None,
    election: LeaderElectionSettings,
    namespaces: tuple[str, ...] | None,
) -> None:
    """Serve the probes, win the Lease when electing, run the operator; release the Lease after a
    clean stop.

    A leader that loses its Lease exits at once with code 1 (:meth:`LeaderElector.keep`): it must
    not act any more, and its pod's restart makes it a standby.
    """
    loop = asyncio.get_running_loop()
    # One flag for the whole life: a SIGTERM while standing by ends the wait, and one while the
    # operator runs stops it (its reconciles in flight get their grace).
    stopping = asyncio.Event()
    for signal_number in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signal_number, stopping.set)
    server = None
    if health is not None:
        server = await serve_probes(*health, operator.replica, health=operator.health)
    try:
        async with operator.serving():
            if not election.leader_election:
                operator.replica.leading(True)
                await operator.run(stopping, namespaces)
                return
            await _run_as_leader(name, operator, election, stopping, namespaces)
    finally:
        if server is not None:
            await server.cleanup()


async def _run_as_leader(
    name: str,
    operator: Runnable,
    election: LeaderElectionSettings,
    stopping: asyncio.Event,
    namespaces: tuple[str, ...] | None,
) -> None:
    kube = connect_client(operator.outages)
    elector = LeaderElector(
        kube,
        election,
        name=election.leader_election_lease or f"{name}-leader",
        namespace=election.leader_election_namespace or default_namespace(),
        identity=process_identity(),
        replica=operator.replica,
    )
    operator.replica.leading(False)
    try:
        # Before standing by: a replica that waited for its Lease on an API server it cannot use would
        # retry for ever, instead of saying why and letting its pod restart with back-off.
        checked, _ = await unless_stopped(operator.check_can_start(kube), stopping)
        if not checked or not await elector.acquire(stopping):
            return
        operator.replica.leading(True)

        def leadership_lost() -> None:
            # Another replica may lead within a few seconds: act no more, at once (no clean-up).
            logging.getLogger(__name__).error("leadership lost: exiting so that only one replica acts")
            sys.stderr.flush()
            os._exit(1)

        keeping = asyncio.create_task(elector.keep(leadership_lost), name="lease renewal")
        try:
            await operator.run(stopping, namespaces)
        finally:
            keeping.cancel()
            await asyncio.gather(keeping, return_exceptions=True)
        await elector.release()
    finally:
        operator.replica.leading(False)
        await kube.close()
