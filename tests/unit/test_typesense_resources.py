"""Builders from a TypesenseCluster spec to its children, checked field by field and against golden files.

Regenerate the golden files after an intended change with
``UPDATE_GOLDEN=1 pytest tests/unit/test_typesense_resources.py`` and review the diff.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from operator_testkit.tables import assert_golden, by_kind_and_name
from samples import GO_OPERATOR_0_4_1_FIELDS, sample_spec
from typesense_operator.controller.cluster.children import pods_to_hurry
from typesense_operator.controller.cluster.nodes import pod_addresses
from typesense_operator.controller.cluster.reconcile import needs_finalizer
from typesense_operator.resources import (
    Cluster,
    build_generated_key_secret,
    build_http_routes,
    build_pod_monitor,
    build_reference_grants,
    desired_children,
    invalid_scraper_configs,
    nginx_config,
    nodes_list,
    server_configuration_hash,
    stale_children,
)
from typesense_operator.resources.core import WAIT_FOR_ADDRESSES_CONTAINER

GOLDEN = Path(__file__).parent / "golden" / "typesense"


SAMPLES: dict[str, dict[str, Any]] = {
    "seed-opentelekomcloud": sample_spec("ts_v1alpha1_typesensecluster_opentelekomcloud", "TypesenseCluster"),
    "seed-aws": sample_spec("ts_v1alpha1_typesensecluster_aws", "TypesenseCluster"),
    # Everything else the spec can say.
    "full": {
        "image": "typesense/typesense:28.0",
        "replicas": 5,
        "apiPort": 9108,
        "peeringPort": 9107,
        "enableCors": True,
        "corsDomains": "https://a.example,https://b.example",
        "resetPeersOnError": False,
        "resources": {"requests": {"cpu": "1", "memory": "2Gi"}},
        "nodeSelector": {"disk": "ssd"},
        "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "search", "effect": "NoSchedule"}],
        "affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": []}},
        "topologySpreadConstraints": [
            {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule"}
        ],
        "additionalServerConfiguration": {"name": "extra-settings"},
        "ingress": {
            "host": "search.example.com",
            "ingressClassName": "nginx",
            "referer": "docs.example.com",
            "httpDirectives": "server_tokens off;",
            "serverDirectives": "client_max_body_size 10m;",
            "locationDirectives": "proxy_read_timeout 30s;",
            "annotations": {"nginx.ingress.kubernetes.io/proxy-body-size": "10m"},
        },
        "metrics": {"release": "promstack", "interval": 30},
        "incrementalQuorumRecovery": True,
    },
    # The fields the Go operator 0.4.1 added to the seed's API, on the seed's sample with scrapers.
    "go-0.4.1-fields": {
        **sample_spec("ts_v1alpha1_typesensecluster_opentelekomcloud", "TypesenseCluster"),
        **GO_OPERATOR_0_4_1_FIELDS,
    },
}


def cluster(sample: str) -> Cluster:
    return Cluster.from_object(
        {"metadata": {"name": "cluster-1", "namespace": "search", "uid": "uid-1"}, "spec": SAMPLES[sample]}
    )


@pytest.mark.parametrize("sample", sorted(SAMPLES))
def test_children_match_golden_files(sample: str) -> None:
    c = cluster(sample)
    manifests = desired_children(c)
    extra = [build_generated_key_secret(c, "generated-key-value"), build_pod_monitor(c)]
    manifests += [m for m in extra if m is not None] + build_http_routes(c) + build_reference_grants(c)
    assert_golden(manifests, GOLDEN / f"{sample}.yaml")


def test_seed_sample_children() -> None:
    children = by_kind_and_name(desired_children(cluster("seed-opentelekomcloud")))
    assert sorted(children) == [
        "ConfigMap/cluster-1-nodeslist",
        "ConfigMap/cluster-1-reverse-proxy-config",
        "CronJob/cluster-1-scraper-docusaurus-example-com",
        "Deployment/cluster-1-reverse-proxy",
        "Ingress/cluster-1-reverse-proxy-ingress",
        "PodDisruptionBudget/cluster-1-pdb",
        "Service/cluster-1-reverse-proxy-svc",
        "Service/cluster-1-sts-svc",
        "Service/cluster-1-svc",
        "StatefulSet/cluster-1-sts",
    ]
    for child in children.values():
        assert child["metadata"]["ownerReferences"][0]["uid"] == "uid-1"
        assert child["metadata"]["namespace"] == "search"


def test_nodes_list_uses_headless_dns_names_and_ports() -> None:
    assert nodes_list(cluster("seed-aws"), range(3)) == (
        "cluster-1-sts-0.cluster-1-sts-svc:8107:8108,"
        "cluster-1-sts-1.cluster-1-sts-svc:8107:8108,"
        "cluster-1-sts-2.cluster-1-sts-svc:8107:8108"
    )
    assert nodes_list(cluster("full"), [1]) == "cluster-1-sts-1.cluster-1-sts-svc:9107:9108"


@pytest.mark.parametrize(
    ("members", "addresses", "listed"),
    [
        # Every member by its address: nothing Typesense has to resolve.
        (range(3), {0: "127.9.0.1", 1: "127.9.0.2", 2: "127.9.0.3"}, "127.9.0.1,127.9.0.2,127.9.0.3"),
        # Pod 0 replaced, no address yet: its name goes last, so a name that does not resolve can
        # only drop itself (braft keeps the entries before the first it cannot parse).
        (range(3), {1: "127.9.0.2", 2: "127.9.0.3"}, "127.9.0.2,127.9.0.3,cluster-1-sts-0.cluster-1-sts-svc"),
        # A survivor alone, by its address; an address of a pod outside the members is not listed.
        ([2], {0: "127.9.0.1", 2: "127.9.0.3"}, "127.9.0.3"),
        # braft splits a peer at colons: an IPv6 address is written by name.
        ([0, 1], {0: "fd00::1", 1: "127.9.0.2"}, "127.9.0.2,cluster-1-sts-0.cluster-1-sts-svc"),
        ([0], {0: "not an address"}, "cluster-1-sts-0.cluster-1-sts-svc"),
    ],
)
def test_nodes_list_names_members_by_address_and_only_those_without_one_by_name(
    members: Sequence[int], addresses: dict[int, str], listed: str
) -> None:
    ports = ":8107:8108"
    assert nodes_list(cluster("seed-aws"), members, addresses) == ",".join(
        entry + ports for entry in listed.split(",")
    )


def test_pod_addresses_are_keyed_by_ordinal_and_ended_pods_have_none() -> None:
    def pod(name: str, ip: str | None, phase: str = "Running", deleting: bool = False) -> dict[str, Any]:
        metadata: dict[str, Any] = {"name": name}
        if deleting:
            metadata["deletionTimestamp"] = "2026-01-01T00:00:00Z"
        return {"metadata": metadata, "status": {"phase": phase, **({"podIP": ip} if ip else {})}}

    pods = [
        pod("cluster-1-sts-0", "127.9.0.1", deleting=True),  # still running its process: still listed
        pod("cluster-1-sts-1", None, phase="Pending"),
        pod("cluster-1-sts-2", "127.9.0.3", phase="Failed"),
        pod("cluster-1-sts-3", "127.9.0.4"),
        pod("other-sts-4", "127.9.0.5"),
    ]
    assert pod_addresses(pods, "cluster-1-sts") == {0: "127.9.0.1", 3: "127.9.0.4"}


def test_statefulset_reads_the_users_key_and_lets_spec_override_extra_settings() -> None:
    sts = by_kind_and_name(desired_children(cluster("seed-opentelekomcloud")))["StatefulSet/cluster-1-sts"]
    (container,) = sts["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e for e in container["env"]}
    assert env["TYPESENSE_API_KEY"]["valueFrom"]["secretKeyRef"] == {
        "name": "typesense-common-bootstrap-key",
        "key": "typesense-api-key",
    }
    assert env["TYPESENSE_NODES"]["value"] == "/usr/share/typesense/nodelist/nodes"
    assert {"name": "nodeslist", "mountPath": "/usr/share/typesense/nodelist"} in container["volumeMounts"]
    assert "envFrom" not in container
    full = by_kind_and_name(desired_children(cluster("full")))["StatefulSet/cluster-1-sts"]
    typesense = full["spec"]["template"]["spec"]["containers"][0]
    assert typesense["envFrom"] == [{"configMapRef": {"name": "extra-settings"}}]
    assert {e["name"] for e in typesense["env"]} >= {"TYPESENSE_API_PORT", "TYPESENSE_ENABLE_CORS"}


def test_an_edit_of_the_server_configuration_alone_changes_the_pod_template() -> None:
    """Its pods read the ConfigMap once (envFrom), so its content's hash is part of their template."""
    first = server_configuration_hash({"data": {"TYPESENSE_CACHE_NUM_ENTRIES": "1000"}})
    edited = server_configuration_hash({"data": {"TYPESENSE_CACHE_NUM_ENTRIES": "2000"}})
    assert first is not None
    assert edited not in (None, first)
    assert server_configuration_hash({"data": {"A": "1"}, "metadata": {"resourceVersion": "9"}}) == (
        server_configuration_hash({"data": {"A": "1"}, "metadata": {"resourceVersion": "10"}})
    ), "only the content counts"
    assert server_configuration_hash(None) is None

    def template(configuration_hash: str | None) -> dict[str, Any]:
        children = desired_children(cluster("full"), configuration_hash=configuration_hash)
        return dict(by_kind_and_name(children)["StatefulSet/cluster-1-sts"]["spec"]["template"]["metadata"])

    assert template(first)["annotations"] == {"ts.opentelekomcloud.com/server-configuration-hash": first}
    assert template(first) != template(edited)
    assert "annotations" not in template(None), "a missing ConfigMap adds nothing (its creation rolls once)"


def test_statefulset_is_restricted_and_keeps_loading_nodes_alive() -> None:
    sts = by_kind_and_name(desired_children(cluster("seed-aws")))["StatefulSet/cluster-1-sts"]
    pod = sts["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    container = pod["containers"][0]
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert "tcpSocket" in container["livenessProbe"], (
        "a loading node answers 503 on /health; liveness must not use it"
    )
    liveness = container["livenessProbe"]
    assert liveness["periodSeconds"] * liveness["failureThreshold"] > 20, (
        "the quorum's grace (20 s) acts first on a hung majority"
    )
    assert pod["terminationGracePeriodSeconds"] <= 10, (
        "a hung process, or a shutdown that never ends (0.24.1), is killed at the grace; a real kubelet "
        "never shortens a grace it began a stop with"
    )
    assert "terminationGracePeriodSeconds" not in liveness, "the pod's own grace is as short"
    assert "tcpSocket" in container["startupProbe"]
    assert container["readinessProbe"]["httpGet"]["path"] == "/health"
    assert sts["spec"]["persistentVolumeClaimRetentionPolicy"] == {
        "whenDeleted": "Retain",
        "whenScaled": "Retain",
    }
    (claim,) = sts["spec"]["volumeClaimTemplates"]
    assert claim["spec"]["storageClassName"] == "gp2"
    assert claim["spec"]["resources"]["requests"]["storage"] == "100Mi"


def test_metrics_sidecar_and_pod_monitor() -> None:
    c = cluster("full")
    sts = by_kind_and_name(desired_children(c))["StatefulSet/cluster-1-sts"]
    sidecar = sts["spec"]["template"]["spec"]["containers"][1]
    assert sidecar["image"] == "quay.io/akyriako/typesense-prometheus-exporter:0.1.9"
    monitor = build_pod_monitor(c)
    assert monitor is not None
    assert monitor["metadata"]["labels"]["release"] == "promstack"
    assert monitor["spec"]["podMetricsEndpoints"][0]["interval"] == "30s"
    assert build_pod_monitor(cluster("seed-aws")) is None


def test_generated_secret_only_without_a_user_secret() -> None:
    assert build_generated_key_secret(cluster("seed-opentelekomcloud"), "k" * 32) is None
    secret = build_generated_key_secret(cluster("seed-aws"), "k" * 32)
    assert secret is not None
    assert secret["metadata"]["name"] == "cluster-1-admin-key"
    assert list(secret["data"]) == ["typesense-api-key"]


def test_nginx_config_checks_referer_and_places_directives() -> None:
    config = nginx_config(cluster("full"))
    assert config is not None
    assert "valid_referers server_names docs.example.com;" in config
    assert "return 403;" in config
    http, server = config.index("server_tokens off;"), config.index("server {")
    assert http < server < config.index("client_max_body_size 10m;") < config.index("location / {")
    assert config.index("location / {") < config.index("proxy_read_timeout 30s;")
    assert "proxy_pass http://cluster-1-svc.search.svc:9108;" in config
    no_referer = nginx_config(cluster("seed-opentelekomcloud"))
    assert no_referer is not None
    assert "valid_referers" not in no_referer
    assert nginx_config(cluster("seed-aws")) is None


def test_ingress_annotations_tls_and_class() -> None:
    children = by_kind_and_name(desired_children(cluster("seed-opentelekomcloud")))
    ingress = children["Ingress/cluster-1-reverse-proxy-ingress"]
    assert ingress["metadata"]["annotations"] == {
        "cert-manager.io/cluster-issuer": "opentelekomcloud-letsencrypt"
    }
    assert ingress["spec"]["ingressClassName"] == "nginx"
    assert ingress["spec"]["tls"] == [
        {"hosts": ["ts.example.de"], "secretName": "cluster-1-reverse-proxy-tls"}
    ]


def test_the_go_operators_newer_fields_reach_the_children_they_describe() -> None:
    children = by_kind_and_name(desired_children(cluster("go-0.4.1-fields")))
    service = children["Service/cluster-1-svc"]
    assert service["spec"]["type"] == "LoadBalancer"
    assert service["spec"]["externalTrafficPolicy"] == "Local"
    assert service["metadata"]["annotations"] == {
        "old.example.com/kept": "yes",
        "example.com/overridden": "service-wins",
    }
    sts = children["StatefulSet/cluster-1-sts"]
    assert sts["metadata"]["annotations"] == {"example.com/owner": "search-team"}
    template = sts["spec"]["template"]
    assert template["metadata"]["annotations"] == {
        "example.com/owner": "search-team",
        "example.com/scrape": "true",
    }
    assert template["spec"]["priorityClassName"] == "search-critical"
    claim = sts["spec"]["volumeClaimTemplates"][0]
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]
    assert claim["metadata"]["annotations"] == {"example.com/backup": "daily"}
    pulling = [m for m in children.values() if m["kind"] in ("StatefulSet", "Deployment", "CronJob")]
    assert {m["kind"] for m in pulling} == {"StatefulSet", "Deployment", "CronJob"}
    for manifest in pulling:
        pod_spec = manifest["spec"].get("jobTemplate", manifest)["spec"]["template"]["spec"]
        assert pod_spec["imagePullSecrets"] == [{"name": "registry-credentials"}], manifest["kind"]


def test_the_go_operators_ingress_fields_shape_the_ingress_and_the_proxy() -> None:
    children = by_kind_and_name(desired_children(cluster("go-0.4.1-fields")))
    ingress = children["Ingress/cluster-1-reverse-proxy-ingress"]
    assert ingress["metadata"]["labels"]["example.com/team"] == "search"
    assert ingress["metadata"]["labels"]["app.kubernetes.io/instance"] == "cluster-1"
    (path,) = ingress["spec"]["rules"][0]["http"]["paths"]
    assert (path["path"], path["pathType"]) == ("/search", "Prefix")
    assert ingress["spec"]["tls"] == [{"hosts": ["ts.example.de"], "secretName": "wildcard-example-de"}]
    service = children["Service/cluster-1-reverse-proxy-svc"]
    assert service["metadata"]["annotations"] == {"example.com/proxy-service": "1"}
    pod = children["Deployment/cluster-1-reverse-proxy"]["spec"]["template"]["spec"]
    (nginx,) = pod["containers"]
    assert nginx["image"] == "nginx:1.27-alpine"
    assert nginx["resources"] == {"requests": {"cpu": "20m"}}
    assert nginx["securityContext"]["readOnlyRootFilesystem"] is True
    assert {m["mountPath"] for m in nginx["volumeMounts"]} == {
        "/etc/nginx/nginx.conf",
        "/var/cache/nginx",
        "/tmp",
    }
    assert {v["name"] for v in pod["volumes"]} == {"config", "cache", "scratch"}


def test_a_scraper_with_a_host_and_no_config_gets_the_generated_docusaurus_config() -> None:
    children = by_kind_and_name(desired_children(cluster("go-0.4.1-fields")))
    cronjob = children["CronJob/cluster-1-scraper-docs"]
    assert cronjob["spec"]["schedule"] == "@daily"
    container = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "typesense/docsearch-scraper:0.12.0.rc14"
    assert container["envFrom"] == [{"secretRef": {"name": "docs-login"}}]
    config = json.loads(next(e["value"] for e in container["env"] if e["name"] == "CONFIG"))
    assert config["index_name"] == "docs"
    assert config["start_urls"] == ["http://docs.example.com"]
    assert config["sitemap_urls"] == ["http://docs.example.com/sitemap.xml"]
    assert config["selectors"]["lvl1"] == "article h1, header h1"


def test_scraper_cronjob_passes_target_and_config_as_env() -> None:
    children = by_kind_and_name(desired_children(cluster("seed-opentelekomcloud")))
    cronjob = children["CronJob/cluster-1-scraper-docusaurus-example-com"]
    assert cronjob["spec"]["schedule"] == "*/2 * * * *"
    container = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}
    assert env["TYPESENSE_HOST"] == "cluster-1-svc.search.svc"
    assert env["TYPESENSE_PORT"] == "8108"
    assert env["TYPESENSE_PROTOCOL"] == "http"
    assert env["CONFIG"].startswith('{"index_name":"docusaurus-example"')
    assert env["TYPESENSE_API_KEY"]["secretKeyRef"]["name"] == "typesense-common-bootstrap-key"


def test_invalid_scraper_config_is_reported_and_not_deployed() -> None:
    spec = dict(SAMPLES["seed-opentelekomcloud"])
    spec["scrapers"] = [
        {"name": "good", "image": "i", "config": "{}", "schedule": "* * * * *"},
        {"name": "broken", "image": "i", "config": "{not json", "schedule": "* * * * *"},
        {"name": "list", "image": "i", "config": "[]", "schedule": "* * * * *"},
    ]
    c = Cluster.from_object({"metadata": {"name": "c", "namespace": "n", "uid": "u"}, "spec": spec})
    errors = invalid_scraper_configs(c)
    assert sorted(errors) == ["broken", "list"]
    assert "not valid JSON" in errors["broken"]
    names = [m["metadata"]["name"] for m in desired_children(c) if m["kind"] == "CronJob"]
    assert names == ["c-scraper-good"]


def test_stale_children_are_the_prunable_ones_no_longer_wanted() -> None:
    with_ingress = desired_children(cluster("seed-opentelekomcloud"))
    without = desired_children(cluster("seed-aws"))
    stale = sorted(f"{m['kind']}/{m['metadata']['name']}" for m in stale_children(without, with_ingress))
    assert stale == [
        "ConfigMap/cluster-1-reverse-proxy-config",
        "CronJob/cluster-1-scraper-docusaurus-example-com",
        "Deployment/cluster-1-reverse-proxy",
        "Ingress/cluster-1-reverse-proxy-ingress",
        "Service/cluster-1-reverse-proxy-svc",
    ]
    assert stale_children(with_ingress, with_ingress) == []


def _with_routes(*routes: dict[str, Any]) -> Cluster:
    spec = {"image": "typesense/typesense:27.1", "httpRoutes": list(routes)}
    return Cluster.from_object(
        {"metadata": {"name": "cluster-1", "namespace": "search", "uid": "u"}, "spec": spec}
    )


def test_an_http_route_sends_its_gateway_traffic_to_the_client_service() -> None:
    (route,) = build_http_routes(_with_routes({"name": "public", "parentRef": {"name": "edge"}}))
    assert route["apiVersion"] == "gateway.networking.k8s.io/v1"
    assert route["metadata"]["name"] == "cluster-1-public"
    assert route["metadata"]["ownerReferences"][0]["uid"] == "u"
    assert route["spec"]["parentRefs"] == [
        {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "edge", "namespace": "search"}
    ]
    assert "hostnames" not in route["spec"], "every host name of the listener"
    (rule,) = route["spec"]["rules"]
    assert rule["matches"] == [{"path": {"type": "PathPrefix", "value": "/"}}]
    assert rule["backendRefs"] == [
        {"group": "", "kind": "Service", "name": "cluster-1-svc", "port": 8108, "weight": 1}
    ]


def test_the_operators_labels_win_over_a_routes_labels() -> None:
    labels = {"app.kubernetes.io/managed-by": "someone-else", "team": "search"}
    (route,) = build_http_routes(_with_routes({"name": "r", "parentRef": {"name": "edge"}, "labels": labels}))
    assert route["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "typesense-operator"
    assert route["metadata"]["labels"]["team"] == "search"


@pytest.mark.parametrize(
    ("route", "grants"),
    [
        ({"name": "r", "parentRef": {"name": "edge", "namespace": "gateways"}, "referenceGrant": True}, 1),
        # The Gateway in the cluster's own namespace: nothing to grant.
        ({"name": "r", "parentRef": {"name": "edge", "namespace": "search"}, "referenceGrant": True}, 0),
        ({"name": "r", "parentRef": {"name": "edge"}, "referenceGrant": True}, 0),
        ({"name": "r", "parentRef": {"name": "edge", "namespace": "gateways"}}, 0),
        # A disabled entry has neither a route nor a grant.
        (
            {
                "name": "r",
                "enabled": False,
                "parentRef": {"name": "edge", "namespace": "gateways"},
                "referenceGrant": True,
            },
            0,
        ),
    ],
)
def test_a_reference_grant_only_for_a_gateway_in_another_namespace(
    route: dict[str, Any], grants: int
) -> None:
    cluster = _with_routes(route)
    assert len(build_reference_grants(cluster)) == grants
    assert needs_finalizer(
        {
            "metadata": {"name": "cluster-1", "namespace": "search"},
            "spec": cluster.spec.model_dump(by_alias=True, exclude_none=True),
        }
    ) is bool(grants)


def test_a_reference_grant_lets_the_clusters_routes_refer_to_the_gateway_and_names_its_owner() -> None:
    (grant,) = build_reference_grants(
        _with_routes(
            {"name": "public", "parentRef": {"name": "edge", "namespace": "gateways"}, "referenceGrant": True}
        )
    )
    assert grant["apiVersion"] == "gateway.networking.k8s.io/v1beta1"
    metadata = grant["metadata"]
    assert (metadata["namespace"], metadata["name"]) == ("gateways", "cluster-1-public-reference-grant")
    assert "ownerReferences" not in metadata, "an owner in another namespace would have it garbage collected"
    assert metadata["labels"]["operator-suite.io/owner-namespace"] == "search"
    assert metadata["labels"]["app.kubernetes.io/instance"] == "cluster-1"
    assert grant["spec"] == {
        "from": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "namespace": "search"}],
        "to": [{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "edge"}],
    }


def a_pod(name: str, init_state: str | None) -> dict[str, Any]:
    statuses = (
        [] if init_state is None else [{"name": WAIT_FOR_ADDRESSES_CONTAINER, "state": {init_state: {}}}]
    )
    return {"metadata": {"name": name}, "status": {"initContainerStatuses": statuses}}


@pytest.mark.parametrize(
    ("every_pod", "expected"),
    [
        # Without forceResetPeersConfigOnUpdate, only a pod whose typesense-server has not started and
        # waits for the list to name every member: its kubelet would copy the list at its next sync.
        (False, ["waiting"]),
        (True, ["waiting", "started", "pending"]),
    ],
)
def test_the_pods_hurried_on_a_new_nodes_list(every_pod: bool, expected: list[str]) -> None:
    pods = [a_pod("waiting", "running"), a_pod("started", "terminated"), a_pod("pending", None)]
    hurried = pods_to_hurry(pods, every_pod=every_pod)
    assert [pod["metadata"]["name"] for pod in hurried] == expected
