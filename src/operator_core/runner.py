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
import sys
from collections.abc import Callable, Coroutine, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import aiohttp
import kopf

from operator_core.errors import SettingsError
from operator_core.secrets import install_log_scrubbing
from operator_core.settings import KubeSettings, from_env

__all__ = ["check_settings", "configure_kopf", "parse_operator_arguments", "run_operator"]


def parse_operator_arguments(name: str, argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=name, description=f"Run the {name} against a Kubernetes cluster.")
    parser.add_argument(
        "--kubeconfig",
        type=Path,
        help="kubeconfig file; default: in-cluster config, $KUBECONFIG, ~/.kube/config",
    )
    parser.add_argument(
        "--namespace", "-n", action="append", default=[], help="watch only this namespace (repeatable)"
    )
    parser.add_argument("--liveness", default="http://0.0.0.0:8080/healthz", help="liveness endpoint URL")
    parser.add_argument("--verbose", action="store_true", help="debug logging")
    return parser.parse_args(argv)


def check_settings(
    name: str, settings_types: Sequence[type[Any]], checks: Sequence[Callable[[], object]] = ()
) -> None:
    """Read every settings type once, then run ``checks`` (settings that only make sense together);
    exit with code 2 and the reason when one is refused."""
    types: list[type[Any]] = [KubeSettings, *settings_types]
    every: list[Callable[[], object]] = [*(partial(from_env, kind) for kind in types), *checks]
    for check in every:
        try:
            check()
        except SettingsError as error:
            print(f"{name}: {error}", file=sys.stderr)
            raise SystemExit(2) from None


def run_operator(
    name: str,
    handlers_module: str,
    argv: Sequence[str] | None = None,
    *,
    settings: Sequence[type[Any]] = (),
    checks: Sequence[Callable[[], object]] = (),
) -> None:
    """Check the settings, import the handlers, then run kopf until SIGTERM or SIGINT."""
    arguments = parse_operator_arguments(name, argv)
    check_settings(name, settings, checks)
    if arguments.kubeconfig:
        os.environ["KUBECONFIG"] = str(arguments.kubeconfig.resolve())
    logging.basicConfig(
        level=logging.DEBUG if arguments.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    # One line per HTTP request (a node probe every few seconds, each API call), and one per handled
    # watch event, would bury what matters; they are there with --verbose.
    if not arguments.verbose:
        for client_logger in ("httpx", "httpx2", "httpcore"):
            logging.getLogger(client_logger).setLevel(logging.WARNING)
    if not arguments.verbose:
        logging.getLogger("kopf.objects").setLevel(logging.WARNING)
    install_log_scrubbing()
    importlib.import_module(handlers_module)
    namespaces = arguments.namespace
    asyncio.run(
        _quiet_at_exit(
            kopf.operator(
                clusterwide=not namespaces,
                namespaces=namespaces,
                standalone=True,
                liveness_endpoint=arguments.liveness,
            )
        )
    )


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


def configure_kopf(settings: kopf.OperatorSettings, api_group: str) -> None:
    """Settings every operator of the suite shares; called from each operator's startup handler."""
    # Progress and diff-base live in annotations under the operator's own API group,
    # so that they never clash between operators watching the same objects.
    settings.persistence.finalizer = f"{api_group}/finalizer"
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=api_group)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=api_group, key="last-handled-configuration"
    )
    # Our own Events carry a fixed vocabulary; kopf's per-handler chatter would drown them.
    settings.posting.level = logging.WARNING
    settings.watching.server_timeout = 270
    settings.networking.request_timeout = 30
