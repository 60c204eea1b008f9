"""Integration fixtures: the Typesense operator, run as its own ServiceAccount against the control plane."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from operator_core.testing.controlplane import ControlPlane
from operator_core.testing.operators import OperatorProcess, service_account_kubeconfig


@pytest.fixture(scope="session")
def typesense_operator(
    control_plane: ControlPlane,
    installed_crds: list[str],
    tmp_path_factory: pytest.TempPathFactory,
    pytestconfig: pytest.Config,
) -> Iterator[OperatorProcess]:
    directory = tmp_path_factory.mktemp("typesense-operator")
    kubeconfig = service_account_kubeconfig(
        control_plane,
        pytestconfig.rootpath / "deploy" / "rbac" / "typesense-operator.yaml",
        directory / "kubeconfig",
    )
    with OperatorProcess(
        "typesense-operator", kubeconfig, directory / "operator.log", "--verbose"
    ) as process:
        yield process
