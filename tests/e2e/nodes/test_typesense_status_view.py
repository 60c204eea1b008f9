"""``kubectl typesense status`` where users run it: through kubectl's plugin lookup, with a kubeconfig,
against a real 3-node cluster on real nodes that the operator runs, while a follower is frozen, a roll
goes on and a recovery waits out its grace; and for a user who may read only TypesenseClusters and
Events."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from operator_testkit.controlplane import ControlPlane
from operator_testkit.drivers.typesense import TypesenseCluster
from operator_testkit.fixtures import wait_until
from operator_testkit.nodes.faults import NodeFaults
from operator_testkit.operators import account_kubeconfig

ANSWER_WITHIN_SECONDS = 20.0
"""The command answers within this, whatever the nodes do: it never asks them anything. Alone it takes
about a second (a Python start and two reads); clean-clone CI runs, two cores shared with three workers'
real nodes, writers and operators, saw 5.7 s, 6.9 s and once 11.7 s. What matters is that no run waits
on a node: it reads what the operator publishes (decision 33), so a frozen follower changes nothing here;
the bound is the loaded machine's, not the command's."""


class Kubectl:
    """``kubectl typesense ...`` as a user runs it: kubectl finds the plugin on PATH."""

    def __init__(self, plane: ControlPlane, kubeconfig: Path) -> None:
        self.plane, self.kubeconfig = plane, kubeconfig

    async def run(self, *arguments: str) -> tuple[str, str, float]:
        environment = {
            **os.environ,
            "KUBECONFIG": str(self.kubeconfig),
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        }
        started = time.monotonic()
        process = await asyncio.create_subprocess_exec(
            str(self.plane.binaries.kubectl),
            "typesense",
            *arguments,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=environment,
        )
        out, err = await process.communicate()
        took = time.monotonic() - started
        assert process.returncode == 0, f"kubectl typesense {' '.join(arguments)}: {err.decode()}"
        return out.decode(), err.decode(), took

    async def status(self, cluster: TypesenseCluster) -> tuple[dict[str, Any], float]:
        out, _, took = await self.run("status", cluster.name, "-n", cluster.namespace, "-o", "json")
        return json.loads(out), took


def raft(document: dict[str, Any]) -> dict[str, str]:
    """Each node's raft state as the view shows it ("-" for one that does not answer)."""
    return {
        node["pod"]: node.get("state", "?") if node.get("answering") else "-" for node in document["nodes"]
    }


async def until_shown(
    kubectl: Kubectl, cluster: TypesenseCluster, shown: Any, what: str, timeout: float = 120
) -> dict[str, Any]:
    """Run the command until ``shown(document)``; every run answers within the promised time."""
    found: dict[str, Any] = {}

    async def showing() -> bool:
        document, took = await kubectl.status(cluster)
        assert took < ANSWER_WITHIN_SECONDS, f"the command took {took:.1f} s"
        found.clear()
        found.update(document)
        return bool(shown(document))

    try:
        await wait_until(showing, timeout=timeout, interval=1, what=what)
    except BaseException:
        print(f"last document, waiting for {what}:\n{json.dumps(found, indent=1)}")
        raise
    return found


@pytest.mark.timeout(900)
async def test_status_shows_a_ready_cluster_a_frozen_follower_a_roll_and_a_recovery(
    cluster: TypesenseCluster, control_plane: ControlPlane, faults: NodeFaults, tmp_path: Path
) -> None:
    kubectl = Kubectl(control_plane, control_plane.kubeconfig)

    # Ready: one leader, every node answering, on its pod, at the current revision.
    ready = await until_shown(
        kubectl,
        cluster,
        lambda d: sorted(raft(d).values()) == ["FOLLOWER", "FOLLOWER", "LEADER"],
        "one LEADER and two FOLLOWERs",
    )
    assert ready["cluster"]["ready"]["status"] == "True"
    assert ready["quorum"]["state"] == "OK"
    assert all(
        node["phase"] == "Running" and node["ip"] and node["currentRevision"] for node in ready["nodes"]
    )
    assert ready["events"], "the cluster's Events"
    assert ready["missing"] == []
    text, _, _ = await kubectl.run("status", cluster.name, "-n", cluster.namespace)
    assert "LEADER" in text
    assert "\x1b[" not in text, "no colour when the output is no terminal"

    # A frozen follower: shown as not answering, and the command is not slowed down by it.
    follower = next(pod for pod, state in raft(ready).items() if state == "FOLLOWER")
    await faults.freeze(cluster.namespace, follower, "typesense")
    try:
        frozen = await until_shown(
            kubectl, cluster, lambda d: raft(d)[follower] == "-", f"{follower} shown as not answering"
        )
        assert list(raft(frozen).values()).count("LEADER") == 1
        text, _, took = await kubectl.run("status", cluster.name, "-n", cluster.namespace)
        assert "not answering" in text
        assert took < ANSWER_WITHIN_SECONDS
    finally:
        await faults.thaw(cluster.namespace, follower, "typesense")
    await cluster.wait_ready()

    # A roll: the view names the revision, what is done and the next node.
    await cluster.create(replicas=3, podAnnotations={"status-view": "rolled"})
    rolling = await until_shown(
        kubectl, cluster, lambda d: (d["roll"] or {}).get("inProgress"), "a roll in progress"
    )
    assert rolling["roll"]["next"] in range(3)
    text, _, _ = await kubectl.run("status", cluster.name, "-n", cluster.namespace)
    assert "Roll        to " in text
    await until_shown(
        kubectl, cluster, lambda d: not (d["roll"] or {}).get("inProgress"), "the roll done", timeout=300
    )
    await cluster.wait_ready(timeout=240)

    # A recovery: two of three frozen keep their grace; the view says when it ends and what comes then,
    # and after it the downgrade as the last step, with its evidence.
    rolled = await until_shown(
        kubectl,
        cluster,
        lambda d: (
            sorted(raft(d).values()) == ["FOLLOWER", "FOLLOWER", "LEADER"]
            and all(node.get("currentRevision") and node.get("phase") == "Running" for node in d["nodes"])
        ),
        "every node rolled, running and in the raft",
    )
    states = raft(rolled)
    # Two frozen while the third still misses what they committed (a config change under way) leave
    # no node the operator may keep: the test would wait for a downgrade that rightly never comes.
    await wait_until(cluster.in_step, timeout=60, interval=1, what="every raft log at the same entry")
    hung = sorted(states)[:2]
    for pod in hung:
        await faults.freeze(cluster.namespace, pod, "typesense")
    try:
        waiting = await until_shown(
            kubectl, cluster, lambda d: d["quorum"].get("graceEndsAt"), "the grace running out"
        )
        assert "downgrade" in waiting["quorum"]["thenAction"]
        text, _, _ = await kubectl.run("status", cluster.name, "-n", cluster.namespace)
        assert "grace ends" in text
        downgraded = await until_shown(
            kubectl, cluster, lambda d: d["quorum"].get("lastAction") == "Downgrade", "the downgrade"
        )
        assert "keeping node" in downgraded["quorum"]["lastActionMessage"]
    finally:
        for pod in hung:
            await faults.thaw(cluster.namespace, pod, "typesense")
    await cluster.wait_ready(timeout=240)


async def test_a_user_who_may_read_only_clusters_and_events_is_told_what_else_is_needed(
    cluster: TypesenseCluster, control_plane: ControlPlane, tmp_path: Path
) -> None:
    namespace = cluster.namespace
    account = {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": "on-call", "namespace": namespace},
    }
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": "on-call", "namespace": namespace},
        "rules": [
            {"apiGroups": ["ts.opentelekomcloud.com"], "resources": ["typesenseclusters"], "verbs": ["get"]},
            {"apiGroups": [""], "resources": ["events"], "verbs": ["get", "list"]},
        ],
    }
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "on-call", "namespace": namespace},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "on-call"},
        "subjects": [{"kind": "ServiceAccount", "name": "on-call", "namespace": namespace}],
    }
    kubeconfig = await asyncio.to_thread(
        account_kubeconfig, control_plane, [account, role, binding], tmp_path / "on-call.kubeconfig"
    )
    kubectl = Kubectl(control_plane, kubeconfig)
    document = await until_shown(
        kubectl, cluster, lambda d: len(d["nodes"]) == 3 and d["events"], "the operator's view and Events"
    )
    assert document["cluster"]["ready"]["status"] == "True"
    assert all("ip" not in node for node in document["nodes"]), "no pods for this user"
    assert sorted(raft(document).values()) == ["FOLLOWER", "FOLLOWER", "LEADER"], (
        "the raft view is in the status"
    )
    (missing,) = document["missing"]
    assert "'list pods'" in missing
    text, _, _ = await kubectl.run("status", cluster.name, "-n", namespace)
    assert "not shown: each node's pod" in text
