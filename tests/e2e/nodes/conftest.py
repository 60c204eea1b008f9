"""Tests here run their pods on real nodes: the session's ``real_cluster`` (a real kubelet, containerd
and runc per node) brings its own control plane, and overriding ``control_plane`` re-roots ``kube``,
``namespace``, ``kubectl`` and ``installed_crds`` on it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from images import BACKUP_JOB_IMAGE
from operator_core.kube import Kube
from operator_testkit.controlplane import ControlPlane
from operator_testkit.drivers.typesense import TypesenseCluster
from operator_testkit.image import Image, tag_image
from operator_testkit.nodes.cluster import LocalCluster
from operator_testkit.nodes.faults import NodeFaults
from operator_testkit.nodes.images import NodeImage
from operator_testkit.operators import OperatorProcess
from operator_testkit.s3 import RunningS3, ensure_versitygw, running_s3


@pytest.fixture(scope="session")
def control_plane(real_cluster: LocalCluster) -> ControlPlane:
    assert real_cluster.control_plane is not None
    return real_cluster.control_plane


@pytest.fixture
def faults(real_cluster: LocalCluster, kube: Kube) -> NodeFaults:
    """Faults on demand on the session's real nodes (:mod:`operator_testkit.nodes.faults`)."""
    return real_cluster.faults(kube)


@pytest.fixture
async def cluster(
    kube: Kube, namespace: str, real_cluster: LocalCluster, typesense_operator: OperatorProcess
) -> AsyncIterator[TypesenseCluster]:
    """A Ready 3-node Typesense cluster on the real nodes, run by the operator, with its collection."""
    ts = TypesenseCluster(kube, namespace)
    await ts.create(replicas=3)
    await ts.wait_ready()
    await ts.create_collection()
    try:
        yield ts
    finally:
        await ts.aclose()


@pytest.fixture(scope="session")
def s3_server(real_cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningS3]:
    """versitygw over HTTPS where the real nodes' pods reach this machine (the slot's link), with root
    credentials of its own: the Typesense backups' object storage."""
    assert real_cluster.plan is not None
    address = str(real_cluster.plan.api_address)
    with running_s3(
        tmp_path_factory.mktemp("s3"), binary=ensure_versitygw(), tls=True, address=address
    ) as s3:
        yield s3


@pytest.fixture(scope="session")
def backup_job_image(real_cluster: LocalCluster, suite_image: Image) -> str:
    """This checkout's image under the name the backup and restore Jobs run, loaded into the nodes."""
    tag_image(suite_image.name, BACKUP_JOB_IMAGE)
    real_cluster.load([NodeImage(suite_image.name, (BACKUP_JOB_IMAGE,))])
    return BACKUP_JOB_IMAGE
