"""Pure builders from a Monocle spec to the manifests of its children: no API calls, no framework.

A builder that returns None means "this object should not exist";
:func:`stale_children` tells the controller which existing children to delete
for that reason. The generated Secret and ConfigMap are created once and then
belong to the user's edits, and the update-idents Job is made only on a
config change, so none of those is in :func:`desired_children`.
"""

from __future__ import annotations

from collections.abc import Iterable

from monocle_operator.resources.config import (
    ConfigCheck,
    check_config,
    config_hash,
    secret_data_hash,
    task_target_problem,
)
from monocle_operator.resources.elastic import (
    ENGINES,
    build_elastic_service,
    build_elastic_statefulset,
    engine_image,
)
from monocle_operator.resources.jobs import (
    JANITOR,
    UPDATE_IDENTS,
    UPDATE_IDENTS_TTL_SECONDS,
    Task,
    build_task_job,
    build_update_idents_job,
    janitor_arguments,
)
from monocle_operator.resources.model import (
    CONFIG_HASH_ANNOTATION,
    CONFIG_KEY,
    CRAWLERS_API_KEY,
    ELASTIC_PORT,
    MANAGED_BY,
    SECRET_HASH_ANNOTATION,
    Instance,
    Manifest,
)
from monocle_operator.resources.monocle import (
    DEFAULT_CONFIG,
    build_api_deployment,
    build_api_service,
    build_config_map,
    build_crawler_deployment,
    build_generated_secret,
    build_ingress,
)
from monocle_operator.resources.storage import (
    Expansion,
    ExpansionPlan,
    build_claim_expansion,
    decide_expansion,
)
from operator_core import children

__all__ = [
    "CONFIG_HASH_ANNOTATION",
    "CONFIG_KEY",
    "CRAWLERS_API_KEY",
    "DEFAULT_CONFIG",
    "ELASTIC_PORT",
    "ENGINES",
    "JANITOR",
    "MANAGED_BY",
    "PRUNABLE_KINDS",
    "SECRET_HASH_ANNOTATION",
    "UPDATE_IDENTS",
    "UPDATE_IDENTS_TTL_SECONDS",
    "ConfigCheck",
    "Expansion",
    "ExpansionPlan",
    "Instance",
    "Manifest",
    "Task",
    "build_claim_expansion",
    "build_config_map",
    "build_generated_secret",
    "build_task_job",
    "build_update_idents_job",
    "check_config",
    "config_hash",
    "decide_expansion",
    "desired_children",
    "engine_image",
    "janitor_arguments",
    "secret_data_hash",
    "stale_children",
    "task_target_problem",
]

# The children that may stop being wanted: the Ingress (spec.ingress removed), and the old engine's
# StatefulSet once spec.elastic.engine changed (its volume stays: a StatefulSet's claims outlive it).
PRUNABLE_KINDS: tuple[tuple[str, str], ...] = (
    ("networking.k8s.io/v1", "Ingress"),
    ("apps/v1", "StatefulSet"),
)


def desired_children(
    instance: Instance, secret_hash: str, claim_size: str | None = None, monocle_image: str | None = None
) -> list[Manifest]:
    """Every child applied on each reconcile, in apply order (the database before its clients).

    ``secret_hash`` is :func:`secret_data_hash` of the Secrets the pods read;
    ``claim_size`` the size in the live StatefulSet's claim template, if it exists;
    ``monocle_image`` the image the API and the crawler run now, when the spec's waits for the engine.
    """
    ingress = build_ingress(instance)
    return [
        build_elastic_service(instance),
        build_elastic_statefulset(instance, claim_size),
        build_api_service(instance),
        build_api_deployment(instance, secret_hash, monocle_image),
        build_crawler_deployment(instance, secret_hash, monocle_image),
        *([ingress] if ingress is not None else []),
    ]


def stale_children(desired: Iterable[Manifest], live: Iterable[Manifest]) -> list[Manifest]:
    """Live children of a :data:`PRUNABLE_KINDS` kind that no desired manifest names."""
    return children.stale_children(desired, live, PRUNABLE_KINDS)
