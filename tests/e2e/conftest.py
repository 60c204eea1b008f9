"""The e2e layer runs on its own control plane, where the node agent really runs pods.

Overriding ``control_plane`` here re-roots every fixture built on it (``kube``,
``namespace``, ``kubectl``, ``installed_crds``, ``node_agent``) for the tests in
this directory, so the integration layer keeps a cluster where no pod ever runs.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import pytest

from operator_core.kube import Kube
from operator_testkit.controlplane import ENDPOINT_CONTROLLERS, ControlPlane
from operator_testkit.drivers.typesense import TypesenseCluster
from operator_testkit.fixtures import worker_slice
from operator_testkit.nodeagent.harness import AgentProcess
from operator_testkit.operators import OperatorProcess


@pytest.fixture(scope="session")
def control_plane(start_control_plane: Callable[..., ControlPlane]) -> ControlPlane:
    return start_control_plane(
        "e2e-controlplane",
        service_cidr=worker_slice("127.102.0.0/16"),
        disabled_controllers=ENDPOINT_CONTROLLERS,
    )


@pytest.fixture
def pods_run(node_agent: AgentProcess) -> object:
    """What runs this directory's pods: the node agent (``nodes/`` overrides it with real nodes)."""
    return node_agent


@pytest.fixture
async def cluster(
    kube: Kube, namespace: str, pods_run: object, typesense_operator: OperatorProcess
) -> AsyncIterator[TypesenseCluster]:
    """A Ready 3-node Typesense cluster run by the operator, with its collection."""
    ts = TypesenseCluster(kube, namespace)
    await ts.create(replicas=3)
    await ts.wait_ready()
    await ts.create_collection()
    try:
        yield ts
    finally:
        await ts.http.aclose()
