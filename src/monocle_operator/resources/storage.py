"""Whether, and to what, the Elasticsearch volume should grow, in Monocle's words; the decision and
the claim patch themselves are every operator's (:mod:`operator_core.storage`)."""

from __future__ import annotations

from monocle_operator.resources.model import Instance
from operator_core.children import Manifest
from operator_core.storage import Expansion, ExpansionPlan, claim_expansion
from operator_core.storage import decide_expansion as _decide

__all__ = ["Expansion", "ExpansionPlan", "build_claim_expansion", "decide_expansion"]


def decide_expansion(
    wanted: str, claimed: str | None, storage_class: str | None, allows: bool
) -> ExpansionPlan:
    """What to do with the data claim, from the spec size, the claim's request and its class."""
    return _decide(
        wanted, claimed, storage_class, allows, field="elastic.storageSize", volume="Elasticsearch volume"
    )


def build_claim_expansion(instance: Instance, size: str) -> Manifest:
    """The server-side apply that asks the Elasticsearch data claim for ``size``, and nothing else."""
    return claim_expansion(instance.elastic_claim_name, instance.namespace, size)
