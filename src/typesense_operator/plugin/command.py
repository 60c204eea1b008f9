"""``kubectl-typesense``: the plugin's command line; reads the API server with the user's kubeconfig.

``kubectl typesense status NAME [-n NAMESPACE] [-o json] [--watch]``. It reads the TypesenseCluster
(required), then its pods and Events (each optional: a refusal becomes a line saying which
permission would show it), and never waits on a node: what the nodes say comes from the operator's
probes, published in the cluster's status.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from operator_core import errors
from operator_core.children import COMPONENT_LABEL, INSTANCE_LABEL
from operator_core.clock import utcnow
from operator_core.kube import Kube
from typesense_operator.api import TYPESENSE_CLUSTER
from typesense_operator.plugin.view import render, status_document
from typesense_operator.quorum.hosts import Host, host_of
from typesense_operator.resources.core import NODE

__all__ = ["main"]

REQUEST_SECONDS = 5.0
"""How long one request to the API server may take."""
WATCH_SECONDS = 2.0


async def _optional(what: str, read: Any, missing: list[str]) -> list[dict[str, Any]] | None:
    """The answer of ``read``, or None with the reason in ``missing`` when the user may not read it."""
    try:
        return list(await read)
    except errors.Forbidden as refusal:
        missing.append(f"{what}: {refusal}")
        return None


async def read_document(kube: Kube, namespace: str, name: str) -> dict[str, Any]:
    cluster = await kube.get(TYPESENSE_CLUSTER.api_version, TYPESENSE_CLUSTER.kind, name, namespace)
    if cluster is None:
        raise errors.NotFound(f"TypesenseCluster {namespace}/{name} not found")
    missing: list[str] = []
    labels = {INSTANCE_LABEL: name, COMPONENT_LABEL: NODE}
    pods, events = await asyncio.gather(
        _optional(
            f"each node's pod, Kubernetes node, IP, phase and restarts need 'list pods' in {namespace}",
            kube.list("v1", "Pod", namespace, labels=labels),
            missing,
        ),
        _optional(
            f"the cluster's Events need 'list events' in {namespace}",
            kube.list("v1", "Event", namespace, fields={"involvedObject.uid": cluster["metadata"]["uid"]}),
            missing,
        ),
    )
    hosts = await _hosts(kube, pods or [], missing)
    return status_document(cluster, pods, events, missing, utcnow(), hosts)


async def _hosts(kube: Kube, pods: list[dict[str, Any]], missing: list[str]) -> dict[str, Host] | None:
    """The Kubernetes nodes the pods run on, read now: what the cluster's status says of them is as
    old as the operator's last look, and an operator on a lost node looks no more."""
    names = sorted({str(name) for pod in pods if (name := (pod.get("spec") or {}).get("nodeName"))})
    try:
        nodes = await asyncio.gather(*(kube.get("v1", "Node", name) for name in names))
    except errors.Forbidden as refusal:
        missing.append(f"whether each pod's Kubernetes node is Ready needs 'get nodes': {refusal}")
        return None
    return {name: host_of(name, node) for name, node in zip(names, nodes, strict=True)}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kubectl typesense", description="Typesense clusters of the typesense-operator, for incidents."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    status = commands.add_parser("status", help="a cluster's quorum, nodes, recovery, roll and recent Events")
    status.add_argument("name", help="the TypesenseCluster")
    status.add_argument("-n", "--namespace", help="its namespace (default: the kubeconfig context's)")
    status.add_argument("-o", "--output", choices=("text", "json"), default="text")
    status.add_argument(
        "-w", "--watch", action="store_true", help=f"show it again every {WATCH_SECONDS:.0f} s"
    )
    status.add_argument("--kubeconfig", type=Path, help="default: $KUBECONFIG, then ~/.kube/config")
    status.add_argument("--context", help="the kubeconfig context (default: its current one)")
    return parser


def _colour(stream: Any) -> bool:
    return bool(getattr(stream, "isatty", lambda: False)()) and "NO_COLOR" not in os.environ


async def _status(arguments: argparse.Namespace) -> None:
    kube = Kube.connect(
        arguments.kubeconfig,
        context=arguments.context,
        timeout=REQUEST_SECONDS,
        field_manager="kubectl-typesense",
    )
    async with kube:
        namespace = arguments.namespace or kube.default_namespace
        while True:
            document = await asyncio.wait_for(
                read_document(kube, namespace, arguments.name), timeout=2 * REQUEST_SECONDS
            )
            if arguments.output == "json":
                print(json.dumps(document, indent=None if arguments.watch else 2), flush=True)
            else:
                text = render(document, colour=_colour(sys.stdout))
                clear = "\x1b[H\x1b[2J" if arguments.watch and _colour(sys.stdout) else ""
                print(clear + text, end="", flush=True)
            if not arguments.watch:
                return
            await asyncio.sleep(WATCH_SECONDS)


def main(argv: Sequence[str] | None = None) -> int:
    arguments = _parser().parse_args(argv)
    try:
        asyncio.run(_status(arguments))
    except KeyboardInterrupt:
        return 0
    except TimeoutError:
        print(
            f"kubectl typesense: the API server did not answer within {2 * REQUEST_SECONDS:.0f} s",
            file=sys.stderr,
        )
        return 1
    except (errors.OperatorError, OSError, ValueError) as error:
        print(f"kubectl typesense: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
