"""The Jobs that move backups, from the backup, its cluster and the node chosen: pure spec → manifest.

The backup Job runs ``typesense-backup upload`` from this suite's image on the node whose snapshot it
moves, with that node's claim mounted where Typesense has it (so the snapshot's path is the same in
both), as the nodes' own user (the snapshot's files are theirs, and the Job removes them once they are
up). The restore Job runs ``typesense-backup restore`` into a new cluster's first claim, before its
StatefulSet exists. The storage credentials reach them only as environment variables from their Secrets.
"""

from __future__ import annotations

import hashlib
from typing import Any

from operator_core.children import Manifest, Owner
from operator_core.podsecurity import restricted_container
from typesense_operator.api.backups import TYPESENSE_BACKUP, BackupDestination, TypesenseBackupSpec
from typesense_operator.resources.core import (
    RESTRICTED_POD_SECURITY_CONTEXT,
    claim_template,
    node_claim_name,
    node_placement,
    security_context,
)
from typesense_operator.resources.model import DATA_DIR, MANAGED_BY, Cluster

__all__ = [
    "BACKUP_VOLUME_DIR",
    "Backup",
    "backup_job",
    "backup_job_name",
    "backup_location",
    "location_in",
    "remove_job",
    "remove_job_name",
    "restore_claim",
    "restore_job",
    "restore_job_name",
    "snapshot_dir",
]

BACKUP_VOLUME_DIR = "/backups"
"""Where a volume destination is mounted in the backup Job."""
CA_DIR = "/etc/typesense-backup/ca"
COMPONENT = "backup"
RESTORE_COMPONENT = "restore"
BACKOFF_LIMIT = 2
"""Restore and removal attempts after the first: bounded; each can start over from nothing. An upload's
Job makes one (``typesense-backup upload`` makes its own attempts, so that only the last one removes the
snapshot from the node)."""
_NAME_LIMIT = 63


class Backup(Owner[TypesenseBackupSpec]):
    """One TypesenseBackup: its identity, for the Job's name, labels and owner reference."""

    resource = TYPESENSE_BACKUP
    # Not "typesense": a backup named as a cluster must never look like one of its children.
    app = "typesense-backup"
    managed_by = MANAGED_BY


def _bounded(name: str) -> str:
    """``name`` if it fits a label value, else its start and a hash of the whole (stable, unique)."""
    if len(name) <= _NAME_LIMIT:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    return f"{name[: _NAME_LIMIT - 9].rstrip('-.')}-{digest}"


def backup_location(backup: Backup) -> str:
    """Where the backup goes: ``s3://<bucket>/<prefix>/<namespace>/<cluster>/<backup>``, or that
    path under the volume's subPath as the Job sees it."""
    return location_in(backup.spec.destination, [backup.namespace, backup.spec.cluster.name, backup.name])


def location_in(destination: BackupDestination, parts: list[str]) -> str:
    """The folder ``parts`` under the destination's prefix (or subPath), as a Job names it."""
    if destination.s3 is not None:
        prefix = destination.s3.prefix.strip("/")
        return "s3://" + "/".join([destination.s3.bucket, *([prefix] if prefix else []), *parts])
    assert destination.volume is not None  # the API server holds it to exactly one
    sub_path = destination.volume.sub_path.strip("/")
    return "/".join([BACKUP_VOLUME_DIR, *([sub_path] if sub_path else []), *parts])


def snapshot_dir(backup: Backup) -> str:
    """Where the node writes the snapshot: a folder of its own data volume, named by the backup's uid
    (a backup made again under the same name never meets the old one's leftovers)."""
    return f"{DATA_DIR}/snapshots/{backup.uid}"


Entries = list[dict[str, Any]]


def _s3_environment(destination: BackupDestination) -> tuple[Entries, Entries, Entries]:
    """(env, volumes, mounts) that reach S3: the endpoint and region as values, the key from its
    Secrets, the CA (when one is named) as a file."""
    s3 = destination.s3
    assert s3 is not None
    env: list[dict[str, Any]] = [{"name": "AWS_REGION", "value": s3.region}]
    if s3.endpoint:
        env.append({"name": "AWS_ENDPOINT_URL_S3", "value": s3.endpoint.rstrip("/")})
    for variable, reference in (
        ("AWS_ACCESS_KEY_ID", s3.credentials.access_key_id),
        ("AWS_SECRET_ACCESS_KEY", s3.credentials.secret_access_key),
    ):
        env.append(
            {"name": variable, "valueFrom": {"secretKeyRef": {"name": reference.name, "key": reference.key}}}
        )
    if s3.ca is None:
        return env, [], []
    env.append({"name": "AWS_CA_BUNDLE", "value": f"{CA_DIR}/ca.crt"})
    items = [{"key": s3.ca.key, "path": "ca.crt"}]
    volume = {"name": "ca", "secret": {"secretName": s3.ca.name, "items": items}}
    return env, [volume], [{"name": "ca", "mountPath": CA_DIR, "readOnly": True}]


def _destination(destination: BackupDestination) -> tuple[Entries, Entries, Entries]:
    """(env, volumes, mounts) that reach a backup's destination."""
    if destination.s3 is not None:
        return _s3_environment(destination)
    assert destination.volume is not None
    target = {"claimName": destination.volume.claim_name}
    return (
        [],
        [{"name": "backups", "persistentVolumeClaim": target}],
        [{"name": "backups", "mountPath": BACKUP_VOLUME_DIR}],
    )


def _on_node(node_name: str) -> dict[str, Any]:
    """Scheduling onto exactly ``node_name`` (by the Node's name, as a DaemonSet's pods are placed)."""
    term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node_name]}]}
    return {
        "affinity": {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}
        }
    }


def _job(
    metadata: dict[str, Any],
    destination: BackupDestination,
    cluster: Cluster | None,
    arguments: list[str],
    image: str,
    *,
    placement: dict[str, Any],
    volumes: Entries,
    mounts: Entries,
    backoff_limit: int = BACKOFF_LIMIT,
) -> Manifest:
    env, more_volumes, more_mounts = _destination(destination)
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never",
        **placement,
        # The nodes' own pod context: the snapshot's files are their user's.
        "securityContext": (security_context(cluster, "pod") if cluster else None)
        or RESTRICTED_POD_SECURITY_CONTEXT,
        "volumes": [*volumes, *more_volumes],
        "containers": [
            {
                "name": "backup",
                "image": image,
                "command": ["typesense-backup"],
                "args": arguments,
                "env": env,
                "volumeMounts": [*mounts, *more_mounts],
                "securityContext": restricted_container(),
                # Its one-line result (or its reason) is what the operator reads back.
                "terminationMessagePolicy": "FallbackToLogsOnError",
                "resources": {
                    "requests": {"cpu": "100m", "memory": "128Mi"},
                    "limits": {"cpu": "1", "memory": "512Mi"},
                },
            }
        ],
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": metadata,
        "spec": {
            "backoffLimit": backoff_limit,
            "template": {
                "metadata": {"labels": metadata["labels"]},
                "spec": cluster.pulling(pod_spec) if cluster else pod_spec,
            },
        },
    }


def backup_job_name(backup: Backup) -> str:
    return _bounded(f"{backup.name}-backup")


def remove_job_name(backup: Backup) -> str:
    return _bounded(f"{backup.name}-remove")


def backup_job(
    backup: Backup,
    cluster: Cluster,
    *,
    pod: str,
    node_name: str | None,
    image: str,
    facts: dict[str, str],
) -> Manifest:
    """The Job that moves the snapshot of ``pod`` (on ``node_name``) to the backup's destination.
    ``facts``: the manifest's node facts (``typesense-version``, ``collections``, ``documents``,
    ``taken-at``), passed as arguments."""
    claim = node_claim_name(cluster, int(pod.rsplit("-", 1)[-1]))
    arguments = ["upload", "--snapshot", snapshot_dir(backup), "--to", backup_location(backup), "--node", pod]
    for flag in ("typesense-version", "collections", "documents", "taken-at"):
        arguments += [f"--{flag}", facts[flag]]
    return _job(
        backup.metadata(backup_job_name(backup), COMPONENT),
        backup.spec.destination,
        cluster,
        arguments,
        image,
        # The snapshot is on this node's volume: the Job runs where it is. Required affinity to the node,
        # not nodeName: a pod given its node skips the scheduler, which binds a WaitForFirstConsumer
        # claim (a volume destination not used yet), and would wait for that claim forever.
        placement=_on_node(node_name) if node_name else {},
        volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": claim}}],
        mounts=[{"name": "data", "mountPath": DATA_DIR}],
        backoff_limit=0,
    )


def remove_job(backup: Backup, cluster: Cluster | None, *, image: str) -> Manifest:
    """The Job that removes the backup's data from its destination (``typesense-backup remove``): in
    the cluster's pod context and with its pull secrets while it exists, in the restricted one after."""
    arguments = ["remove", "--location", backup_location(backup)]
    return _job(
        backup.metadata(remove_job_name(backup), COMPONENT),
        backup.spec.destination,
        cluster,
        arguments,
        image,
        placement={},
        volumes=[],
        mounts=[],
    )


def restore_job_name(cluster: Cluster) -> str:
    return _bounded(f"{cluster.name}-restore")


def restore_claim(cluster: Cluster) -> Manifest:
    """The first node's claim, made before the StatefulSet (which takes a claim of its name as its own)
    so that the backup is in it before Typesense starts. No owner, as the StatefulSet's own claims:
    deleting the cluster keeps the data."""
    template = claim_template(cluster)
    metadata = {**template["metadata"], "name": node_claim_name(cluster, 0), "namespace": cluster.namespace}
    claim = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": metadata}
    return {**claim, "spec": template["spec"]}


def restore_job(cluster: Cluster, destination: BackupDestination, location: str, *, image: str) -> Manifest:
    """The Job that fills the first node's claim with the backup at ``location`` of ``destination``
    (``typesense-backup restore``, every file checked), placed as the nodes are, so that a volume bound
    where the Job ran suits them."""
    claim = {"claimName": node_claim_name(cluster, 0)}
    return _job(
        cluster.metadata(restore_job_name(cluster), RESTORE_COMPONENT),
        destination,
        cluster,
        ["restore", "--from", location, "--data-dir", DATA_DIR],
        image,
        placement=node_placement(cluster),
        volumes=[{"name": "data", "persistentVolumeClaim": claim}],
        mounts=[{"name": "data", "mountPath": DATA_DIR}],
    )
