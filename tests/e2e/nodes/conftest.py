"""Tests here run their pods on real nodes: the session's ``real_cluster`` (a real kubelet, containerd
and runc per node) brings its own control plane, and overriding ``control_plane`` re-roots ``kube``,
``namespace``, ``kubectl`` and ``installed_crds`` on it."""

from __future__ import annotations

import pytest

from operator_testkit.controlplane import ControlPlane
from operator_testkit.nodes.cluster import LocalCluster


@pytest.fixture(scope="session")
def control_plane(real_cluster: LocalCluster) -> ControlPlane:
    assert real_cluster.control_plane is not None
    return real_cluster.control_plane
