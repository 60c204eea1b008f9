"""A backup's Job, built from the backup, its cluster and the node chosen: where it runs, what it mounts,
where the backup goes, and that credentials reach it only as references to their Secrets."""

from __future__ import annotations

from typing import Any

import pytest

from typesense_operator.resources.backup import (
    Backup,
    backup_job,
    backup_location,
    location_in,
    remove_job,
    restore_claim,
    restore_job,
    snapshot_dir,
)
from typesense_operator.resources.model import Cluster

CLUSTER_OBJECT: dict[str, Any] = {
    "apiVersion": "ts.opentelekomcloud.com/v1alpha1",
    "kind": "TypesenseCluster",
    "metadata": {"name": "search", "namespace": "shop", "uid": "c-uid"},
    "spec": {"image": "typesense/typesense:29.0", "imagePullSecrets": [{"name": "registry"}]},
}
CLUSTER = Cluster.from_object(CLUSTER_OBJECT)
S3 = {
    "bucket": "typesense-backups",
    "prefix": "/prod/",
    "endpoint": "https://s3.example.com/",
    "credentials": {
        "accessKeyId": {"name": "s3-user", "key": "ACCESS_KEY_ID"},
        "secretAccessKey": {"name": "s3-user", "key": "SECRET_ACCESS_KEY"},
    },
    "ca": {"name": "s3-ca", "key": "ca.pem"},
}
FACTS = {
    "typesense-version": "29.0",
    "collections": "2",
    "documents": "1000",
    "taken-at": "2026-11-25T23:00:00Z",
}


def backup(destination: dict[str, Any], name: str = "nightly") -> Backup:
    return Backup.from_object(
        {
            "apiVersion": "ts.opentelekomcloud.com/v1alpha1",
            "kind": "TypesenseBackup",
            "metadata": {"name": name, "namespace": "shop", "uid": "b-uid"},
            "spec": {"cluster": {"name": "search"}, "destination": destination},
        }
    )


def job(destination: dict[str, Any], name: str = "nightly") -> dict[str, Any]:
    return backup_job(
        backup(destination, name),
        CLUSTER,
        pod="search-sts-1",
        node_name="node-b",
        image="suite:1",
        facts=FACTS,
    )


def test_an_s3_backup_runs_on_the_nodes_node_with_its_claim_and_the_credentials_as_references() -> None:
    made = job({"s3": S3})
    assert made["metadata"]["name"] == "nightly-backup"
    assert made["metadata"]["ownerReferences"][0]["kind"] == "TypesenseBackup"
    assert made["spec"]["backoffLimit"] == 0, "the upload makes its own attempts"
    pod = made["spec"]["template"]["spec"]
    # Affinity, not nodeName: the scheduler must see the pod, or a WaitForFirstConsumer claim is never bound.
    assert "nodeName" not in pod
    terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert terms == [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-b"]}]}]
    assert pod["restartPolicy"] == "Never"
    assert pod["imagePullSecrets"] == [{"name": "registry"}]
    assert pod["securityContext"]["runAsUser"] == 10000, "the nodes' user: the snapshot is theirs"
    assert {"name": "data", "persistentVolumeClaim": {"claimName": "data-search-sts-1"}} in pod["volumes"]
    (container,) = pod["containers"]
    assert container["command"] == ["typesense-backup"]
    assert container["args"] == [
        "upload",
        "--snapshot", "/usr/share/typesense/data/snapshots/b-uid",
        "--to", "s3://typesense-backups/prod/shop/search/nightly",
        "--node", "search-sts-1",
        "--typesense-version", "29.0", "--collections", "2", "--documents", "1000",
        "--taken-at", "2026-11-25T23:00:00Z",
    ]  # fmt: skip
    env = {e["name"]: e for e in container["env"]}
    assert env["AWS_ENDPOINT_URL_S3"]["value"] == "https://s3.example.com"
    assert env["AWS_REGION"]["value"] == "us-east-1"
    assert env["AWS_SECRET_ACCESS_KEY"]["valueFrom"] == {
        "secretKeyRef": {"name": "s3-user", "key": "SECRET_ACCESS_KEY"}
    }
    assert env["AWS_CA_BUNDLE"]["value"] == "/etc/typesense-backup/ca/ca.crt"
    assert {"name": "data", "mountPath": "/usr/share/typesense/data"} in container["volumeMounts"]
    assert container["terminationMessagePolicy"] == "FallbackToLogsOnError"
    assert container["securityContext"]["allowPrivilegeEscalation"] is False


def test_a_volume_backup_mounts_its_claim_and_goes_under_its_sub_path() -> None:
    made = job({"volume": {"claimName": "backups", "subPath": "typesense/"}})
    pod = made["spec"]["template"]["spec"]
    assert {"name": "backups", "persistentVolumeClaim": {"claimName": "backups"}} in pod["volumes"]
    (container,) = pod["containers"]
    assert container["env"] == []
    assert container["args"][4] == "/backups/typesense/shop/search/nightly"


@pytest.mark.parametrize(
    ("destination", "location"),
    [
        ({"s3": {**S3, "prefix": ""}}, "s3://typesense-backups/shop/search/nightly"),
        ({"volume": {"claimName": "backups"}}, "/backups/shop/search/nightly"),
    ],
)
def test_locations_without_a_prefix(destination: dict[str, Any], location: str) -> None:
    assert backup_location(backup(destination)) == location


def test_a_long_name_is_cut_to_a_label_value_with_a_hash() -> None:
    name = "a-very-long-backup-name-" + "x" * 50
    made = job({"s3": S3}, name=name)["metadata"]["name"]
    assert len(made) <= 63
    assert made != job({"s3": S3}, name=name + "y")["metadata"]["name"]


def test_the_key_reaches_the_job_only_by_reference_and_the_snapshot_folder_is_the_backups_own() -> None:
    (container,) = job({"s3": S3})["spec"]["template"]["spec"]["containers"]
    for entry in container["env"]:
        if entry["name"] in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
            assert "value" not in entry
            assert set(entry["valueFrom"]) == {"secretKeyRef"}
    assert snapshot_dir(backup({"s3": S3})) == "/usr/share/typesense/data/snapshots/b-uid"


def test_the_removal_runs_anywhere_with_the_destination_only() -> None:
    made = remove_job(backup({"s3": S3}), CLUSTER, image="suite:1")
    assert made["metadata"]["name"] == "nightly-remove"
    pod = made["spec"]["template"]["spec"]
    assert "nodeName" not in pod
    assert [v["name"] for v in pod["volumes"]] == ["ca"]
    (container,) = pod["containers"]
    assert container["args"] == ["remove", "--location", "s3://typesense-backups/prod/shop/search/nightly"]


def test_a_restore_fills_the_first_nodes_claim_before_its_statefulset_exists() -> None:
    placed = Cluster.from_object(
        {
            **CLUSTER_OBJECT,
            "spec": {
                **CLUSTER_OBJECT["spec"],
                "nodeSelector": {"disk": "ssd"},
                "storage": {"size": "5Gi", "storageClassName": "fast"},
            },
        }
    )
    claim = restore_claim(placed)
    assert claim["metadata"]["name"] == "data-search-sts-0"
    assert "ownerReferences" not in claim["metadata"], (
        "deleting the cluster keeps its data, as the StatefulSet's"
    )
    assert claim["metadata"]["labels"] == placed.labels("node")
    assert claim["spec"]["resources"]["requests"]["storage"] == "5Gi"
    assert claim["spec"]["storageClassName"] == "fast"

    source = backup({"s3": S3})
    made = restore_job(placed, source.spec.destination, backup_location(source), image="suite:1")
    assert made["metadata"]["name"] == "search-restore"
    assert made["metadata"]["ownerReferences"][0]["kind"] == "TypesenseCluster"
    assert made["metadata"]["labels"]["app.kubernetes.io/instance"] == "search"
    pod = made["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"disk": "ssd"}, "placed as the nodes are, so its volume suits them"
    (container,) = pod["containers"]
    assert container["args"] == [
        "restore",
        "--from",
        "s3://typesense-backups/prod/shop/search/nightly",
        "--data-dir",
        "/usr/share/typesense/data",
    ]
    assert {"name": "data", "persistentVolumeClaim": {"claimName": "data-search-sts-0"}} in pod["volumes"]
    secrets = [e for e in container["env"] if "valueFrom" in e]
    assert {e["name"] for e in secrets} == {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"}


def test_a_backup_found_by_its_location_is_read_where_its_typesensebackup_put_it() -> None:
    made = backup({"volume": {"claimName": "backups", "subPath": "typesense"}})
    assert location_in(made.spec.destination, ["shop", "search", "nightly"]) == backup_location(made)
    assert location_in(backup({"s3": S3}).spec.destination, ["a", "b"]) == "s3://typesense-backups/prod/a/b"
