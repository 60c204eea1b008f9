"""The configuration files of a real node: containerd's, the CNI network's, the kubelet's, and
kube-proxy's (pure: a plan in, text or a document out).

The settings this machine kind needs are recorded in ``shared/notes/real-nodes.md``; each is
commented where it is set. Every path a program would otherwise take from the machine (``/run/containerd``,
``/var/lib/cni``, ``/etc/cni/net.d``, ``/var/lib/kubelet``...) is pointed into the node's own directory,
so that a node leaves nothing behind but what the kubelet writes to fixed places (:mod:`.host` puts
those back).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from operator_testkit.nodes.plan import NodePlan, NodesPlan

__all__ = [
    "CNI_PLUGIN_DIR",
    "PAUSE_IMAGE",
    "cni_conflist",
    "containerd_config",
    "kube_proxy_config",
    "kubelet_config",
    "resolv_conf",
]

CNI_PLUGIN_DIR = Path("/usr/lib/cni")
"""Debian's containernetworking-plugins put bridge, host-local, portmap and loopback here."""
PAUSE_IMAGE = "localhost/operator-suite-pause:1"
"""Every pod's sandbox: hack/pause, our own pause program, in an image built here."""
RUNC = Path("/usr/sbin/runc")


def _toml(value: object) -> str:
    # The only values written here are paths, names, numbers and booleans: JSON's quoting is TOML's.
    return json.dumps(value) if not isinstance(value, bool) else str(value).lower()


def containerd_blobs(node: NodePlan) -> Path:
    """Where a node's containerd keeps the blobs of its content store (its root's local content plugin)."""
    return node.directory / "containerd" / "root" / "io.containerd.content.v1.content" / "blobs" / "sha256"


def pod_logs_directory(node: NodePlan) -> Path:
    """Where a node's kubelet writes its containers' logs (one directory per pod, gone with the pod)."""
    return node.directory / "pod-logs"


def containerd_config(node: NodePlan) -> str:
    """containerd 2's configuration (version 3) for one node: its root, state, sockets, CRI and CNI
    settings all inside the node's directory."""
    directory = node.directory / "containerd"
    sections: dict[str, dict[str, object]] = {
        "": {
            "version": 3,
            "root": str(directory / "root"),
            "state": str(directory / "state"),
            "temp": str(directory / "tmp"),
            # The plugins that would open host-wide sockets or files are not loaded.
            "disabled_plugins": ["io.containerd.nri.v1.nri", "io.containerd.internal.v1.tracing"],
        },
        "grpc": {"address": str(node.sockets / "containerd.sock")},
        "ttrpc": {"address": str(node.sockets / "containerd.sock.ttrpc")},
        "debug": {"address": ""},
        "metrics": {"address": ""},
        "plugins.'io.containerd.internal.v1.opt'": {"path": str(directory / "opt")},
        "plugins.'io.containerd.cri.v1.images'": {"snapshotter": "overlayfs"},
        "plugins.'io.containerd.cri.v1.images'.pinned_images": {"sandbox": PAUSE_IMAGE},
        "plugins.'io.containerd.cri.v1.runtime'": {
            # This machine's processes lack CAP_SYS_RESOURCE: a negative oom_score_adj cannot be
            # written, and without this every sandbox fails in runc ("can't get final child's PID").
            "restrict_oom_score_adj": True,
            "netns_mounts_under_state_dir": True,
            "enable_cdi": False,
            "disable_apparmor": True,
        },
        "plugins.'io.containerd.cri.v1.runtime'.containerd": {"default_runtime_name": "runc"},
        "plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc": {
            "runtime_type": "io.containerd.runc.v2",
        },
        "plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options": {
            "BinaryName": str(RUNC),
            "Root": str(directory / "runc"),
            # The kubelet's cgroupDriver is cgroupfs (cgroup v1 here): the two must agree.
            "SystemdCgroup": False,
        },
        "plugins.'io.containerd.cri.v1.runtime'.cni": {
            "bin_dirs": [str(CNI_PLUGIN_DIR)],
            "conf_dir": str(node.directory / "cni" / "net.d"),
            "max_conf_num": 1,
        },
    }
    lines: list[str] = []
    for section, values in sections.items():
        if section:
            lines.append(f"\n[{section}]")
        lines.extend(f"{key} = {_toml(value)}" for key, value in values.items())
    return "\n".join(lines).lstrip() + "\n"


def cni_conflist(node: NodePlan) -> dict[str, Any]:
    """The node's pod network: its own bridge and /24, addresses kept in the node's directory.

    No masquerade: a pod's packets keep their source address. Its default route leads to the bridge, but
    the namespace routes only the slot's ranges, and its FORWARD chain drops anything else.
    """
    return {
        "cniVersion": "1.0.0",
        "name": f"operator-suite-{node.name}",
        "plugins": [
            {
                "type": "bridge",
                "bridge": node.bridge,
                "isGateway": True,
                "isDefaultGateway": True,
                "ipMasq": False,
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "dataDir": str(node.directory / "cni" / "ipam"),
                    "ranges": [[{"subnet": str(node.pod_subnet), "gateway": str(node.gateway)}]],
                },
            },
            {"type": "portmap", "capabilities": {"portMappings": True}},
        ],
    }


def resolv_conf(plan: NodesPlan) -> str:
    """The nodes' own resolv.conf (the kubelet hands it to pods with ``dnsPolicy: Default``): the
    cluster's DNS, which answers for cluster.local and forwards nowhere else."""
    return f"nameserver {plan.dns_service_ip}\noptions ndots:1\n"


def kubelet_config(node: NodePlan, plan: NodesPlan, *, port: int, ca_file: Path) -> dict[str, Any]:
    """The node's KubeletConfiguration."""
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "address": str(node.address),
        "port": port,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": 0,
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": True},
            "x509": {"clientCAFile": str(ca_file)},
        },
        "authorization": {"mode": "Webhook"},
        "containerRuntimeEndpoint": f"unix://{node.sockets / 'containerd.sock'}",
        # This machine is cgroup v1 (hybrid): 1.35 refuses v1 unless told, and only warns then.
        "failCgroupV1": False,
        "cgroupDriver": "cgroupfs",
        "cgroupRoot": node.cgroup_root,
        "failSwapOn": False,
        "clusterDomain": "cluster.local",
        "clusterDNS": [str(plan.dns_service_ip)],
        "resolvConf": str(plan.directory / "resolv.conf"),
        "podLogsDir": str(pod_logs_directory(node)),
        "rotateCertificates": False,
        "serverTLSBootstrap": False,
        "volumePluginDir": str(node.directory / "volume-plugins"),
        "staticPodPath": "",
        "maxPods": 110,
        # The machine's disk is shared with everything else: evict only when it is really full, and never
        # collect the images built here (they are pinned as well).
        "evictionHard": {"memory.available": "100Mi", "nodefs.available": "1%", "imagefs.available": "1%"},
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "nodeStatusUpdateFrequency": "4s",
        "nodeStatusReportFrequency": "1m",
        "shutdownGracePeriod": "0s",
        "serializeImagePulls": False,
        "logging": {"format": "text", "verbosity": 1},
    }


def kube_proxy_config(
    plan: NodesPlan, *, kubeconfig: Path, metrics_port: int, healthz_port: int
) -> dict[str, Any]:
    """kube-proxy for the whole slot: one namespace, one set of iptables rules, whatever the node count."""
    return {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "mode": "iptables",
        "clientConnection": {"kubeconfig": str(kubeconfig)},
        "hostnameOverride": plan.nodes[0].name,
        "bindAddress": str(plan.namespace_address),
        "clusterCIDR": str(plan.pod_range),
        "healthzBindAddress": f"127.0.0.1:{healthz_port}",
        "metricsBindAddress": f"127.0.0.1:{metrics_port}",
        "nodePortAddresses": [str(plan.link)],
        "conntrack": {
            # The conntrack table is the machine's: leave its sysctls as they are.
            "maxPerCore": 0,
            "min": 0,
            "tcpEstablishedTimeout": "0s",
            "tcpCloseWaitTimeout": "0s",
        },
        "iptables": {"masqueradeAll": False, "syncPeriod": "30s", "minSyncPeriod": "0s"},
    }
