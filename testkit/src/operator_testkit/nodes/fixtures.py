"""The ``real_cluster`` pytest fixture: a local cluster of real nodes for the whole test session.

A pytest plugin of the test kit (a ``pytest11`` entry point). A test directory that wants its pods on
real nodes overrides ``control_plane`` with ``real_cluster.control_plane``, so that ``kube``,
``namespace``, ``kubectl`` and ``installed_crds`` follow (``tests/e2e/nodes/conftest.py``).

At the end of the session the cluster is stopped, and the fixture checks that it left no process,
mount, link or cgroup behind.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from operator_testkit.controlplane import UNUSED_BY_THE_TESTS
from operator_testkit.nodes.cluster import LocalCluster
from operator_testkit.nodes.host import leftovers
from operator_testkit.nodes.images import nginx_image, typesense_image

__all__ = ["real_cluster"]


@pytest.fixture(scope="session")
def real_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """Three real nodes (``node-a`` .. ``node-c``, zones ``zone-a`` .. ``zone-c``) and their control plane,
    with the Typesense and nginx images loaded besides the base ones."""
    cluster = LocalCluster(
        Path(tmp_path_factory.mktemp("nodes")),
        extra_images=[typesense_image(), nginx_image()],
        disabled_controllers=UNUSED_BY_THE_TESTS,
    )
    cluster.start()
    assert cluster.plan is not None
    plan = cluster.plan
    try:
        yield cluster
    finally:
        cluster.stop()
        left = leftovers(plan)
        assert not left, f"the real nodes left these behind: {left}"
