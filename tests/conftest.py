"""Shared test set-up: the operators as processes, the samples, and a marker per layer (from the directory).

The control-plane and real-node fixtures come from the test kit, which registers them as a pytest
plugin (its ``pytest11`` entry points).
"""

from __future__ import annotations

import secrets
import subprocess
from collections.abc import Generator, Iterator
from typing import Any

import pytest

from images import BACKUP_JOB_IMAGE
from operator_testkit.clusterstack_tools import ClusterStackTools, ensure_clusterstack_tools
from operator_testkit.controlplane import ControlPlane
from operator_testkit.errors import ControlPlaneError
from operator_testkit.image import Image, image_of_sources, tag_image
from operator_testkit.operators import OperatorProcess, OperatorRegistry
from operator_testkit.registry import RunningRegistry, running_registry
from operator_testkit.s3 import RunningS3, ensure_versitygw, running_s3
from samples import SAMPLES, load_sample

_LAYERS = ("unit", "packaging", "integration", "e2e")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """A failed test's report carries its namespace's Events and pods, and what each operator it ran
    logged about it: a CI run keeps only its output, and the operators' decisions are in their Events."""
    report = yield
    funcargs = getattr(item, "funcargs", {})
    namespace, control_plane = funcargs.get("namespace"), funcargs.get("control_plane")
    if not (report.failed and call.when == "call" and isinstance(namespace, str)):
        return report
    # The operators' logs first: a CI run's output is kept whole at its start and its end only, and what
    # an operator did (or waited for) is what a failure's cause most often is.
    for name, value in funcargs.items():
        if isinstance(value, OperatorProcess):
            lines = [line[:240] for line in value.log().splitlines() if namespace in line]
            report.sections.append(
                (f"{name} log about {namespace} (last 30 of {len(lines)} lines)", "\n".join(lines[-30:]))
            )
    if isinstance(control_plane, ControlPlane):
        for what, arguments in _FAILURE_VIEWS.items():
            report.sections.append(
                (f"{what} in {namespace}", _kubectl_view(control_plane, namespace, arguments))
            )
    return report


_FAILURE_VIEWS = {
    "Events": (
        "get",
        "events",
        "--sort-by=.metadata.creationTimestamp",
        "-o=custom-columns=AT:.metadata.creationTimestamp,TYPE:.type,REASON:.reason,"
        "OBJECT:.involvedObject.name,MESSAGE:.message",
    ),
    "pods": ("get", "pods", "-o=wide"),
}


def _kubectl_view(control_plane: ControlPlane, namespace: str, arguments: tuple[str, ...]) -> str:
    try:
        return control_plane.kubectl("-n", namespace, *arguments, timeout=20)[-12000:]
    except ControlPlaneError as error:
        return str(error)[-12000:]
    except subprocess.TimeoutExpired:
        return "kubectl took over 20 s"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        for layer in _LAYERS:
            if f"/tests/{layer}/" in str(item.path):
                item.add_marker(getattr(pytest.mark, layer))


@pytest.fixture(scope="session")
def samples() -> dict[str, list[dict[str, Any]]]:
    """Every manifest in deploy/samples/, by file name without .yaml."""
    return {path.stem: load_sample(path.stem) for path in sorted(SAMPLES.glob("*.yaml"))}


@pytest.fixture(scope="session")
def operators(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OperatorRegistry]:
    registry = OperatorRegistry(tmp_path_factory.mktemp("operators"))
    try:
        yield registry
    finally:
        registry.stop_all()


@pytest.fixture
def typesense_operator(
    operators: OperatorRegistry,
    control_plane: ControlPlane,
    installed_crds: list[str],
    pytestconfig: pytest.Config,
) -> OperatorProcess:
    """The typesense-operator process for this test's control plane, as its own ServiceAccount."""
    return _operator("typesense-operator", operators, control_plane, pytestconfig)


@pytest.fixture
def monocle_operator(
    operators: OperatorRegistry,
    control_plane: ControlPlane,
    installed_crds: list[str],
    pytestconfig: pytest.Config,
) -> OperatorProcess:
    """The monocle-operator process for this test's control plane, as its own ServiceAccount."""
    return _operator("monocle-operator", operators, control_plane, pytestconfig)


def _operator(
    script: str, operators: OperatorRegistry, control_plane: ControlPlane, pytestconfig: pytest.Config
) -> OperatorProcess:
    """The operator's console script, with the RBAC its chart grants (files/rbac-rules.yaml)."""
    rbac = pytestconfig.rootpath / "charts" / script / "files" / "rbac-rules.yaml"
    typesense = script == "typesense-operator"
    # Content objects are compared with Typesense every 10 s here (60 s by default), so that a repaired
    # drift is seen within a test's patience.
    environment = (
        {"OPERATOR_SUITE_BACKUP_IMAGE": BACKUP_JOB_IMAGE, "OPERATOR_SUITE_CONTENT_CHECK_SECONDS": "10"}
        if typesense
        else None
    )
    return operators.get(script, control_plane, rbac, "--verbose", environment=environment)


@pytest.fixture(scope="session")
def suite_image(pytestconfig: pytest.Config) -> Image:
    """The runtime image of this checkout's sources, as ``make image`` builds it (tagged by their hash:
    built once for the run and both workers, and found again by the next run until a source changes)."""
    return image_of_sources(pytestconfig.rootpath)


@pytest.fixture(scope="session")
def backup_job_image(suite_image: Image) -> str:
    """This checkout's image under the name the Typesense operator's backup and restore Jobs run
    (OPERATOR_SUITE_BACKUP_IMAGE of the typesense_operator fixture)."""
    tag_image(suite_image.name, BACKUP_JOB_IMAGE)
    return BACKUP_JOB_IMAGE


@pytest.fixture(scope="session")
def clusterstack_tools() -> ClusterStackTools:
    """helm, the OCI registry and the Cluster API CRDs, built by `make tools` (reused from the cache)."""
    return ensure_clusterstack_tools()


@pytest.fixture(scope="session")
def oci_registry(
    clusterstack_tools: ClusterStackTools, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningRegistry]:
    """A CNCF distribution registry on loopback, plain HTTP, for this test session."""
    with running_registry(tmp_path_factory.mktemp("registry"), binary=clusterstack_tools.registry) as running:
        yield running


@pytest.fixture(scope="session")
def oci_registry_tls(
    clusterstack_tools: ClusterStackTools, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningRegistry]:
    """The same registry over HTTPS, with a certificate of its own CA (``.ca_cert``)."""
    with running_registry(
        tmp_path_factory.mktemp("tls-registry"), binary=clusterstack_tools.registry, tls=True
    ) as running:
        yield running


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningS3]:
    """versitygw on loopback over HTTPS (``.ca_cert``), with root credentials of its own, for this
    test session: the Typesense backups' object storage."""
    with running_s3(tmp_path_factory.mktemp("s3"), binary=ensure_versitygw(), tls=True) as running:
        yield running


@pytest.fixture
def bucket(s3_server: RunningS3) -> str:
    """A bucket of this test's own on the session's S3 server."""
    name = f"backups-{secrets.token_hex(4)}"
    s3_server.create_bucket(name)
    return name
