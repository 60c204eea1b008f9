"""``operator-suite-dev``: the developer's tool of the test kit.

Subcommands:

- ``binaries [--clusterstack] [--nodes] [--sandbox]``: build (or reuse) the control-plane binaries
  (with ``--nodes``, the real nodes' programs; with ``--sandbox``, what ``sandbox up`` runs besides:
  helm, the OCI registry, the Cluster API CRDs and the S3 server versitygw; with ``--clusterstack``,
  those and the tests' own: the Gateway API CRDs, Prometheus and promtool, oras, and cert-manager's
  CRDs and controllers) and print where they are;
- ``controlplane up|down --dir DIR``: a detached local control plane, with ``DIR/kubeconfig``;
- ``sandbox up|down``: 3 real nodes, the operators installed by helm, their samples; one per machine;
  ``sandbox images``: the images of theirs that need no Go program, built ahead (``make run``);
- ``nodes kill|freeze|thaw|down|up|partition|heal|delete-pod|restart-statefulset|wipe|fill|free``:
  faults on demand in a sandbox's pods and volumes; ``nodes power-cut|reboot|isolate|reconnect|drain|
  uncordon``: of a whole node;
- ``kubectl [--dir DIR] ARGS...``: the pinned kubectl against a local control plane.

The user's ``operator-suite`` (CRDs) ships with the operators; this one needs the repository's
``hack/`` directory and root, and is never installed into an operator image.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from operator_core.cli import run_command
from operator_testkit.nodes.cli import add_nodes_commands
from operator_testkit.sandbox_lock import DEFAULT_LOCK, another_sandbox, refuse_another

# The commands' own modules are imported when a command runs, not here: ``sandbox up`` refuses a second
# sandbox before the rest of the test kit is loaded (a second or more on a busy machine).

__all__ = ["main"]

DEFAULT_CONTROLPLANE_DIR = Path.home() / ".local" / "state" / "operator-suite" / "controlplane"
DEFAULT_SANDBOX_DIR = Path.home() / ".local" / "state" / "operator-suite" / "sandbox"
BUILT_SECONDS = 5.0
"""A group that took this long had something to build (finding what is built takes well under 1 s)."""


@dataclass(frozen=True)
class _ToolGroup:
    """One part of ``binaries``: its name, its last measured cold build (seconds, on this machine kind:
    2 cores, Go's module cache filled), and what builds or finds it, returning the lines to print."""

    name: str
    cold_seconds: float
    ensure: Callable[[], list[str]]


def _control_plane() -> list[str]:
    from operator_testkit.binaries import KUBERNETES_COMMANDS, ensure_binaries

    binaries = ensure_binaries()
    return [str(binaries.directory), *(f"  {binaries.path(name)}" for name in ("etcd", *KUBERNETES_COMMANDS))]


def _node_programs() -> list[str]:
    from operator_testkit.nodes.tools import ensure_node_tools

    node_tools = ensure_node_tools()
    return [str(node_tools.bin), *(f"  {node_tools.path(program.name)}" for program in node_tools.programs)]


def _sandbox_tools() -> list[str]:
    from operator_testkit.clusterstack_tools import ensure_clusterstack_tools
    from operator_testkit.s3 import ensure_versitygw

    tools = ensure_clusterstack_tools()
    paths = (
        tools.helm,
        tools.registry,
        tools.capi_crds,
        tools.capi_v1beta1_crds,
        tools.capd_crds,
        tools.orc_crds,
    )
    return [str(tools.directory), *(f"  {path}" for path in paths), f"  {ensure_versitygw()}"]


def _test_tools() -> list[str]:
    from operator_testkit.cert_manager import ensure_cert_manager_controller
    from operator_testkit.module_crds import (
        ensure_cert_manager_crds,
        ensure_gateway_api_crds,
        ensure_prometheus_operator_crds,
    )
    from operator_testkit.oras_cli import ensure_oras
    from operator_testkit.prometheus_tools import ensure_prometheus_tools

    crds = (ensure_gateway_api_crds(), ensure_prometheus_operator_crds(), ensure_cert_manager_crds())
    controller, oras, prometheus = ensure_cert_manager_controller(), ensure_oras(), ensure_prometheus_tools()
    return [
        *(f"  {path}" for path in (*crds, controller, oras)),
        str(prometheus.directory),
        f"  {prometheus.prometheus}\n  {prometheus.promtool}",
    ]


def _binaries(arguments: argparse.Namespace) -> int:
    """Each group in turn; after one that had something to build, how long it took and, by the last
    measured cold figures, at most how long the rest takes (issue 67: a cold ``make run`` should say
    how much is left)."""
    from operator_testkit.binaries import say

    groups = [_ToolGroup("the control plane", 249, _control_plane)]
    if arguments.nodes:
        groups.append(_ToolGroup("the nodes' programs", 173, _node_programs))
    if arguments.sandbox or arguments.clusterstack:
        groups.append(_ToolGroup("helm, the registry, Cluster API's CRDs, versitygw", 148, _sandbox_tools))
    if arguments.clusterstack:
        groups.append(_ToolGroup("the tests' tools (Prometheus, cert-manager, oras)", 345, _test_tools))
    for index, group in enumerate(groups):
        started = time.monotonic()
        lines = group.ensure()
        took = time.monotonic() - started
        print("\n".join(lines), flush=True)
        if took >= BUILT_SECONDS:
            left = sum(later.cold_seconds for later in groups[index + 1 :])
            rest = f"at most about {left / 60:.0f} min left (last cold figures)" if left else "nothing left"
            say(f"{group.name}: ready in {took:.0f} s; {rest}")
    return 0


def _controlplane_up(arguments: argparse.Namespace) -> int:
    from operator_testkit.controlplane import ControlPlane, ControlPlaneState, running_components

    directory: Path = arguments.dir.resolve()
    if (directory / "state.json").exists() and running_components(ControlPlaneState.load(directory)):
        print(f"a control plane is already running in {directory}")
        print(f"stop it with: operator-suite-dev controlplane down --dir {directory}")
        return 1
    plane = ControlPlane(directory, bind_to_parent=False)
    plane.start()
    kubectl = plane.binaries.kubectl
    print(f"control plane up: {plane.api_url}")
    print(f"  kubeconfig: {plane.kubeconfig}")
    print(f"  logs:       {plane.log_dir}")
    print("use it with:")
    print(f"  export KUBECONFIG={plane.kubeconfig} PATH={kubectl.parent}:$PATH")
    print("  kubectl get --raw /readyz")
    print(f"stop it with: operator-suite-dev controlplane down --dir {directory}")
    return 0


def _controlplane_down(arguments: argparse.Namespace) -> int:
    from operator_testkit.controlplane import ControlPlaneState, stop_recorded

    directory: Path = arguments.dir.resolve()
    if not (directory / "state.json").exists():
        print(f"no control plane recorded in {directory}")
        return 0
    state = ControlPlaneState.load(directory)
    stop_recorded(state.components)
    (directory / "state.json").unlink()
    print(f"control plane in {directory} stopped")
    return 0


def _kubectl(arguments: argparse.Namespace) -> int:
    from operator_testkit.binaries import ensure_binaries

    kubectl = ensure_binaries().kubectl
    kubeconfig = arguments.dir.resolve() / "kubeconfig"
    # Replace this process, so kubectl owns the terminal and its exit code is ours.
    os.execv(kubectl, [str(kubectl), f"--kubeconfig={kubeconfig}", *arguments.kubectl_arguments])  # noqa: S606


def _sandbox(arguments: argparse.Namespace) -> int:
    if arguments.action == "up":
        running = another_sandbox(arguments.lock, arguments.dir.resolve())
        if running is not None:
            refuse_another(running, arguments.lock)  # before the test kit is loaded: at once
            return 1
    from operator_testkit.sandbox import (
        SandboxOptions,
        journey_entries,
        sandbox_down,
        sandbox_images,
        sandbox_up,
    )

    if arguments.action == "journey":
        journeys = journey_entries()
        if arguments.operator not in journeys:
            print(
                f"operator-suite-dev: no journey for {arguments.operator!r}; there is one for "
                + ", ".join(sorted(journeys)),
                file=sys.stderr,
            )
            return 2
        walk = journeys[arguments.operator].journey
        assert walk is not None
        return walk(arguments.dir / arguments.operator, arguments.pause)
    if arguments.action == "images":
        return sandbox_images()
    if arguments.action == "down":
        return sandbox_down(arguments.dir, arguments.lock)
    return sandbox_up(arguments.dir, SandboxOptions(lock=arguments.lock))


def _image(arguments: argparse.Namespace) -> int:
    from operator_testkit.binaries import find_hack_dir
    from operator_testkit.image import build_image, push_image

    image = build_image(find_hack_dir().parent, arguments.tag)
    print(
        f"{image.name} {image.digest} {image.size_bytes / 2**20:.1f} MiB (uncompressed layers), "
        f"base {image.base}"
    )
    if arguments.push:
        push_image(image.name, arguments.push)
        print(f"pushed to {arguments.push}")
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="operator-suite-dev", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)

    binaries = commands.add_parser("binaries", help="build or reuse the control-plane binaries; print where")
    binaries.add_argument(
        "--clusterstack",
        action="store_true",
        help="also build or fetch the Cluster Stack tests' tools: helm, the OCI registry (distribution), "
        "the CRDs of Cluster API, its Docker provider and ORC, Prometheus and promtool, the S3 "
        "server versitygw, and cert-manager's CRDs and controllers "
        "(from hack/{controlplane,registry,cluster-api,capd,orc,prometheus,versitygw,cert-manager*})",
    )
    binaries.add_argument(
        "--nodes",
        action="store_true",
        help="also build the real nodes' programs: kubelet, kube-proxy, containerd, CoreDNS and pause "
        "(from hack/{node,containerd,coredns,pause}); runc and the CNI plugins come from Debian",
    )
    binaries.add_argument(
        "--sandbox",
        action="store_true",
        help="also build or fetch what `sandbox up` runs besides the nodes: helm, the OCI registry, the "
        "Cluster API CRDs and versitygw; none of the tests' own tools (Prometheus, promtool, "
        "cert-manager's controllers, oras, the Gateway API CRDs)",
    )
    binaries.set_defaults(run=_binaries)

    image = commands.add_parser(
        "image", help="build the runtime image from the Dockerfile with buildah, on a base made by mmdebstrap"
    )
    image.add_argument("--tag", default="dev", help="tag of localhost/operator-suite (%(default)s)")
    image.add_argument("--push", help="then copy it there, e.g. docker://127.0.0.1:5000/operator-suite:dev")
    image.set_defaults(run=_image)

    controlplane = commands.add_parser("controlplane", help="a local control plane for people and scripts")
    actions = controlplane.add_subparsers(dest="action", required=True)
    for action, run, text in (
        ("up", _controlplane_up, "start etcd, kube-apiserver, kube-controller-manager, kube-scheduler"),
        ("down", _controlplane_down, "stop the control plane started in DIR"),
    ):
        sub = actions.add_parser(action, help=text)
        sub.add_argument(
            "--dir",
            type=Path,
            default=DEFAULT_CONTROLPLANE_DIR,
            help="state directory; DIR/kubeconfig is written here (default: %(default)s)",
        )
        sub.set_defaults(run=run)

    sandbox = commands.add_parser(
        "sandbox",
        help="3 real nodes + the operators installed by helm + a sample Typesense cluster, on this machine",
    )
    sandbox_actions = sandbox.add_subparsers(dest="action", required=True)
    for action, text in (
        ("up", "start it all and wait until the samples are Ready"),
        ("down", "stop it all"),
    ):
        sub = sandbox_actions.add_parser(action, help=text)
        sub.add_argument(
            "--dir", type=Path, default=DEFAULT_SANDBOX_DIR, help="state directory (%(default)s)"
        )
        sub.add_argument(
            "--lock",
            type=Path,
            default=DEFAULT_LOCK,
            help="one sandbox per machine: the lock file naming the running one (%(default)s; "
            "$OPERATOR_SUITE_SANDBOX_LOCK)",
        )
        sub.set_defaults(run=_sandbox)

    images = sandbox_actions.add_parser(
        "images",
        help="build (or find) the nodes' images that need no Go program: the suite's, Typesense's and "
        "nginx's (make run builds them while the Go programs compile)",
    )
    images.set_defaults(run=_sandbox)

    journey = sandbox_actions.add_parser(
        "journey", help="an operator's whole user journey on control planes of its own, step by step"
    )
    journey.add_argument("--operator", default="clusterstack", help="whose journey (%(default)s)")
    journey.add_argument(
        "--dir",
        type=Path,
        default=DEFAULT_SANDBOX_DIR.parent / "journey",
        help="state directory; the journey runs in DIR/OPERATOR (%(default)s)",
    )
    journey.add_argument("--pause", action="store_true", help="keep it all running until Enter is pressed")
    journey.set_defaults(run=_sandbox)

    add_nodes_commands(commands)

    kubectl = commands.add_parser(
        "kubectl", help="run the pinned kubectl against the control plane in DIR: kubectl [--dir DIR] ARGS..."
    )
    kubectl.add_argument("--dir", type=Path, default=DEFAULT_CONTROLPLANE_DIR, help="(%(default)s)")
    kubectl.add_argument("kubectl_arguments", nargs=argparse.REMAINDER)
    kubectl.set_defaults(run=_kubectl)

    return parser


def main(argv: Sequence[str] | None = None) -> int:
    return run_command(_parser(), argv)


if __name__ == "__main__":
    sys.exit(main())
