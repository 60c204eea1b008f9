"""pytest fixtures over the local control plane.

The test kit registers them as a pytest plugin (a ``pytest11`` entry point), so every test
session of a venv where the kit is installed has them:

- ``control_plane`` (session): one real control plane for the whole run;
- ``kube``: an admin :class:`~operator_core.kube.Kube` client for one test;
- ``namespace``: a fresh namespace per test, deleted afterwards;
- ``kubectl``: run the pinned kubectl against the control plane;
- ``installed_crds`` (session): every CRD of the suite, applied and Established;
- ``start_control_plane`` (session), ``start_module_control_plane`` (module) and
  ``start_test_control_plane`` (one test): start more control planes (a "workload cluster", one with
  other CRDs), each stopped when the scope that asked for it ends. An idle control plane costs a few
  percent of a core (its API server, etcd and controller manager); kept to the session's end, a
  worker's dozen of them cost a quarter of the machine's two cores.

Under pytest-xdist every worker starts its own control planes (and real nodes, each in a slot of
the machine of its own); :func:`worker_slice` gives each worker its own part of a loopback range, so
that the Service addresses of two workers' bare control planes never collide.
"""

from __future__ import annotations

import asyncio
import ipaddress
import os
import re
import subprocess
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from pathlib import Path

import pytest
import pytest_asyncio
import yaml

from operator_core.kube import Kube
from operator_testkit.controlplane import UNUSED_BY_THE_TESTS, ControlPlane

__all__ = [
    "Kubectl",
    "control_plane",
    "crd_documents",
    "install_crds",
    "installed_crds",
    "kube",
    "kubectl",
    "namespace",
    "start_control_plane",
    "start_module_control_plane",
    "start_test_control_plane",
    "wait_until",
    "worker_slice",
]

Kubectl = Callable[..., subprocess.CompletedProcess[str]]


async def wait_until(
    probe: Callable[[], object],
    *,
    timeout: float = 30.0,
    interval: float = 0.2,
    what: str = "condition",
) -> object:
    """Await ``probe()`` (sync or async) until it returns something truthy; fail the test after timeout."""
    deadline = time.monotonic() + timeout
    last: object = None
    while time.monotonic() < deadline:
        last = probe()
        if asyncio.iscoroutine(last):
            last = await last
        if last:
            return last
        await asyncio.sleep(interval)
    pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}; last value: {last!r}")


MAX_WORKERS = 8


def worker_slice(network: str) -> str:
    """This pytest-xdist worker's eighth of ``network`` (all of it outside xdist)."""
    whole = ipaddress.IPv4Network(network)
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker is None:
        return str(whole)
    index = int(worker.removeprefix("gw"))
    if index >= MAX_WORKERS:
        raise RuntimeError(
            f"at most {MAX_WORKERS} pytest-xdist workers get their own addresses; {worker} is one too many"
        )
    return str(list(whole.subnets(prefixlen_diff=3))[index])


def _control_planes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., ControlPlane]]:
    """A factory for control planes; every one it starts is stopped when the generator ends."""
    started: list[ControlPlane] = []

    def start(name: str = "controlplane", **options: object) -> ControlPlane:
        options.setdefault("disabled_controllers", UNUSED_BY_THE_TESTS)
        plane = ControlPlane(tmp_path_factory.mktemp(name), **options)  # type: ignore[arg-type]
        plane.start()
        started.append(plane)
        return plane

    try:
        yield start
    finally:
        for plane in reversed(started):
            plane.stop()


@pytest.fixture(scope="session")
def start_control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., ControlPlane]]:
    """Start control planes that last the session (the shared one)."""
    yield from _control_planes(tmp_path_factory)


@pytest.fixture(scope="module")
def start_module_control_plane(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Callable[..., ControlPlane]]:
    """Start control planes that one module's tests share, stopped after its last test."""
    yield from _control_planes(tmp_path_factory)


@pytest.fixture
def start_test_control_plane(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Callable[..., ControlPlane]]:
    """Start control planes of one test's own, stopped when it ends."""
    yield from _control_planes(tmp_path_factory)


@pytest.fixture(scope="session")
def control_plane(start_control_plane: Callable[..., ControlPlane]) -> ControlPlane:
    """The session's shared control plane."""
    return start_control_plane("controlplane")


@pytest_asyncio.fixture
async def kube(control_plane: ControlPlane) -> AsyncIterator[Kube]:
    client = Kube.connect(control_plane.kubeconfig)
    try:
        yield client
    finally:
        await client.close()


@pytest.fixture
def kubectl(control_plane: ControlPlane) -> Kubectl:
    """Run kubectl with the control plane's admin kubeconfig; raises on a non-zero exit unless check=False."""

    def run(
        *arguments: str, check: bool = True, input_text: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [str(control_plane.binaries.kubectl), f"--kubeconfig={control_plane.kubeconfig}", *arguments],
            capture_output=True,
            text=True,
            check=False,
            input=input_text,
            timeout=60,
        )
        if check and result.returncode != 0:
            raise KubectlFailed(result.returncode, result.args, result.stdout, result.stderr)
        return result

    return run


class KubectlFailed(subprocess.CalledProcessError):
    """A failed kubectl whose message carries what kubectl said (a bare CalledProcessError hides it)."""

    def __str__(self) -> str:
        return f"{super().__str__()}: {(self.stderr or '').strip()}"


def _namespace_name(test_name: str) -> str:
    slug = re.sub(r"[^a-z0-9-]+", "-", test_name.lower()).strip("-")[:40].strip("-")
    return f"{slug}-{uuid.uuid4().hex[:6]}"


@pytest_asyncio.fixture
async def namespace(kube: Kube, request: pytest.FixtureRequest) -> AsyncIterator[str]:
    """A fresh namespace named after the test."""
    name = _namespace_name(request.node.name)
    await kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    try:
        yield name
    finally:
        await kube.delete("v1", "Namespace", name)


def crd_documents(directory: Path) -> list[dict[str, object]]:
    """Every document of the YAML files in ``directory``."""
    documents: list[dict[str, object]] = []
    for path in sorted(directory.glob("*.yaml")):
        documents.extend(d for d in yaml.safe_load_all(path.read_text()) if d)
    return documents


_installed_crds: dict[str, list[str]] = {}


@pytest.fixture
def installed_crds(control_plane: ControlPlane, pytestconfig: pytest.Config) -> list[str]:
    """The committed CRDs in deploy/crds/, applied and Established on this test's control plane.

    Installed once per control plane (a directory may override ``control_plane``, so a
    session-wide cache of one answer would be wrong); returns the CRD names.
    """
    if control_plane.api_url not in _installed_crds:
        directory = Path(pytestconfig.rootpath) / "deploy" / "crds"
        _installed_crds[control_plane.api_url] = asyncio.run(
            install_crds(control_plane, crd_documents(directory))
        )
    return _installed_crds[control_plane.api_url]


async def install_crds(control_plane: ControlPlane, documents: list[dict[str, object]]) -> list[str]:
    """Apply CRDs (as admin) and wait until each is Established; returns their names."""
    async with Kube.connect(control_plane.kubeconfig) as client:
        names = []
        for document in documents:
            applied = await client.apply(document)
            names.append(applied.object["metadata"]["name"])
        await wait_until_established(client, names)
        return names


async def wait_until_established(client: Kube, names: Sequence[str], timeout: float = 180) -> None:
    """Wait until each CRD is Established; a timeout names the ones that are not and their conditions.

    The bound is wide: a 60 s ``kubectl wait`` for the Gateway API's HTTPRoute CRD (hundreds of CEL
    rules, compiled before it is served) once ran out on a loaded 2-core CI machine, saying nothing.
    """
    deadline = time.monotonic() + timeout
    while True:
        waiting: dict[str, object] = {}
        for name in names:
            crd = await client.get_live("apiextensions.k8s.io/v1", "CustomResourceDefinition", name)
            # A CRD just created has "conditions": null until the API server has looked at it.
            conditions = ((crd or {}).get("status") or {}).get("conditions") or []
            if not any(c["type"] == "Established" and c["status"] == "True" for c in conditions):
                waiting[name] = conditions if crd is not None else "not found"
        if not waiting:
            return
        if time.monotonic() > deadline:
            pytest.fail(f"CRDs not Established after {timeout:.0f} s: {waiting}")
        await asyncio.sleep(0.2)
