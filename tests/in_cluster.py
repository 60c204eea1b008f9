"""What the in-cluster tests check of an operator's process, by its host pid: that it runs the image's
program as the chart says, with a kubelet's environment and a token bound to its pod."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

from operator_core.kube import Kube
from operator_testkit.assertions import wait_for_condition

# /var/run is a symlink to /run, which /proc/PID/root would resolve in the caller's mount namespace.
TOKEN_DIR = "run/secrets/kubernetes.io/serviceaccount"


def token_claims(pid: int) -> dict[str, Any]:
    """The claims of the token the process sees at the in-cluster path (in its own mount namespace)."""
    token = Path(f"/proc/{pid}/root/{TOKEN_DIR}/token").read_text()
    payload = token.split(".")[1]
    claims: dict[str, Any] = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    return claims


def environment(pid: int) -> dict[str, str]:
    entries = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(entry.decode().split("=", 1) for entry in entries if b"=" in entry)


IMAGE_ENV = {"PATH", "PYTHONDONTWRITEBYTECODE", "PYTHONUNBUFFERED"}  # the Dockerfile's ENV


def from_a_kubelet(name: str) -> bool:
    """A variable a kubelet gives a container: HOSTNAME, a Service link, or the chart's own env."""
    links = ("_SERVICE_HOST", "_SERVICE_PORT", "_PORT", "_PROTO", "_ADDR")
    return (
        name == "HOSTNAME"
        or name.startswith("OPERATOR_SUITE_")
        or "_SERVICE_PORT_" in name
        or (name.endswith(links) or "_PORT_" in name)
    )


def assert_runs_from_the_image_as_the_chart_says(pid: int, command: str) -> None:
    """The process is the image's program in the image's root, as 65532 with a read-only root, no
    privilege to gain, and nothing in its environment but the image's and a kubelet's."""
    status = dict(line.split(":\t", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines())
    assert status["Uid"].split() == ["65532"] * 4
    assert status["Gid"].split() == ["65532"] * 4
    assert status["NoNewPrivs"] == "1"
    assert int(status["CapEff"], 16) == int(status["CapBnd"], 16) == 0
    root = Path(f"/proc/{pid}/root")
    assert (root / "opt/operator-suite/bin" / command).is_file(), "the image's own program"
    assert not (root / "root/.cache/operator-suite").exists(), "nothing of this machine's filesystem"
    (root_mount,) = [line.split() for line in Path(f"/proc/{pid}/mountinfo").read_text().splitlines()
                     if line.split()[4] == "/"]  # fmt: skip
    assert "ro" in root_mount[5].split(","), "a read-only root filesystem"
    env = environment(pid)
    assert "KUBECONFIG" not in env
    assert env["HOME"] == "/home/nonroot", "from the image's passwd, as a runtime sets it"
    strays = sorted(name for name in env if name not in IMAGE_ENV | {"HOME"} and not from_a_kubelet(name))
    assert strays == [], f"variables no kubelet gives: {strays}"


async def ready_condition(kube: Kube, api: str, kind: str, name: str, namespace: str) -> dict[str, Any]:
    """The Ready=True condition, once there."""
    return await wait_for_condition(kube, api, kind, name, namespace, "Ready", "True", timeout=180)
