"""Build, or reuse, the programs of a real node from Go modules pinned under ``hack/``, the way
:mod:`operator_testkit.binaries` builds the control plane. One table says what is built from where:

=============================  ================  ===============================================
program                        pinned in         why this one
=============================  ================  ===============================================
kubelet, kube-proxy            hack/node         the control plane's k8s.io/kubernetes v1.35.4
containerd, its runc shim,     hack/containerd   containerd 2 (Debian's 1.6 is past upstream's
ctr                                              support; 2.x runs the same here)
coredns                        hack/coredns      the cluster's DNS, run as a pod; only the plugins
                                                 its Corefile uses (hack/coredns/main.go)
local-path-provisioner         hack/local-path   the cluster's volumes, run as a pod
pause                          hack/pause        every pod's sandbox, our own twenty lines
=============================  ================  ===============================================

runc, the CNI plugins and iptables come from Debian's packages (``make node-tools``): runc needs
libseccomp through cgo, which these static builds do not have. Everything lands in
``<cache_dir>/nodes-<hash of the pinned files and flags>/bin``; only a missing program is built.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from operator_core.settings import from_env
from operator_testkit.binaries import (
    GoProgram,
    GoPrograms,
    ensure_go_programs,
    find_hack_dir,
    kubernetes_ldflags,
    required_version,
)
from operator_testkit.errors import ControlPlaneError
from operator_testkit.settings import ControlPlaneSettings

__all__ = ["DEBIAN_PROGRAMS", "GoProgram", "NodeTools", "ensure_node_tools", "node_programs"]

_CONTAINERD = "github.com/containerd/containerd/v2"
_LOCAL_PATH = "github.com/rancher/local-path-provisioner"


def node_programs(hack: Path, settings: ControlPlaneSettings) -> tuple[GoProgram, ...]:
    """The table above, with each upstream's version stamps (read from the pins)."""
    kubernetes = kubernetes_ldflags(settings.kubernetes_version)
    containerd = required_version(hack / "containerd" / "go.mod", _CONTAINERD)
    containerd_flags = f"-s -w -X {_CONTAINERD}/version.Version={containerd}"
    local_path = required_version(hack / "local-path" / "go.mod", _LOCAL_PATH)
    return (
        GoProgram("kubelet", "node", "k8s.io/kubernetes/cmd/kubelet", kubernetes),
        GoProgram("kube-proxy", "node", "k8s.io/kubernetes/cmd/kube-proxy", kubernetes),
        GoProgram("containerd", "containerd", f"{_CONTAINERD}/cmd/containerd", containerd_flags),
        GoProgram(
            "containerd-shim-runc-v2",
            "containerd",
            f"{_CONTAINERD}/cmd/containerd-shim-runc-v2",
            containerd_flags,
        ),
        GoProgram("ctr", "containerd", f"{_CONTAINERD}/cmd/ctr", containerd_flags),
        GoProgram("coredns", "coredns", ".", "-s -w"),
        GoProgram("local-path-provisioner", "local-path", _LOCAL_PATH, f"-s -w -X main.VERSION={local_path}"),
        GoProgram("pause", "pause", ".", "-s -w"),
    )


DEBIAN_PROGRAMS = {
    "runc": "runc",
    "iptables": "iptables",
    "nsenter": "util-linux",
    "ip": "iproute2",
    "conntrack": "conntrack",
}
"""The programs a node takes from Debian, with the package that brings each."""


NodeTools = GoPrograms
"""Where the node programs are: ``path(name)``, ``bin``."""


def missing_debian_programs() -> list[str]:
    """The Debian packages to install for the programs a node needs that are not on this machine."""
    return sorted({package for program, package in DEBIAN_PROGRAMS.items() if shutil.which(program) is None})


def ensure_node_tools(settings: ControlPlaneSettings | None = None) -> NodeTools:
    """The node programs at their pinned versions, built first if the cache lacks them; refuses at once,
    naming the packages, when a Debian program a node needs is missing."""
    missing = missing_debian_programs()
    if missing:
        raise ControlPlaneError(
            f"real nodes need Debian's {', '.join(missing)}, not installed here: "
            f"apt-get install {' '.join(missing)} (make node-tools does)"
        )
    settings = settings or from_env(ControlPlaneSettings)
    hack = find_hack_dir()
    programs = node_programs(hack, settings)
    pinned = [
        f"{module}/{name}"
        for module in ("node", "containerd", "coredns", "local-path", "pause")
        for name in ("go.mod", "go.sum")
    ]
    pinned = [name for name in pinned if (hack / name).exists()] + ["pause/main.go", "coredns/main.go"]
    recipe = [f"{p.name} {p.module} {p.package} {p.ldflags}" for p in programs]
    return ensure_go_programs("nodes", programs, pinned, recipe, settings)
