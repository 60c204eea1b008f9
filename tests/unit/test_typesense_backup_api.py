"""The backup kinds' models: a CloudNativePG user's manifest shape is accepted with its defaults, and
the CEL rules the API server will run say what they promise (evaluated here with the same CEL)."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from operator_core.crdgen import crd_manifest
from operator_testkit import cel
from typesense_operator.api import TYPESENSE_CLUSTER
from typesense_operator.api.backups import (
    TYPESENSE_BACKUP,
    TYPESENSE_SCHEDULED_BACKUP,
    TypesenseBackupSpec,
    TypesenseScheduledBackupSpec,
)

BACKUP = """
cluster:
  name: search
destination:
  s3:
    bucket: typesense-backups
    prefix: prod
    endpoint: https://s3.example.com
    credentials:
      accessKeyId: {name: s3-user, key: ACCESS_KEY_ID}
      secretAccessKey: {name: s3-user, key: SECRET_ACCESS_KEY}
"""

SCHEDULE = """
cluster:
  name: search
schedule: "0 3 * * *"
destination:
  volume:
    claimName: backups
retention:
  keep: 7
  maxAge: 30d
"""


def schema(resource: Any) -> dict[str, Any]:
    found: dict[str, Any] = crd_manifest(resource)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return found


def at(root: dict[str, Any], *path: str) -> dict[str, Any]:
    node = root
    for name in path:
        node = node["properties"][name]
    return node


def test_a_backup_takes_its_defaults() -> None:
    wire = TypesenseBackupSpec.model_validate(yaml.safe_load(BACKUP)).to_wire()
    assert wire["deletionPolicy"] == "Delete"
    assert wire["destination"]["s3"]["region"] == "us-east-1"
    assert wire["destination"]["s3"]["credentials"]["secretAccessKey"] == {
        "name": "s3-user",
        "key": "SECRET_ACCESS_KEY",
    }


def test_a_schedule_takes_its_defaults() -> None:
    wire = TypesenseScheduledBackupSpec.model_validate(yaml.safe_load(SCHEDULE)).to_wire()
    assert wire["suspend"] is False
    assert wire["destination"]["volume"] == {"claimName": "backups", "subPath": ""}
    assert wire["retention"] == {"keep": 7, "maxAge": "30d"}


@pytest.mark.parametrize(
    ("destination", "allowed"),
    [({"s3": {}}, True), ({"volume": {}}, True), ({}, False), ({"s3": {}, "volume": {}}, False)],
)
def test_a_destination_is_exactly_one_of_s3_and_volume(destination: dict[str, Any], allowed: bool) -> None:
    (rule,) = cel.rules(at(schema(TYPESENSE_BACKUP), "spec", "destination"))
    assert cel.evaluate(rule, {"self": destination}) is allowed


@pytest.mark.parametrize(
    ("bucket", "allowed"),
    [("typesense-backups", True), ("b1", False), ("Backups", False), ("a.b-c", True), ("-ab", False)],
)
def test_bucket_names_follow_s3s_rules(bucket: str, allowed: bool) -> None:
    (rule,) = cel.rules(at(schema(TYPESENSE_BACKUP), "spec", "destination", "s3", "bucket"))
    assert cel.evaluate(rule, {"self": bucket}) is allowed


@pytest.mark.parametrize(
    ("endpoint", "allowed"),
    [
        ("https://s3.example.com", True),
        ("http://127.0.0.1:9000", True),
        ("https://s3.example.com/bucket", False),
        ("s3.example.com", False),
    ],
)
def test_an_endpoint_is_a_url_without_a_path(endpoint: str, allowed: bool) -> None:
    (rule,) = cel.rules(at(schema(TYPESENSE_BACKUP), "spec", "destination", "s3", "endpoint"))
    assert cel.evaluate(rule, {"self": endpoint}) is allowed


@pytest.mark.parametrize(("sub_path", "allowed"), [("typesense", True), ("/abs", False), ("a/../b", False)])
def test_a_volume_sub_path_stays_on_the_volume(sub_path: str, allowed: bool) -> None:
    (rule,) = cel.rules(at(schema(TYPESENSE_BACKUP), "spec", "destination", "volume", "subPath"))
    assert cel.evaluate(rule, {"self": sub_path}) is allowed


def test_a_backup_is_not_changed_once_asked_for() -> None:
    (rule,) = cel.rules(at(schema(TYPESENSE_BACKUP), "spec"))
    spec = yaml.safe_load(BACKUP)
    assert cel.evaluate(rule, {"self": spec, "oldSelf": spec}) is True
    changed = {**spec, "cluster": {"name": "other"}}
    assert cel.evaluate(rule, {"self": changed, "oldSelf": spec}) is False


@pytest.mark.parametrize(
    ("retention", "allowed"), [({"keep": 3}, True), ({"maxAge": "30d"}, True), ({}, False)]
)
def test_a_retention_keeps_a_number_an_age_or_both(retention: dict[str, Any], allowed: bool) -> None:
    (rule,) = cel.rules(at(schema(TYPESENSE_SCHEDULED_BACKUP), "spec", "retention"))
    assert cel.evaluate(rule, {"self": retention}) is allowed


@pytest.mark.parametrize(("age", "allowed"), [("30d", True), ("720h", True), ("1w", False), ("30", False)])
def test_a_max_age_is_a_number_of_days_hours_minutes_or_seconds(age: str, allowed: bool) -> None:
    (rule,) = cel.rules(at(schema(TYPESENSE_SCHEDULED_BACKUP), "spec", "retention", "maxAge"))
    assert cel.evaluate(rule, {"self": age}) is allowed


@pytest.mark.parametrize(
    ("schedule", "allowed"), [("0 3 * * *", True), ("@daily", True), ("@reboot", False), ("0 3 * *", False)]
)
def test_a_schedule_is_checked_as_the_scrapers_are(schedule: str, allowed: bool) -> None:
    (rule,) = cel.rules(at(schema(TYPESENSE_SCHEDULED_BACKUP), "spec", "schedule"))
    assert cel.evaluate(rule, {"self": schedule}) is allowed


FROM_BACKUP = {"fromBackup": {"backup": {"name": "nightly"}}}


@pytest.mark.parametrize(
    ("old", "new", "allowed"),
    [
        (None, None, True),
        (FROM_BACKUP, FROM_BACKUP, True),
        (None, FROM_BACKUP, False),  # a live cluster is never restored into
        (FROM_BACKUP, None, False),
        (FROM_BACKUP, {"fromBackup": {"backup": {"name": "weekly"}}}, False),
    ],
)
def test_a_clusters_bootstrap_is_set_at_creation_and_never_changed(
    old: dict[str, Any] | None, new: dict[str, Any] | None, allowed: bool
) -> None:
    spec = at(schema(TYPESENSE_CLUSTER), "spec")
    (rule,) = [r for r in cel.rules(spec) if "bootstrap" in r]

    def with_bootstrap(bootstrap: dict[str, Any] | None) -> dict[str, Any]:
        return {"image": "typesense/typesense:29.0", **({"bootstrap": bootstrap} if bootstrap else {})}

    assert cel.evaluate(rule, {"self": with_bootstrap(new), "oldSelf": with_bootstrap(old)}) is allowed


@pytest.mark.parametrize(
    ("from_backup", "allowed"),
    [
        ({"backup": {"name": "nightly"}}, True),
        ({"location": {"destination": {"volume": {"claimName": "b"}}, "path": "shop/search/nightly"}}, True),
        ({}, False),
        (
            {
                "backup": {"name": "nightly"},
                "location": {"destination": {"volume": {"claimName": "b"}}, "path": "x"},
            },
            False,
        ),
    ],
)
def test_a_restore_names_a_backup_or_its_location_not_both(
    from_backup: dict[str, Any], allowed: bool
) -> None:
    (rule,) = cel.rules(at(schema(TYPESENSE_CLUSTER), "spec", "bootstrap", "fromBackup"))
    assert cel.evaluate(rule, {"self": from_backup}) is allowed
