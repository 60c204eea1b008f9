"""``operator-suite-dev nodes ...``: the faults of :mod:`.faults` and :mod:`.power` from a shell, on a
running sandbox's real nodes.

:func:`add_nodes_commands` adds the ``nodes`` command to ``operator-suite-dev``'s subparsers; each
subcommand sets ``run`` to a function of the parsed arguments that returns the exit code, as the
other commands do. ``--dir`` is a sandbox's directory (its nodes live in ``DIR/cluster``)::

    operator-suite-dev nodes kill cluster-1-sts-0 [-n default] [-c typesense] [--signal TERM]
    operator-suite-dev nodes freeze cluster-1-sts-1 ; operator-suite-dev nodes thaw cluster-1-sts-1
    operator-suite-dev nodes down cluster-1-sts-1 ; operator-suite-dev nodes up cluster-1-sts-1
    operator-suite-dev nodes partition cluster-1-sts-2 ; operator-suite-dev nodes heal cluster-1-sts-2
    operator-suite-dev nodes delete-pod cluster-1-sts-2 [--grace-period 0] [--no-wait]
    operator-suite-dev nodes restart-statefulset cluster-1-sts
    operator-suite-dev nodes wipe data-cluster-1-sts-0
    operator-suite-dev nodes fill data-cluster-1-sts-0 ; operator-suite-dev nodes free data-cluster-1-sts-0
    operator-suite-dev nodes power-cut node-b ; operator-suite-dev nodes reboot node-b [--timeout 120]
    operator-suite-dev nodes isolate node-c ; operator-suite-dev nodes reconnect node-c
    operator-suite-dev nodes drain node-a [--timeout 60] [--force] ; operator-suite-dev nodes uncordon node-a

Each prints what it did as JSON; a fault that cannot be made says why and exits 1.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any

from operator_testkit.errors import ControlPlaneError

if TYPE_CHECKING:
    from operator_testkit.nodes.faults import NodeFaults
    from operator_testkit.nodes.power import NodePower

# What a fault needs (the API client, the nodes' records) is imported when a fault is made, not with
# the parser: every command of operator-suite-dev builds it, and most of them need none of that.

__all__ = ["DEFAULT_SANDBOX_DIR", "add_nodes_commands"]

DEFAULT_SANDBOX_DIR = Path.home() / ".local" / "state" / "operator-suite" / "sandbox"

Action = Callable[["NodeFaults", argparse.Namespace], Coroutine[Any, Any, Any]]
NodeAction = Callable[["NodePower", argparse.Namespace], Any]


def _sandbox_cluster(arguments: argparse.Namespace) -> Path | None:
    """The sandbox's cluster directory, or None (said on stderr) when no sandbox runs there."""
    from operator_testkit.nodes.cluster import RECORD

    cluster: Path = arguments.dir.resolve() / "cluster"
    if (cluster / RECORD).exists():
        return cluster
    print(
        f"operator-suite-dev nodes: no sandbox runs in {arguments.dir} (make run starts one)", file=sys.stderr
    )
    return None


def _answered(act: Callable[[], Any]) -> int:
    """Print ``act()``'s answer as JSON (0), or why it could not be done in one line (1)."""
    from operator_testkit.nodes.faults import FaultError

    try:
        print(json.dumps(act(), indent=2))
    except (FaultError, ControlPlaneError) as error:
        print(f"operator-suite-dev nodes: {error}", file=sys.stderr)
        return 1
    return 0


def _runner(action: Action) -> Callable[[argparse.Namespace], int]:
    def run(arguments: argparse.Namespace) -> int:
        cluster = _sandbox_cluster(arguments)
        if cluster is None:
            return 1

        from operator_core.kube import Kube
        from operator_testkit.nodes.cluster import recorded_faults

        async def act() -> Any:
            async with Kube.connect(cluster / "controlplane" / "kubeconfig") as kube:
                return await action(recorded_faults(cluster, kube), arguments)

        return _answered(lambda: asyncio.run(act()))

    return run


def _node_runner(action: NodeAction) -> Callable[[argparse.Namespace], int]:
    def run(arguments: argparse.Namespace) -> int:
        cluster = _sandbox_cluster(arguments)
        if cluster is None:
            return 1
        from operator_testkit.nodes.cluster import recorded_power

        return _answered(lambda: action(recorded_power(cluster), arguments))

    return run


def _add(actions: Any, name: str, help_text: str, target: str, action: Action) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = actions.add_parser(name, help=help_text)
    parser.add_argument(target, help=f"the {target}'s name")
    parser.add_argument("-n", "--namespace", default="default", help="(%(default)s)")
    parser.add_argument(
        "--dir", type=Path, default=DEFAULT_SANDBOX_DIR, help="a sandbox's directory (%(default)s)"
    )
    parser.set_defaults(run=_runner(action))
    return parser


def _add_node(actions: Any, name: str, help_text: str, action: NodeAction) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = actions.add_parser(name, help=help_text)
    parser.add_argument("node", help="the node's name (node-a, node-b ...)")
    parser.add_argument(
        "--dir", type=Path, default=DEFAULT_SANDBOX_DIR, help="a sandbox's directory (%(default)s)"
    )
    parser.set_defaults(run=_node_runner(action))
    return parser


def _with_container(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-c", "--container", default=None, help="(the pod's first container)")


def add_nodes_commands(subparsers: Any) -> None:
    """Add ``nodes`` and its fault subcommands to a parser's ``add_subparsers()`` object."""
    nodes = subparsers.add_parser("nodes", help="faults on demand in a sandbox's nodes, pods and volumes")
    actions = nodes.add_subparsers(dest="action", required=True)

    kill = _add(
        actions, "kill", "signal every process of a container (SIGKILL by default); the kubelet restarts it",
        "pod", lambda f, a: f.kill(a.namespace, a.pod, a.container, a.signal),
    )  # fmt: skip
    _with_container(kill)
    kill.add_argument("--signal", default="KILL", help="a signal name (%(default)s)")
    for name, text, method in (
        ("freeze", "freeze a container (the cgroup freezer): it holds its ports and answers nothing",
         "freeze"),
        ("thaw", "thaw a frozen container", "thaw"),
        ("down", "cut a container off and kill it: it restarts behind the rules until `up`", "down"),
        ("up", "drop the rules `down` made", "up"),
    ):  # fmt: skip
        _with_container(_add(actions, name, text, "pod", _container(method)))
    for name, text, pod_method in (
        ("partition", "reject every connection to or from a pod (its loopback aside)", "partition"),
        ("heal", "drop the rules `partition` made", "heal"),
    ):
        _add(actions, name, text, "pod", _pod(pod_method))
    delete = _add(
        actions, "delete-pod", "delete a pod through the API, as kubectl delete pod", "pod",
        lambda f, a: f.delete_pod(
            a.namespace, a.pod, grace_period_seconds=a.grace_period, wait=not a.no_wait
        ),
    )  # fmt: skip
    delete.add_argument("--grace-period", type=int, default=None)
    delete.add_argument("--no-wait", action="store_true", help="return once the deletion is requested")
    _add(
        actions, "restart-statefulset", "a power cut for a StatefulSet's pods; they come back with new IPs",
        "statefulset", lambda f, a: f.restart_statefulset(a.namespace, a.statefulset),
    )  # fmt: skip
    for name, text, volume_method in (
        ("wipe", "remove everything in a claim's volume", "wipe_volume"),
        ("fill", "fill a size-limited claim's volume to the last byte", "fill_volume"),
        ("free", "remove what fill wrote", "free_volume"),
    ):
        _add(actions, name, text, "claim", _volume(volume_method))
    _add_node(
        actions, "power-cut", "SIGKILL a node's kubelet, containerd, shims and containers at once",
        lambda p, a: p.power_cut(a.node),
    )  # fmt: skip
    reboot = _add_node(
        actions, "reboot", "start a cut node's containerd and kubelet again; wait until it is Ready",
        lambda p, a: p.reboot(a.node, a.timeout),
    )  # fmt: skip
    reboot.add_argument("--timeout", type=float, default=120.0, help="seconds (%(default)s)")
    _add_node(
        actions, "isolate", "cut a node's kubelet off from the API server; its containers keep running",
        lambda p, a: p.isolate(a.node),
    )  # fmt: skip
    _add_node(actions, "reconnect", "drop the rules `isolate` made", lambda p, a: p.reconnect(a.node))
    drain = _add_node(
        actions, "drain", "kubectl drain --ignore-daemonsets --delete-emptydir-data",
        lambda p, a: p.drain(a.node, a.timeout, force=a.force),
    )  # fmt: skip
    drain.add_argument("--timeout", type=float, default=60.0, help="seconds (%(default)s)")
    drain.add_argument("--force", action="store_true", help="also delete pods no controller makes")
    _add_node(actions, "uncordon", "kubectl uncordon", lambda p, a: p.uncordon(a.node))


def _container(method: str) -> Action:
    return lambda faults, a: getattr(faults, method)(a.namespace, a.pod, a.container)


def _pod(method: str) -> Action:
    return lambda faults, a: getattr(faults, method)(a.namespace, a.pod)


def _volume(method: str) -> Action:
    return lambda faults, a: getattr(faults, method)(a.namespace, a.claim)
