"""Helm's own template engine, as a subprocess (decision 11): the one way charts become objects here.

:func:`helm_template` runs ``helm template <release name> <chart> --namespace <namespace>`` the way
upstream runs it, with helm's cache and configuration kept in a directory of the caller's (helm
writes there even to render), and a time limit after which helm is killed. Every failure is a
:class:`HelmError` that says what to do: helm missing, helm refusing the chart (its own words),
or helm taking too long.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from operator_core.errors import OperatorError
from operator_core.secrets import register_secret, scrub

__all__ = ["HelmError", "RegistryAccess", "helm_template", "render_values_template"]

_STDERR_TAIL = 2000


class HelmError(OperatorError):
    """helm could not render a chart (temporary for the loop: a fixed chart or binary is retried)."""


@dataclass(frozen=True)
class RegistryAccess:
    """How helm reaches the OCI registry of a release's source, for the dependencies a chart names
    there: the same credentials and CA as the source's own downloads (a stack's Secrets)."""

    host: str
    username: str | None = None
    password: str | None = None
    ca_pem: str | None = None
    plain_http: bool = False

    def __repr__(self) -> str:  # never the password, whatever prints it
        return f"RegistryAccess(host={self.host!r}, plain_http={self.plain_http})"

    @contextlib.contextmanager
    def arguments(self, scratch: Path) -> Iterator[list[str]]:
        """helm's arguments for this access, with its files (a registry config holding the password,
        the CA) written under ``scratch`` for as long as the block lasts, readable by this user alone."""
        with tempfile.TemporaryDirectory(prefix="registry-", dir=scratch) as directory:
            files = Path(directory)
            auths = {}
            if self.username and self.password:
                pair = base64.b64encode(f"{self.username}:{self.password}".encode()).decode()
                register_secret(pair)
                auths[self.host] = {"auth": pair}
            config = files / "config.json"
            config.touch(mode=0o600)
            config.write_text(json.dumps({"auths": auths}))
            arguments = ["--registry-config", str(config)]
            if self.ca_pem:
                (files / "ca.crt").write_text(self.ca_pem)
                arguments += ["--ca-file", str(files / "ca.crt")]
            if self.plain_http:
                arguments.append("--plain-http")
            yield arguments


async def helm_template(
    helm: str,
    chart: Path,
    release_name: str,
    namespace: str,
    *,
    home: Path,
    values: str | None = None,
    include_crds: bool = False,
    kube_version: str | None = None,
    dependency_update: bool = False,
    registry: RegistryAccess | None = None,
    timeout: float = 60.0,
) -> str:
    """The rendered objects of ``chart`` (a packaged .tgz or a directory), as helm prints them.

    ``values`` (YAML) go to helm on stdin; ``include_crds`` renders the chart's crds/ too;
    ``kube_version`` is what ``.Capabilities.KubeVersion`` says (helm's own default otherwise);
    ``dependency_update`` fetches the dependencies ``Chart.yaml`` declares and the chart lacks (its
    ``charts/``) from their repositories first, into the chart's folder, as upstream renders addons;
    those in the OCI registry of ``registry`` with its credentials and CA."""
    extra = [*(["-f", "-"] if values is not None else []), *(["--include-crds"] if include_crds else [])]
    if dependency_update:
        extra.append("--dependency-update")
    if kube_version is not None:
        extra += ["--kube-version", kube_version]
    access = registry.arguments(await _made(home)) if registry is not None and dependency_update else None
    with access or contextlib.nullcontext([]) as access_arguments:
        return await _run_helm(
            helm,
            ["template", release_name, str(chart), "--namespace", namespace, *extra, *access_arguments],
            chart.name,
            home=home,
            stdin=values,
            timeout=timeout,
        )


async def render_values_template(
    helm: str, template: str, data: Mapping[str, Any], *, home: Path, timeout: float = 60.0
) -> str:
    """``template`` (a cluster-addon-values.yaml) rendered over ``data`` (``Cluster`` and the objects it
    references), as upstream renders it: when the result has a string under ``values``, that string
    is the values; otherwise the whole result is."""
    with tempfile.TemporaryDirectory(prefix="values-", dir=await _made(home)) as scratch:
        chart = Path(scratch)
        (chart / "templates").mkdir()
        (chart / "Chart.yaml").write_text("apiVersion: v2\nname: cluster-addon-values\nversion: 0.0.0\n")
        (chart / "values-template.yaml").write_text(template)
        (chart / "templates" / "values.yaml").write_text(
            '{{ tpl (.Files.Get "values-template.yaml") .Values }}\n'
        )
        rendered = await _run_helm(
            helm,
            [
                "template",
                "cluster-addon-values",
                str(chart),
                "--show-only",
                "templates/values.yaml",
                "-f",
                "-",
            ],
            "cluster-addon-values.yaml",
            home=home,
            stdin=json.dumps(dict(data)),
            timeout=timeout,
        )
    body = rendered.split("\n", 2)[2] if rendered.startswith("---\n# Source:") else rendered
    try:
        parsed = yaml.safe_load(body)
    except yaml.YAMLError as error:
        raise HelmError(f"cluster-addon-values.yaml does not render to YAML: {error}") from None
    if isinstance(parsed, dict) and isinstance(parsed.get("values"), str):
        return str(parsed["values"])
    return body


async def _made(directory: Path) -> Path:
    await asyncio.to_thread(directory.mkdir, parents=True, exist_ok=True)
    return directory


async def _run_helm(
    helm: str, arguments: list[str], what: str, *, home: Path, stdin: str | None, timeout: float
) -> str:
    """helm's stdout for ``arguments``; a :class:`HelmError` naming ``what`` when it fails."""
    executable = shutil.which(helm)
    if executable is None:
        raise HelmError(
            f"helm is not installed here ({helm!r} is neither a path nor on PATH): install helm 3, or point "
            "OPERATOR_SUITE_HELM at it"
        )
    await _made(home)
    environment = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(home),
        "HELM_CACHE_HOME": str(home / "cache"),
        "HELM_CONFIG_HOME": str(home / "config"),
        "HELM_DATA_HOME": str(home / "data"),
    }
    process = await asyncio.create_subprocess_exec(
        executable,
        *arguments,
        stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=environment,
    )
    try:
        stdout, stderr = await asyncio.wait_for(
            process.communicate(stdin.encode() if stdin is not None else None), timeout
        )
    except TimeoutError:
        process.kill()
        await process.wait()
        raise HelmError(f"helm template of {what} took longer than {timeout:.0f} s and was stopped") from None
    except asyncio.CancelledError:
        process.kill()
        await process.wait()
        raise
    if process.returncode != 0:
        words = stderr.decode(errors="replace").strip()[-_STDERR_TAIL:]
        raise HelmError(scrub(f"helm template of {what} failed: {words or f'exit {process.returncode}'}"))
    return stdout.decode()
