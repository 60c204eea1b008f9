"""Monocle's janitor as Jobs: the update-idents Job a config change starts, and the Job of a MonocleTask.
Both run the instance's image with its config, its Secrets and its engine's URL."""

from __future__ import annotations

from typing import Any

from monocle_operator.api import MONOCLE_TASK, MonocleTaskSpec
from monocle_operator.resources.model import (
    CONFIG_DIR,
    CONFIG_HASH_ANNOTATION,
    CONFIG_KEY,
    MANAGED_BY,
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
from operator_core.children import Owner
from operator_core.podsecurity import restricted_container, restricted_pod

__all__ = [
    "JANITOR",
    "UPDATE_IDENTS",
    "UPDATE_IDENTS_TTL_SECONDS",
    "Task",
    "build_task_job",
    "build_update_idents_job",
    "janitor_arguments",
]

UPDATE_IDENTS = "update-idents"
JANITOR = "janitor"
"""The component label of a MonocleTask's Job and pod."""
# Finished Jobs and their pods are garbage-collected after an hour, as in the Go operator.
UPDATE_IDENTS_TTL_SECONDS = 3600
_SUBCOMMANDS = {
    "UpdateIdents": "update-idents",
    "WipeCrawlerData": "wipe-crawler-data",
    "SetCrawlerCommitDate": "set-crawler-commit-date",
}


class Task(Owner[MonocleTaskSpec]):
    """One MonocleTask, as the builders see it: its Job is named after it and owned by it."""

    resource = MONOCLE_TASK
    app = "monocle"
    managed_by = MANAGED_BY


def janitor_arguments(spec: MonocleTaskSpec) -> list[str]:
    """``monocle janitor ...`` for the task, with the flags Monocle's CLI takes (src/CLI.hs)."""
    arguments = [
        "monocle", JANITOR, _SUBCOMMANDS[spec.command],
        # $(VAR) is expanded by Kubernetes from the container's env: no shell needed.
        "--elastic", "$(MONOCLE_ELASTIC_URL)", "--config", f"{CONFIG_DIR}/{CONFIG_KEY}",
    ]  # fmt: skip
    if spec.workspace is not None:
        arguments += ["--workspace", spec.workspace]
    if spec.crawler is not None:
        arguments += ["--crawler-name", spec.crawler]
    if spec.commit_date is not None:
        arguments += ["--commit-date", spec.commit_date]
    return arguments


def _janitor_job(
    instance: Instance, metadata: dict[str, Any], labels: dict[str, str], name: str, command: list[str]
) -> dict[str, Any]:
    container = {
        "name": name,
        "image": instance.spec.image,
        "command": command,
        "env": monocle_env(instance)[0],
        "volumeMounts": [config_mount()],
        "resources": instance.spec.resources.api or DEFAULT_RESOURCES,
        "securityContext": restricted_container(),
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": metadata,
        "spec": {
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "restartPolicy": "Never",
                    "securityContext": restricted_pod(MONOCLE_UID),
                    "containers": [container],
                    "volumes": [config_volume(instance)],
                },
            },
        },
    }


def build_update_idents_job(instance: Instance, config_hash: str) -> Manifest:
    """The Job for the config whose hash is ``config_hash``; the hash names it and is recorded on it."""
    metadata = instance.metadata(
        instance.update_idents_job_name(config_hash),
        UPDATE_IDENTS,
        annotations={CONFIG_HASH_ANNOTATION: config_hash},
    )
    command = ["monocle", JANITOR, UPDATE_IDENTS, "--elastic", "$(MONOCLE_ELASTIC_URL)",
               "--config", f"{CONFIG_DIR}/{CONFIG_KEY}"]  # fmt: skip
    job = _janitor_job(instance, metadata, instance.labels(UPDATE_IDENTS), UPDATE_IDENTS, command)
    job["spec"]["ttlSecondsAfterFinished"] = UPDATE_IDENTS_TTL_SECONDS
    # A failing run is retried once; the next config change starts a fresh Job anyway.
    job["spec"]["backoffLimit"] = 1
    return job


def build_task_job(task: Task, instance: Instance) -> Manifest:
    """The one Job of a MonocleTask: named after the task and owned by it (deleted with it, and kept as
    long as it, for its log), never retried (a command that failed is not run again on its own)."""
    job = _janitor_job(
        instance,
        task.metadata(task.name, JANITOR),
        task.labels(JANITOR),
        JANITOR,
        janitor_arguments(task.spec),
    )
    job["spec"]["backoffLimit"] = 0
    # The pod's last lines of log become its termination message when it fails: the status says them.
    job["spec"]["template"]["spec"]["containers"][0]["terminationMessagePolicy"] = "FallbackToLogsOnError"
    return job
