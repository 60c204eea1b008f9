"""The update-idents Job: re-applies the identities of config.yaml to what Elasticsearch already holds."""

from __future__ import annotations

from monocle_operator.resources.model import (
    CONFIG_DIR,
    CONFIG_HASH_ANNOTATION,
    CONFIG_KEY,
    Instance,
    Manifest,
)
from monocle_operator.resources.monocle import (
    DEFAULT_RESOURCES,
    MONOCLE_UID,
    config_mount,
    config_volume,
    monocle_env,
)
from operator_core.podsecurity import restricted_container, restricted_pod

__all__ = ["UPDATE_IDENTS", "UPDATE_IDENTS_TTL_SECONDS", "build_update_idents_job"]

UPDATE_IDENTS = "update-idents"
# Finished Jobs and their pods are garbage-collected after an hour, as in the Go operator.
UPDATE_IDENTS_TTL_SECONDS = 3600


def build_update_idents_job(instance: Instance, config_hash: str) -> Manifest:
    """The Job for the config whose hash is ``config_hash``; the hash names it and is recorded on it."""
    env, _ = monocle_env(instance)
    container = {
        "name": UPDATE_IDENTS,
        "image": instance.spec.image,
        # $(VAR) is expanded by Kubernetes from the container's env: no shell needed.
        "command": [
            "monocle",
            "janitor",
            "update-idents",
            "--elastic",
            "$(MONOCLE_ELASTIC_URL)",
            "--config",
            f"{CONFIG_DIR}/{CONFIG_KEY}",
        ],
        "env": env,
        "volumeMounts": [config_mount()],
        "resources": instance.spec.resources.api or DEFAULT_RESOURCES,
        "securityContext": restricted_container(),
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": instance.metadata(
            instance.update_idents_job_name(config_hash),
            UPDATE_IDENTS,
            annotations={CONFIG_HASH_ANNOTATION: config_hash},
        ),
        "spec": {
            "ttlSecondsAfterFinished": UPDATE_IDENTS_TTL_SECONDS,
            # A failing run is retried once; the next config change starts a fresh Job anyway.
            "backoffLimit": 1,
            "template": {
                "metadata": {"labels": instance.labels(UPDATE_IDENTS)},
                "spec": {
                    "restartPolicy": "Never",
                    "securityContext": restricted_pod(MONOCLE_UID),
                    "containers": [container],
                    "volumes": [config_volume(instance)],
                },
            },
        },
    }
