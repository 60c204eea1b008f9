"""``python -m operator_testkit.nodeagent --kubeconfig FILE --dir DIR``: run the node agent.

Runs until SIGTERM or SIGINT, then stops every container process it started.
Logs go to stderr, with Secret values scrubbed.

It first moves into a mount namespace of its own (before any thread starts), so
that the size-limited volumes it mounts vanish with it (see :mod:`.disks`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
from pathlib import Path

from operator_core.secrets import install_log_scrubbing
from operator_testkit.nodeagent.addresses import DEFAULT_POD_CIDR
from operator_testkit.nodeagent.agent import AgentSettings, NodeAgent
from operator_testkit.nodeagent.disks import enter_private_mount_namespace


def parse(argv: list[str] | None = None, *, private_mounts: bool = False) -> AgentSettings:
    parser = argparse.ArgumentParser(prog="python -m operator_testkit.nodeagent", description=__doc__)
    parser.add_argument("--kubeconfig", type=Path, required=True)
    parser.add_argument("--dir", type=Path, required=True, help="state directory (pods, volumes, logs)")
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--node-prefix", default="agent-node")
    parser.add_argument("--pod-cidr", default=DEFAULT_POD_CIDR, help="a loopback range for pod addresses")
    parser.add_argument(
        "--no-stand-ins",
        dest="stand_ins",
        action="store_false",
        help="images no real runner plays cannot start (NoRunner), instead of running a stand-in",
    )
    options = parser.parse_args(argv)
    return AgentSettings(
        kubeconfig=options.kubeconfig,
        state_dir=options.dir,
        nodes=options.nodes,
        node_prefix=options.node_prefix,
        pod_cidr=options.pod_cidr,
        private_mounts=private_mounts,
        stand_ins=options.stand_ins,
    )


async def _serve(settings: AgentSettings) -> None:
    agent = NodeAgent(settings)
    task = asyncio.create_task(agent.run())
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, task.cancel)
    with contextlib.suppress(asyncio.CancelledError):
        await task


def main(argv: list[str] | None = None) -> None:
    parse(argv)  # --help and bad arguments before anything changes
    private_mounts = enter_private_mount_namespace()
    settings = parse(argv, private_mounts=private_mounts)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    install_log_scrubbing()
    if not private_mounts:
        logging.getLogger(__name__).warning("no mount namespace of its own: size-limited volumes are off")
    for chatty in ("httpx", "httpx2"):  # one line per request would bury what the agent does
        logging.getLogger(chatty).setLevel(logging.WARNING)
    asyncio.run(_serve(settings))


if __name__ == "__main__":
    main()
