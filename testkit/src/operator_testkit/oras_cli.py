"""The ``oras`` command-line tool, built from its Go module, to push releases as upstream's
cluster-stacks now do without csctl (cluster-stacks PR #259): ``oras push <ref> <file>...``, no
artifact type, no csctl annotations, each file a layer titled by its name.

:func:`ensure_oras` builds it once (about a minute cold) into::

    <cache_dir>/oras-V-<hash of hack/oras/go.mod and go.sum>/bin/oras

:func:`oras_push` pushes a release directory's files to a running registry, with the registry's CA
and credentials where it has them.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from operator_core.settings import from_env
from operator_testkit.binaries import GoProgram, ensure_go_programs, find_hack_dir, required_version
from operator_testkit.errors import ControlPlaneError
from operator_testkit.registry import RunningRegistry
from operator_testkit.settings import ControlPlaneSettings

__all__ = ["ensure_oras", "oras_push"]

_ORAS = "oras.land/oras"
_PINNED_FILES = ("oras/go.mod", "oras/go.sum")
_LDFLAGS = "-s -w -X oras.land/oras/internal/version.BuildMetadata="
"""As oras' release build: a plain version in ``oras version``."""


def ensure_oras(settings: ControlPlaneSettings | None = None) -> Path:
    """The pinned oras binary, built first if the cache lacks it (a :class:`ControlPlaneError` naming
    the ``go`` command and its log when the build fails)."""
    settings = settings or from_env(ControlPlaneSettings)
    version = required_version(find_hack_dir() / "oras" / "go.mod", _ORAS)
    program = GoProgram("oras", "oras", f"{_ORAS}/cmd/oras", _LDFLAGS)
    return ensure_go_programs(f"oras-{version}", (program,), _PINNED_FILES, [_LDFLAGS], settings).path("oras")


def oras_push(
    registry: RunningRegistry,
    reference: str,
    directory: Path,
    *,
    username: str | None = None,
    password: str | None = None,
    binary: Path | None = None,
) -> None:
    """``oras push <registry>/<reference> <each file of directory>``, run in ``directory`` so that each
    layer is titled by the file's name, as a provider's release pipeline runs it."""
    binary = binary or ensure_oras()
    argv = [str(binary), "push", f"{registry.host}/{reference}"]
    if registry.plain_http:
        argv.append("--plain-http")
    elif registry.ca_cert is not None:
        argv += ["--ca-file", str(registry.ca_cert)]
    if username is not None:
        argv += ["--username", username, "--password-stdin"]
    argv += sorted(entry.name for entry in directory.iterdir() if entry.is_file())
    done = subprocess.run(
        argv,
        cwd=directory,
        input=(password or "").encode(),
        capture_output=True,
        timeout=120,
        check=False,
    )
    if done.returncode != 0:
        raise ControlPlaneError(
            f"oras push {registry.host}/{reference} failed (exit {done.returncode}): "
            f"{done.stderr.decode(errors='replace').strip()[-2000:]}"
        )
