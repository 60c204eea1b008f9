"""``operator-suite-dev agent ...``: the faults of :mod:`.faults` from a shell.

:func:`add_agent_commands` adds the ``agent`` command to ``operator-suite-dev``'s
subparsers; each subcommand sets ``run`` to a function of the parsed arguments
that returns the exit code, as the other commands do. ``--dir`` is the agent's
state directory, or a sandbox directory (its agent lives in ``DIR/nodeagent``)::

    operator-suite-dev agent kill ts-0 -n default [-c typesense] [--signal TERM]
    operator-suite-dev agent freeze ts-1 ; operator-suite-dev agent thaw ts-1
    operator-suite-dev agent down ts-1 ; operator-suite-dev agent up ts-1
    operator-suite-dev agent delete-pod ts-2 [--grace-period 0] [--no-wait]
    operator-suite-dev agent restart-statefulset ts
    operator-suite-dev agent wipe data-ts-0
    operator-suite-dev agent fill data-ts-0 ; operator-suite-dev agent free data-ts-0

Each prints the agent's JSON answer.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from operator_testkit.nodeagent.faults import Faults

__all__ = ["DEFAULT_AGENT_DIR", "add_agent_commands", "agent_dir"]

DEFAULT_AGENT_DIR = Path.home() / ".local" / "state" / "operator-suite" / "sandbox"

Action = Callable[[Faults, argparse.Namespace], Coroutine[Any, Any, Any]]


def agent_dir(directory: Path) -> Path:
    """The agent's state directory: ``directory`` itself, or the ``nodeagent`` of a sandbox there."""
    if not (directory / "agent.json").exists() and (directory / "nodeagent" / "agent.json").exists():
        return directory / "nodeagent"
    return directory


def _runner(action: Action) -> Callable[[argparse.Namespace], int]:
    def run(arguments: argparse.Namespace) -> int:
        faults = Faults.of(agent_dir(arguments.dir.resolve()))
        print(json.dumps(asyncio.run(action(faults, arguments)), indent=2))
        return 0

    return run


def _add(actions: Any, name: str, help_text: str, target: str, action: Action) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = actions.add_parser(name, help=help_text)
    parser.add_argument(target, help=f"the {target}'s name")
    parser.add_argument("-n", "--namespace", default="default", help="(%(default)s)")
    parser.add_argument(
        "--dir",
        type=Path,
        default=DEFAULT_AGENT_DIR,
        help="the agent's state directory, or a sandbox directory (%(default)s)",
    )
    parser.set_defaults(run=_runner(action))
    return parser


def _signal(fixed: str | None) -> Action:
    def act(faults: Faults, a: argparse.Namespace) -> Coroutine[Any, Any, Any]:
        return faults.kill(a.namespace, a.pod, a.container, fixed or a.signal)

    return act


def _container(method: Callable[[Faults, str, str, str | None], Coroutine[Any, Any, Any]]) -> Action:
    def act(faults: Faults, a: argparse.Namespace) -> Coroutine[Any, Any, Any]:
        return method(faults, a.namespace, a.pod, a.container)

    return act


def _volume(method: Callable[[Faults, str, str], Coroutine[Any, Any, Any]]) -> Action:
    def act(faults: Faults, a: argparse.Namespace) -> Coroutine[Any, Any, Any]:
        return method(faults, a.namespace, a.claim)

    return act


def add_agent_commands(subparsers: Any) -> None:
    """Add ``agent`` and its fault subcommands to a parser's ``add_subparsers()`` object."""
    agent = subparsers.add_parser("agent", help="faults on demand in the node agent's pods and volumes")
    actions = agent.add_subparsers(dest="action", required=True)

    for name, signal, text in (
        ("kill", None, "signal a container (SIGKILL by default); it is restarted per restartPolicy"),
        ("freeze", "STOP", "SIGSTOP a container's processes"),
        ("thaw", "CONT", "SIGCONT a container's processes"),
    ):
        parser = _add(actions, name, text, "pod", _signal(signal))
        parser.add_argument("-c", "--container", default=None, help="(the pod's first container)")
        if signal is None:
            parser.add_argument("--signal", default="KILL", help="a signal name (%(default)s)")

    for name, text, fault in (
        ("down", "kill a container and keep it down until `up`", Faults.down),
        ("up", "let a container held down by `down` start again", Faults.up),
    ):
        parser = _add(actions, name, text, "pod", _container(fault))
        parser.add_argument("-c", "--container", default=None, help="(the pod's first container)")

    delete = _add(
        actions,
        "delete-pod",
        "delete a pod through the API, as kubectl delete pod",
        "pod",
        lambda f, a: f.delete_pod(
            a.namespace, a.pod, grace_period_seconds=a.grace_period, wait=not a.no_wait
        ),
    )
    delete.add_argument("--grace-period", type=int, default=None)
    delete.add_argument("--no-wait", action="store_true", help="return once the deletion is requested")

    _add(
        actions,
        "restart-statefulset",
        "crash every pod of a StatefulSet at once; they come back with new IPs",
        "statefulset",
        lambda f, a: f.restart_statefulset(a.namespace, a.statefulset),
    )
    for name, text, method in (
        ("wipe", "remove everything in a claim's volume", Faults.wipe_volume),
        ("fill", "fill a size-limited claim's volume to the last byte", Faults.fill_volume),
        ("free", "remove what fill wrote", Faults.free_volume),
    ):
        _add(actions, name, text, "claim", _volume(method))
