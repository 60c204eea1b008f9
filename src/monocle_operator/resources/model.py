"""The view of one Monocle instance that every builder takes: identity, spec, and derived names.

Builders never see a raw dict; they see an :class:`Instance`, so a name or a
label is computed in exactly one place. Every name starts with the instance
name and every selector carries the instance label, so two instances in one
namespace never share an object or select each other's pods. Labels, selectors,
the owner reference and child metadata come from :class:`operator_core.children.Owner`.
"""

from __future__ import annotations

from monocle_operator.api import MONOCLE, MonocleSpec
from operator_core.children import Manifest, Owner

__all__ = [
    "API_PORT",
    "CONFIG_DIR",
    "CONFIG_KEY",
    "CRAWLERS_API_KEY",
    "ELASTIC_PORT",
    "MANAGED_BY",
    "Instance",
    "Manifest",
]

MANAGED_BY = "monocle-operator"
API_PORT = 8080
ELASTIC_PORT = 9200
# The crawler serves its /health on this port (Monocle's crawler default).
CRAWLER_HEALTH_PORT = 9001
CONFIG_DIR = "/etc/monocle"
CONFIG_KEY = "config.yaml"
CRAWLERS_API_KEY = "CRAWLERS_API_KEY"
ANNOTATION_PREFIX = "monocle.change-metrics.io"
SECRET_HASH_ANNOTATION = f"{ANNOTATION_PREFIX}/secret-hash"
CONFIG_HASH_ANNOTATION = f"{ANNOTATION_PREFIX}/config-hash"
ENGINE_ANNOTATION = f"{ANNOTATION_PREFIX}/engine"


class Instance(Owner[MonocleSpec]):
    """One Monocle resource: where it lives, its uid for owner references, and its validated spec."""

    resource = MONOCLE
    app = "monocle"
    managed_by = MANAGED_BY

    # -- names (the Go operator's, which were already prefixed with the instance name)

    @property
    def elastic_name(self) -> str:
        """The engine's Service, whichever engine runs behind it (so its URL never changes)."""
        return f"{self.name}-elastic"

    def engine_statefulset_name(self, engine: str | None = None) -> str:
        """The StatefulSet of ``engine`` (the spec's when None): Elasticsearch's keeps the Go
        operator's name, NAME-elastic; OpenSearch's is NAME-opensearch, with a volume of its own."""
        engine = engine or self.spec.elastic.engine
        return self.elastic_name if engine == "Elasticsearch" else f"{self.name}-{engine.lower()}"

    @property
    def api_name(self) -> str:
        """The API Deployment and Service, and the generated Secret and ConfigMap."""
        return f"{self.name}-api"

    @property
    def crawler_name(self) -> str:
        return f"{self.name}-crawler"

    @property
    def elastic_claim_name(self) -> str:
        """The PVC the StatefulSet controller makes from the claim template ``data``."""
        return f"data-{self.engine_statefulset_name()}-0"

    @property
    def config_map_name(self) -> str:
        """The ConfigMap holding config.yaml: the user's, or the generated one."""
        reference = self.spec.config_map_ref
        return reference.name if reference else self.api_name

    @property
    def elastic_url(self) -> str:
        return f"http://{self.elastic_name}:{ELASTIC_PORT}"

    @property
    def internal_api_url(self) -> str:
        return f"http://{self.api_name}:{API_PORT}"

    def update_idents_job_name(self, config_hash: str) -> str:
        """One name per instance and config, so instances never collide and a rerun never races a delete."""
        return f"{self.name}-update-idents-{config_hash[:10]}"
