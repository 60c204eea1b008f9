"""Helm's own template engine, as a subprocess (decision 11): the one way charts become objects here.

:func:`helm_template` runs ``helm template <release name> <chart> --namespace <namespace>`` the way
upstream runs it, with helm's cache and configuration kept in a directory of the caller's (helm
writes there even to render), and a time limit after which helm is killed. Every failure is a
:class:`HelmError` that says what to do: helm missing, helm refusing the chart (its own words),
or helm taking too long.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path

from operator_core.errors import OperatorError
from operator_core.secrets import scrub

__all__ = ["HelmError", "helm_template"]

_STDERR_TAIL = 2000


class HelmError(OperatorError):
    """helm could not render a chart (temporary for the loop: a fixed chart or binary is retried)."""


async def helm_template(
    helm: str, chart: Path, release_name: str, namespace: str, *, home: Path, timeout: float = 60.0
) -> str:
    """The rendered objects of ``chart`` (a packaged .tgz or a directory), as helm prints them."""
    executable = shutil.which(helm)
    if executable is None:
        raise HelmError(
            f"helm is not installed here ({helm!r} is neither a path nor on PATH): install helm 3, or point "
            "OPERATOR_SUITE_HELM at it"
        )
    await asyncio.to_thread(home.mkdir, parents=True, exist_ok=True)
    environment = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(home),
        "HELM_CACHE_HOME": str(home / "cache"),
        "HELM_CONFIG_HOME": str(home / "config"),
        "HELM_DATA_HOME": str(home / "data"),
    }
    process = await asyncio.create_subprocess_exec(
        executable,
        "template",
        release_name,
        str(chart),
        "--namespace",
        namespace,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=environment,
    )
    try:
        stdout, stderr = await asyncio.wait_for(process.communicate(), timeout)
    except TimeoutError:
        process.kill()
        await process.wait()
        raise HelmError(
            f"helm template of {chart.name} took longer than {timeout:.0f} s and was stopped"
        ) from None
    except asyncio.CancelledError:
        process.kill()
        await process.wait()
        raise
    if process.returncode != 0:
        words = stderr.decode(errors="replace").strip()[-_STDERR_TAIL:]
        raise HelmError(
            scrub(f"helm template of {chart.name} failed: {words or f'exit {process.returncode}'}")
        )
    return stdout.decode()
