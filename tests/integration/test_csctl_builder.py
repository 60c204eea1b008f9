"""The test kit's release builder (operator_testkit.drivers.csctl) against what the real ``csctl``
built and published for the same stacks (tests/data/csctl/golden.json, recorded by record.py beside
it): file names, ``metadata.yaml`` and ``hashes.json`` byte for byte, every archive entry's content
and mode, the OCI manifest's media types and annotations, the tag, and the refusals, in hash, custom
and stable modes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from operator_testkit.clusterstack_tools import ClusterStackTools
from operator_testkit.drivers.csctl import (
    CsctlError,
    StackConfig,
    create_release,
    download_release_oci,
    fetch_manifest,
    latest_stable_tag,
    list_tags,
    manifest_summary,
    publish_release_oci,
    release_summary,
)
from operator_testkit.drivers.upstream_stacks import docker_scs, openstack_scs2, single_chart_stack
from operator_testkit.registry import RunningRegistry

GOLDEN = json.loads((Path(__file__).parent.parent / "data" / "csctl" / "golden.json").read_text())
CASES: dict[str, Any] = GOLDEN["cases"]
REPOSITORY = GOLDEN["dependencyRepository"]


def same_as_csctl(case: str, release: Path) -> None:
    expected = {k: v for k, v in CASES[case].items() if k in ("release", "files")}
    assert release_summary(release) == expected, f"{case}: not what csctl built"


@pytest.mark.parametrize(
    ("case", "make"),
    [
        ("docker-scs hash", lambda root: docker_scs(root, REPOSITORY)),
        ("openstack-scs2 hash", lambda root: openstack_scs2(root, REPOSITORY)),
        ("ferrol hash", single_chart_stack),
    ],
)
def test_hash_mode_builds_what_csctl_builds(
    case: str, make: Any, clusterstack_tools: ClusterStackTools, tmp_path: Path
) -> None:
    stack = make(tmp_path / "stacks")
    release = create_release(stack, tmp_path / "release", helm=clusterstack_tools.helm, mode="hash")
    same_as_csctl(case, release)


def test_custom_mode_takes_the_versions_it_is_given(
    clusterstack_tools: ClusterStackTools, tmp_path: Path
) -> None:
    stack = docker_scs(tmp_path / "stacks", REPOSITORY)
    versions = ("v1-alpha.0", "v1-alpha.0", "v1")
    release = create_release(
        stack, tmp_path / "release", helm=clusterstack_tools.helm, mode="custom", custom=versions
    )
    same_as_csctl("docker-scs custom", release)
    with pytest.raises(CsctlError, match=r"v1\.0"):
        create_release(
            stack,
            tmp_path / "other",
            helm=clusterstack_tools.helm,
            mode="custom",
            custom=("v1.0", "v1", "v1"),
        )


def test_a_release_is_published_as_csctl_publishes_it(
    clusterstack_tools: ClusterStackTools, oci_registry: RunningRegistry, tmp_path: Path
) -> None:
    repository = "csctl/hash"
    stack = docker_scs(tmp_path / "stacks", REPOSITORY)
    release = create_release(stack, tmp_path / "release", helm=clusterstack_tools.helm, mode="hash")
    pushed = publish_release_oci(oci_registry, release, repository)
    assert pushed is not None
    served = fetch_manifest(oci_registry, repository, release.name)
    assert manifest_summary(served) == CASES["docker-scs hash"]["manifest"]
    assert publish_release_oci(oci_registry, release, repository) is None, "an existing tag is left alone"


def test_stable_mode_numbers_releases_from_the_registry_and_refuses_when_no_addon_changed(
    clusterstack_tools: ClusterStackTools, oci_registry: RunningRegistry, tmp_path: Path
) -> None:
    """As csctl --remote oci: the newest stable tag's hashes.json and metadata.yaml decide the next
    versions; a change of the class alone is refused, as csctl refuses it."""
    repository = "csctl/stable"
    stack = docker_scs(tmp_path / "stacks", REPOSITORY, name="stable")
    config = StackConfig.read(stack)

    def build(case: str, number: int) -> None:
        tags = list_tags(oci_registry, repository)
        latest = latest_stable_tag(tags, config)
        downloaded = (
            None
            if latest is None
            else download_release_oci(oci_registry, repository, latest, tmp_path / f"latest-{number}")
        )
        if "refused" in CASES[case]:
            with pytest.raises(CsctlError) as refused:
                create_release(
                    stack,
                    tmp_path / f"out-{number}",
                    helm=clusterstack_tools.helm,
                    mode="stable",
                    latest=downloaded,
                )
            assert CASES[case]["refused"].endswith(str(refused.value))
            return
        release = create_release(
            stack, tmp_path / f"out-{number}", helm=clusterstack_tools.helm, mode="stable", latest=downloaded
        )
        same_as_csctl(case, release)
        publish_release_oci(oci_registry, release, repository)
        assert (
            manifest_summary(fetch_manifest(oci_registry, repository, release.name))
            == CASES[case]["manifest"]
        )

    build("stable first", 1)
    values = stack / "cluster-class" / "values.yaml"
    values.write_text(values.read_text() + "# the class changed\n")
    build("stable class changed", 2)
    (stack / "cluster-addon" / "cni" / "values.yaml").write_text("cni-plugin:\n  setting: changed\n")
    build("stable addon changed", 3)
    build("stable nothing changed", 4)
