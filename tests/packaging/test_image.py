"""The runtime image, built for real without a Docker engine (mmdebstrap's Debian base, buildah and the
repository's Dockerfile): it runs each of the three operators by its command, as a user that is not root,
with the runtime distribution and nothing of the test kit; its backup command moves a snapshot to a real
S3 server and back; its size is reported; it is pushed to a local OCI registry (the CNCF distribution
registry), whose manifest names the image's config."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import httpx
import pytest

from operator_core.settings import from_env
from operator_testkit.clusterstack_tools import ClusterStackTools
from operator_testkit.image import Image, buildah_of, push_image, run_in_image
from operator_testkit.registry import RunningRegistry
from operator_testkit.s3 import RunningS3
from operator_testkit.settings import ControlPlaneSettings

pytestmark = pytest.mark.packaging

ROOT = Path(__file__).resolve().parents[2]
# Debian's Python, the runtime's dependencies (botocore the largest) and helm (about 60 MiB); a bound
# that catches a stray build tool or test dependency, not a target.
MAX_SIZE_MIB = 350


@pytest.fixture(scope="module")
def image(suite_image: Image) -> Image:
    return suite_image


@pytest.mark.parametrize(
    ("command", "says"),
    [
        ("typesense-operator", "usage: typesense-operator"),
        ("monocle-operator", "usage: monocle-operator"),
        ("cluster-stack-operator", "usage: cluster-stack-operator"),
        ("operator-suite", "usage: operator-suite"),
        ("typesense-backup", "usage: typesense-backup"),
    ],
)
def test_the_image_runs_each_operator_by_its_command(image: Image, command: str, says: str) -> None:
    assert says in run_in_image(image.name, command, "--help")


def test_the_image_runs_as_a_user_that_is_not_root_with_the_runtime_only(image: Image) -> None:
    assert run_in_image(image.name, "id", "-u") == "65532"
    assert run_in_image(image.name, "id", "-un") == "nonroot", "the user has a passwd entry, as distroless's"
    probe = (
        "import importlib.util, json; print(json.dumps({name: importlib.util.find_spec(name) is not None "
        "for name in ('operator_core', 'typesense_operator', 'operator_testkit', 'pytest', 'pip', 'kopf', "
        "'httpx', 'githubkit')}))"
    )
    found = json.loads(run_in_image(image.name, "python3", "-c", probe))
    assert found == {
        "operator_core": True,
        "typesense_operator": True,
        "operator_testkit": False,
        "pytest": False,
        "pip": False,
        "kopf": False,
        "httpx": False,  # one HTTP library: aiohttp (decisions 21, 26 and 27)
        "githubkit": False,
    }


def test_the_image_carries_the_pinned_helm_for_the_cluster_stack_operator(
    image: Image, clusterstack_tools: ClusterStackTools
) -> None:
    said = run_in_image(image.name, "helm", "version", "--template", "{{ .Version }}")
    assert said == clusterstack_tools.pins.helm


def test_building_the_image_leaves_no_working_container_mounted(image: Image) -> None:
    """buildah 1.28 kept the helm stage's working container (and its overlay mount) after each build."""
    buildah = buildah_of(from_env(ControlPlaneSettings))
    names = buildah("containers", "--format", "{{.ContainerName}}", capture=True).split()
    assert not [name for name in names if name.startswith("operator-suite-helm-working-container")], names


def test_the_image_is_small_enough_and_its_base_is_pinned(image: Image) -> None:
    size_mib = image.size_bytes / 2**20
    print(f"image {image.name}: {size_mib:.1f} MiB unpacked, base {image.base}")
    assert size_mib < MAX_SIZE_MIB
    assert "@sha256:" in image.base


def test_the_image_is_pushed_to_a_local_oci_registry(image: Image, oci_registry: RunningRegistry) -> None:
    push_image(image.name, f"docker://{oci_registry.host}/operator-suite:test", compress=False)
    accept = (
        "application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json"
    )
    with httpx.Client(base_url=oci_registry.url, trust_env=False, timeout=10) as registry:
        tags = registry.get("/v2/operator-suite/tags/list").json()
        manifest = registry.get("/v2/operator-suite/manifests/test", headers={"Accept": accept})
    assert tags["tags"] == ["test"]
    assert manifest.status_code == 200
    layers = manifest.json()["layers"]
    assert sum(layer["size"] for layer in layers) > 0
    assert len(layers) >= 2, "the base and the runtime"


def test_the_images_typesense_backup_moves_a_snapshot_to_s3_and_back(
    image: Image, s3_server: RunningS3, bucket: str, tmp_path: Path
) -> None:
    """What the backup Job and a restoring pod run, from the image's own filesystem as its user:
    a snapshot up to S3 over HTTPS (the endpoint's CA mounted, the credentials in the environment),
    then back into an empty data directory, byte for byte."""
    snapshot, data, ca = tmp_path / "snapshot", tmp_path / "data", tmp_path / "ca"
    raft = snapshot / "state" / "snapshot" / "snapshot_00000000000000000002"
    raft.mkdir(parents=True)
    (raft / "__raft_snapshot_meta").write_bytes(os.urandom(100_000))
    (snapshot / "state" / "meta").mkdir()
    (snapshot / "state" / "meta" / "raft_meta").write_text("raft meta\n")
    data.mkdir()
    ca.mkdir()
    assert s3_server.ca_cert is not None
    shutil.copyfile(s3_server.ca_cert, ca / "ca.pem")
    for folder in (data, ca, *(p for p in snapshot.rglob("*") if p.is_dir()), snapshot):
        folder.chmod(0o777)  # the image's user is not this one
    location = f"s3://{bucket}/default/search/from-image"
    environment = s3_server.aws_environment(ca_bundle="/ca/ca.pem")
    volumes = {ca: "/ca"}
    said = run_in_image(
        image.name, "typesense-backup", "upload", "--snapshot", "/snapshot", "--to", location,
        "--node", "search-sts-0", "--typesense-version", "29.0", "--collections", "1", "--documents", "1",
        "--taken-at", "2026-11-25T23:00:00Z", "--keep-snapshot",
        environment=environment, volumes={**volumes, snapshot: "/snapshot"},
    )  # fmt: skip
    assert json.loads(said) == {"attempts": 1, "files": 2, "location": location, "size": 100_010}
    said = run_in_image(
        image.name, "typesense-backup", "restore", "--from", location, "--data-dir", "/data",
        environment=environment, volumes={**volumes, data: "/data"},
    )  # fmt: skip
    assert json.loads(said)["restored"] is True
    restored = data / raft.relative_to(snapshot) / "__raft_snapshot_meta"
    assert restored.read_bytes() == (raft / "__raft_snapshot_meta").read_bytes()
    assert (data / "state" / "meta" / "raft_meta").read_text() == "raft meta\n"
