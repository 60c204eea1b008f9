"""The sample manifests in ``deploy/samples/``: the specification's own samples, unchanged."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

SAMPLES = Path(__file__).resolve().parent.parent / "deploy" / "samples"


def load_sample(name: str) -> list[dict[str, Any]]:
    """The documents of ``deploy/samples/<name>.yaml``."""
    return [d for d in yaml.safe_load_all((SAMPLES / f"{name}.yaml").read_text()) if d]


def sample_cluster_spec(name: str) -> dict[str, Any]:
    """The spec of the sample's TypesenseCluster."""
    (cluster,) = [d for d in load_sample(name) if d["kind"] == "TypesenseCluster"]
    return dict(cluster["spec"])
