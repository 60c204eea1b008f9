"""Builder for the PodMonitor that points Prometheus at each node's metrics exporter sidecar."""

from __future__ import annotations

from typesense_operator.resources.model import Cluster, Manifest

__all__ = ["PODMONITOR_API_VERSION", "POD_MONITOR_KIND", "build_pod_monitor"]

PODMONITOR_API_VERSION = "monitoring.coreos.com/v1"
POD_MONITOR_KIND = (PODMONITOR_API_VERSION, "PodMonitor")


def build_pod_monitor(cluster: Cluster) -> Manifest | None:
    metrics = cluster.spec.metrics
    if metrics is None:
        return None
    metadata = cluster.metadata(f"{cluster.name}-podmonitor", "metrics")
    metadata["labels"]["release"] = metrics.release
    return {
        "apiVersion": PODMONITOR_API_VERSION,
        "kind": "PodMonitor",
        "metadata": metadata,
        "spec": {
            "selector": {"matchLabels": cluster.selector("node")},
            "namespaceSelector": {"matchNames": [cluster.namespace]},
            "podMetricsEndpoints": [
                {"port": "metrics", "path": "/metrics", "interval": f"{metrics.interval}s"}
            ],
        },
    }
