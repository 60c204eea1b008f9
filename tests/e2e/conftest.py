"""The e2e layer: tests that need no pods run on a control plane of their own (``control_plane`` here);
those whose pods run are in ``nodes/``, on real nodes. Overriding ``control_plane`` re-roots every
fixture built on it (``kube``, ``namespace``, ``kubectl``, ``installed_crds``), so the integration
layer keeps a cluster where no pod ever runs.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from operator_testkit.controlplane import ControlPlane
from operator_testkit.fixtures import worker_slice


@pytest.fixture(scope="session")
def control_plane(start_control_plane: Callable[..., ControlPlane]) -> ControlPlane:
    return start_control_plane("e2e-controlplane", service_cidr=worker_slice("127.102.0.0/16"))
