"""The TypesenseCluster model accepts the Go operator's manifests and its CEL rules say what they promise."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from operator_core.crdgen import crd_manifest
from operator_testkit import cel
from typesense_operator.api import TYPESENSE_CLUSTER, TypesenseClusterSpec

GO_OPERATOR_SAMPLE = """
image: typesense/typesense:27.1
replicas: 3
storage:
  size: 100Mi
  storageClassName: csi-disk
ingress:
  host: ts.example.de
  ingressClassName: nginx
  clusterIssuer: opentelekomcloud-letsencrypt
adminApiKey:
  name: typesense-common-bootstrap-key
scrapers:
  - name: docusaurus-example-com
    image: typesense/docsearch-scraper:0.11.0
    config: "{}"
    schedule: '*/2 * * * *'
"""


def test_go_operator_sample_is_accepted_with_defaults() -> None:
    spec = TypesenseClusterSpec.model_validate(yaml.safe_load(GO_OPERATOR_SAMPLE))
    wire = spec.to_wire()
    assert wire["apiPort"] == 8108
    assert wire["peeringPort"] == 8107
    assert wire["storage"] == {"size": "100Mi", "storageClassName": "csi-disk", "accessMode": "ReadWriteOnce"}
    assert wire["resetPeersOnError"] is True


@pytest.fixture(scope="module")
def root_schema() -> dict[str, Any]:
    return crd_manifest(TYPESENSE_CLUSTER)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]


@pytest.mark.parametrize(
    ("replicas", "allowed"), [(1, True), (2, False), (3, True), (5, True), (7, True), (9, False)]
)
def test_replicas_rule(root_schema: dict[str, Any], replicas: int, allowed: bool) -> None:
    (rule,) = cel.rules(root_schema["properties"]["spec"]["properties"]["replicas"])
    assert cel.evaluate(rule, {"self": replicas}) is allowed


@pytest.mark.parametrize(("name", "allowed"), [("a" * 19, True), ("a" * 20, False)])
def test_raft_endpoint_length_rule(root_schema: dict[str, Any], name: str, allowed: bool) -> None:
    (rule,) = cel.rules(root_schema)
    obj = {"metadata": {"name": name}, "spec": {"apiPort": 8108, "peeringPort": 8107}}
    endpoint = f"{name}-sts-0.{name}-sts-svc:8107:8108"
    assert (len(endpoint) <= 64) is allowed
    assert cel.evaluate(rule, {"self": obj}) is allowed


def test_spec_level_rules(root_schema: dict[str, Any]) -> None:
    rules = cel.rules(root_schema["properties"]["spec"])
    same_ports = {"apiPort": 8108, "peeringPort": 8108, "enableCors": False}
    cors_without_enable = {"apiPort": 8108, "peeringPort": 8107, "enableCors": False, "corsDomains": "a.b"}
    assert not cel.evaluate(rules[0], {"self": same_ports})
    assert not cel.evaluate(rules[1], {"self": cors_without_enable})
    assert cel.evaluate(rules[1], {"self": {**cors_without_enable, "enableCors": True}})


def _scraper_rules(root_schema: dict[str, Any], field: str) -> list[str]:
    scraper = root_schema["properties"]["spec"]["properties"]["scrapers"]["items"]
    return cel.rules(scraper["properties"][field])


@pytest.mark.parametrize(
    ("schedule", "allowed"),
    [
        ("*/2 * * * *", True),
        ("0 3 * * MON-FRI", True),
        ("* * * *", False),
        ("0 0 * * * *", False),
        ("@daily", True),
        ("@midnight", True),
        ("@reboot", False),
        ("@every 5m", False),
    ],
)
def test_scraper_schedule_rule(root_schema: dict[str, Any], schedule: str, allowed: bool) -> None:
    (rule,) = _scraper_rules(root_schema, "schedule")
    assert cel.evaluate(rule, {"self": schedule}) is allowed


@pytest.mark.parametrize(
    ("name", "allowed"), [("docs-1", True), ("Docs", False), ("-docs", False), ("a_b", False)]
)
def test_scraper_name_rule(root_schema: dict[str, Any], name: str, allowed: bool) -> None:
    (rule,) = _scraper_rules(root_schema, "name")
    assert cel.evaluate(rule, {"self": name}) is allowed


def test_scraper_names_unique_rule(root_schema: dict[str, Any]) -> None:
    (rule,) = cel.rules(root_schema["properties"]["spec"]["properties"]["scrapers"])
    assert cel.evaluate(rule, {"self": [{"name": "a"}, {"name": "b"}]})
    assert not cel.evaluate(rule, {"self": [{"name": "a"}, {"name": "a"}]})
