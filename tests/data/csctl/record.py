"""Record what the real ``csctl`` builds and publishes for the test kit's upstream-shaped stacks, into
``golden.json`` beside this file; tests/integration/test_csctl_builder.py holds the test kit's builder
to it.

csctl is not served by the Go module proxy here, so CI cannot build it: this is run by hand, with a
csctl built from SovereignCloudStack/csctl's source (the commit is written into the file)::

    python tests/data/csctl/record.py /path/to/csctl <csctl commit>

It starts the test kit's registry over TLS (csctl speaks only HTTPS), and runs ``csctl create`` in
each mode, in a scratch directory (csctl writes ``./.tmp`` and ``./.release`` where it runs).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

from operator_testkit.drivers.csctl import fetch_manifest, manifest_summary, release_summary
from operator_testkit.drivers.upstream_stacks import docker_scs, openstack_scs2, single_chart_stack
from operator_testkit.registry import running_registry

HERE = Path(__file__).parent
REPOSITORY = "kaas/cluster-stacks"
DEPENDENCY_REPOSITORY = "http://127.0.0.1:8879/charts"
"""What the stacks' Chart.yaml files name as their dependencies' repository (nothing is fetched
while building)."""


def csctl(binary: Path, workdir: Path, environment: dict[str, str], *arguments: str) -> Path | str:
    """The release directory csctl created, or the last line of its error when it refused."""
    result = subprocess.run(
        [str(binary), "create", *arguments, "-o", str(workdir / "release")],
        cwd=workdir,
        env=environment,
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        return (result.stderr.strip().splitlines() or ["(no output)"])[-1]
    created = [line for line in result.stdout.splitlines() if line.startswith("Created ")]
    return Path(created[-1].removeprefix("Created ").strip())


def main(binary: Path, commit: str) -> None:
    cases: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="csctl-record-") as scratch:
        root = Path(scratch)
        stacks = root / "stacks"
        with running_registry(root / "registry", tls=True) as registry:
            environment = {
                **os.environ,
                "SSL_CERT_FILE": str(registry.ca_cert),
                "OCI_REGISTRY": registry.host,
                "OCI_REPOSITORY": f"{registry.host}/{REPOSITORY}",
                "OCI_USERNAME": "unused",
                "OCI_PASSWORD": "unused",
            }
            work = root / "work"
            work.mkdir()

            def record(case: str, stack: Path, *arguments: str, publish: bool = False) -> None:
                extra = ["--publish", "--remote", "oci"] if publish else []
                release = csctl(binary, work, environment, str(stack), *arguments, *extra)
                if isinstance(release, str):
                    cases[case] = {"arguments": list(arguments), "refused": release}
                    return
                entry: dict[str, Any] = {"arguments": list(arguments), **release_summary(release)}
                if publish:
                    entry["manifest"] = manifest_summary(fetch_manifest(registry, REPOSITORY, release.name))
                cases[case] = entry

            docker = docker_scs(stacks / "a", DEPENDENCY_REPOSITORY)
            record("docker-scs hash", docker, "-m", "hash", publish=True)
            record("openstack-scs2 hash", openstack_scs2(stacks / "b", DEPENDENCY_REPOSITORY), "-m", "hash")
            record("ferrol hash", single_chart_stack(stacks / "c"), "-m", "hash")
            record(
                "docker-scs custom",
                docker,
                "-m",
                "custom",
                "--cluster-stack-version",
                "v1-alpha.0",
                "--cluster-addon-version",
                "v1-alpha.0",
                "--node-image-version",
                "v1",
            )
            stable = docker_scs(stacks / "d", DEPENDENCY_REPOSITORY, name="stable")
            record("stable first", stable, "-m", "stable", publish=True)
            values = stable / "cluster-class" / "values.yaml"
            values.write_text(values.read_text() + "# the class changed\n")
            # csctl refuses a stable release where neither the addons nor the node images changed.
            record("stable class changed", stable, "-m", "stable", publish=True)
            chart = stable / "cluster-addon" / "cni" / "values.yaml"
            chart.write_text(yaml.safe_dump({"cni-plugin": {"setting": "changed"}}))
            record("stable addon changed", stable, "-m", "stable", publish=True)
            record("stable nothing changed", stable, "-m", "stable", publish=True)
    golden = {
        "csctl": commit,
        "dependencyRepository": DEPENDENCY_REPOSITORY,
        "cases": cases,
    }
    (HERE / "golden.json").write_text(json.dumps(golden, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2])
