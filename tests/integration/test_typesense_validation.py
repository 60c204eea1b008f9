"""Every validation rule of TypesenseCluster is enforced by the API server, with a message that says a fix."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from operator_core.errors import Invalid
from operator_core.kube import Kube
from operator_testkit.fixtures import Kubectl
from samples import GO_OPERATOR_0_4_1_FIELDS

pytestmark = pytest.mark.usefixtures("installed_crds")

API = "ts.opentelekomcloud.com/v1alpha1"
SCRAPER = {
    "name": "docs",
    "image": "typesense/docsearch-scraper:0.11.0",
    "config": "{}",
    "schedule": "0 * * * *",
}

ROUTE = {"name": "public", "parentRef": {"name": "edge"}}


def cluster(namespace: str, name: str = "c1", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "TypesenseCluster",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"image": "typesense/typesense:27.1", **spec},
    }


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"replicas": 4}, "replicas must be 1, 3, 5 or 7: raft needs an odd size"),
        (
            {"apiPort": 70000},
            "spec.apiPort: Invalid value: 70000: spec.apiPort in body should be less than or equal to 65535",
        ),
        ({"peeringPort": 0}, "should be greater than or equal to 1"),
        ({"apiPort": 8107}, "apiPort and peeringPort must differ"),
        ({"corsDomains": "https://a.example"}, "corsDomains needs enableCors: true"),
        ({"tls": {}}, "tls takes exactly one of certificateSecret and issuerRef"),
        (
            {"tls": {"certificateSecret": {"name": "c"}, "issuerRef": {"name": "ca"}}},
            "tls takes exactly one of certificateSecret and issuerRef",
        ),
        (
            {"tls": {"certificateSecret": {"name": "c"}, "refreshIntervalSeconds": 1}},
            "greater than or equal to 5",
        ),
        ({"storage": {"size": "a lot"}}, "storage.size must be a Kubernetes quantity, such as 100Mi or 10Gi"),
        (
            {"scrapers": [{**SCRAPER, "schedule": "@reboot"}]},
            "schedule must be a cron expression of 5 fields",
        ),
        ({"scrapers": [{**SCRAPER, "schedule": "0 0 * * * *"}]}, "without seconds or a time zone"),
        ({"scrapers": [{**SCRAPER, "name": "Docs_Site"}]}, "scraper name must be a DNS label"),
        ({"scrapers": [SCRAPER, SCRAPER]}, "scraper names must be unique"),
        (
            {"scrapers": [{"name": "docs", "schedule": "@daily"}]},
            "a scraper needs config (its JSON configuration) or host (the site to scrape)",
        ),
        (
            {"scrapers": [{"name": "docs", "schedule": "@daily", "host": "https://docs.example.com"}]},
            "scraper host must be a host name",
        ),
        (
            {"service": {"externalTrafficPolicy": "Local"}},
            "service.externalTrafficPolicy needs service.type: LoadBalancer",
        ),
        ({"service": {"type": "NodePort"}}, 'supported values: "ClusterIP", "LoadBalancer"'),
        ({"storage": {"accessMode": "ReadOnlyMany"}}, 'supported values: "ReadWriteOnce", "ReadWriteMany"'),
        ({"healthProbeTimeoutInMilliseconds": 100}, "should be greater than or equal to 500"),
        (
            {"ingress": {"host": "a.example", "ingressClassName": "nginx", "path": "search"}},
            "ingress.path must start with '/'",
        ),
        ({"httpRoutes": [{**ROUTE, "path": "api"}]}, "httpRoutes[].path must start with /"),
        ({"httpRoutes": [ROUTE, ROUTE]}, "httpRoutes[].name must be unique"),
        ({"httpRoutes": [{**ROUTE, "hostnames": ["Search.Example.com"]}]}, "should match"),
        ({"httpRoutes": [{**ROUTE, "pathType": "Prefix"}]}, 'supported values: "Exact", "PathPrefix"'),
        ({"httpRoutes": [{"name": "public"}]}, "parentRef: Required value"),
        ({"metrics": {"release": "p", "interval": 5}}, "should be greater than or equal to 15"),
        ({"metrics": {"release": "p", "logLevel": 2}}, 'supported values: "-4", "0", "4", "8"'),
        (
            {"replicas": "three"},
            'spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer',
        ),
    ],
)
async def test_invalid_spec_is_refused_with_a_readable_message(
    kube: Kube, namespace: str, spec: dict[str, Any], message: str
) -> None:
    with pytest.raises(Invalid, match=re.escape(message)):
        await kube.create(cluster(namespace, **spec))


async def test_name_too_long_for_raft_is_refused_with_the_limit(kube: Kube, namespace: str) -> None:
    with pytest.raises(Invalid, match="choose a name of at most 19 characters"):
        await kube.create(cluster(namespace, name="a-very-long-cluster-name"))
    # Larger ports leave less room: with 5-digit ports, 19 characters no longer fit.
    with pytest.raises(Invalid, match="must fit in 64 characters"):
        await kube.create(cluster(namespace, name="a" * 19, apiPort=18108, peeringPort=18107))
    await kube.create(cluster(namespace, name="a" * 19))


async def test_storage_class_cannot_change_and_the_size_may_only_grow(kube: Kube, namespace: str) -> None:
    await kube.apply(cluster(namespace, storage={"storageClassName": "fast"}))
    with pytest.raises(Invalid, match=r"storage\.storageClassName is fixed once the volumes exist"):
        await kube.apply(cluster(namespace, storage={"storageClassName": "slow"}))
    await kube.apply(cluster(namespace, storage={"storageClassName": "fast", "size": "1Gi"}))
    await kube.apply(cluster(namespace, storage={"storageClassName": "fast", "size": "1024Mi"}))  # the same
    with pytest.raises(Invalid, match=r"storage\.size may grow, never shrink"):
        await kube.apply(cluster(namespace, storage={"storageClassName": "fast", "size": "500Mi"}))


async def test_storage_access_mode_and_claim_annotations_cannot_change(kube: Kube, namespace: str) -> None:
    storage = {"storageClassName": "fast", "accessMode": "ReadWriteMany", "annotations": {"a": "1"}}
    await kube.apply(cluster(namespace, storage=storage))
    for changed in ({"accessMode": "ReadWriteOnce"}, {"annotations": {"a": "2"}}, {"annotations": None}):
        with pytest.raises(Invalid, match=r"storage\.accessMode and storage\.annotations are fixed"):
            await kube.apply(cluster(namespace, storage={**storage, **changed}))
    await kube.apply(cluster(namespace, storage={**storage, "size": "1Gi"}))  # the size may still grow


async def test_the_go_operators_newer_fields_apply_strictly_and_read_back_unchanged(
    kube: Kube, namespace: str, kubectl: Kubectl, tmp_path: Path
) -> None:
    """With strict field validation, an unknown field is refused; none is, and nothing is dropped."""
    manifest = tmp_path / "cluster.json"
    manifest.write_text(json.dumps(cluster(namespace, **GO_OPERATOR_0_4_1_FIELDS)))
    kubectl("apply", "--server-side", "--validate=strict", "-f", str(manifest))
    stored = await kube.get(API, "TypesenseCluster", "c1", namespace)
    assert stored is not None
    assert {key: stored["spec"][key] for key in GO_OPERATOR_0_4_1_FIELDS} == GO_OPERATOR_0_4_1_FIELDS
    # And strictness is real here: a field that no version of the API has is refused.
    manifest.write_text(json.dumps(cluster(namespace, name="c2", noSuchField=True)))
    refused = kubectl("apply", "--server-side", "--validate=strict", "-f", str(manifest), check=False)
    assert refused.returncode != 0
    assert "noSuchField" in refused.stderr


def content(kind: str, namespace: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": kind,
        "metadata": {"name": "c1", "namespace": namespace},
        "spec": {"cluster": {"name": "search"}, **spec},
    }


TITLE = {"name": "title", "type": "string"}


@pytest.mark.parametrize(
    ("kind", "spec", "message"),
    [
        ("TypesenseCollection", {"fields": [{"name": "x", "type": "text"}]}, 'supported values: "string"'),
        ("TypesenseCollection", {"fields": []}, "should have at least 1 items"),
        (
            "TypesenseCollection",
            {"fields": [TITLE], "defaultSortingField": "title"},
            "defaultSortingField must name a field of the schema whose type is int32, int64 or float",
        ),
        (
            "TypesenseCollection",
            {"fields": [TITLE], "defaultSortingField": "year"},
            "defaultSortingField must name a field of the schema",
        ),
        (
            "TypesenseCollection",
            {"fields": [{"name": "address", "type": "object"}]},
            "fields of type object or object[] need enableNestedFields: true",
        ),
        ("TypesenseCollection", {"fields": [TITLE], "name": "a/b"}, "a name in Typesense cannot contain '/'"),
        (
            "TypesenseSynonym",
            {"collection": "books", "synonyms": ["alone"]},
            "a multi-way synonym needs at least two",
        ),
        (
            "TypesenseOverride",
            {"collection": "books", "rule": {"query": "q", "match": "exact"}},
            "an override needs includes, excludes, filterBy or sortBy",
        ),
        (
            "TypesenseOverride",
            {"collection": "books", "rule": {"query": "q", "match": "fuzzy"}, "filterBy": "x:=1"},
            'supported values: "exact", "contains"',
        ),
        (
            "TypesenseAlias",
            {"collection": "books", "deletionPolicy": "Orphan"},
            'supported values: "Retain", "Delete"',
        ),
        (
            "TypesenseApiKey",
            {"actions": ["documents:find"], "collections": ["*"], "secret": {"name": "k"}},
            "each action must be *, or a resource",
        ),
        (
            "TypesenseApiKey",
            {"actions": ["documents:search"], "collections": [], "secret": {"name": "k"}},
            "should have at least 1 items",
        ),
    ],
)
async def test_invalid_content_is_refused_with_a_readable_message(
    kube: Kube, namespace: str, kind: str, spec: dict[str, Any], message: str
) -> None:
    with pytest.raises(Invalid, match=re.escape(message)):
        await kube.apply(content(kind, namespace, **spec))


async def test_content_names_in_typesense_cannot_change(kube: Kube, namespace: str) -> None:
    await kube.apply(content("TypesenseCollection", namespace, fields=[TITLE], name="books"))
    with pytest.raises(Invalid, match=re.escape("spec.name is immutable once set")):
        await kube.apply(content("TypesenseCollection", namespace, fields=[TITLE], name="books_v2"))
    await kube.apply(content("TypesenseSynonym", namespace, collection="books", synonyms=["a", "b"]))
    with pytest.raises(Invalid, match=re.escape("spec.collection is immutable once set")):
        await kube.apply(content("TypesenseSynonym", namespace, collection="films", synonyms=["a", "b"]))
