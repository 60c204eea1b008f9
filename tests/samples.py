"""The sample manifests in ``deploy/samples/`` (every operator's, unchanged from their specifications)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

SAMPLES = Path(__file__).resolve().parent.parent / "deploy" / "samples"


def load_sample(name: str) -> list[dict[str, Any]]:
    """The documents of ``deploy/samples/<name>.yaml``."""
    return [d for d in yaml.safe_load_all((SAMPLES / f"{name}.yaml").read_text()) if d]


def sample_spec(name: str, kind: str) -> dict[str, Any]:
    """The spec of the sample's one object of that kind."""
    (obj,) = [d for d in load_sample(name) if d["kind"] == kind]
    return dict(obj["spec"])
