"""Builders from a Monocle spec to its children, checked field by field and against golden files.

Regenerate the golden files after an intended change with
``UPDATE_GOLDEN=1 pytest tests/unit/test_monocle_resources.py`` and review the diff.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from monocle_operator.resources import (
    CONFIG_HASH_ANNOTATION,
    SECRET_HASH_ANNOTATION,
    UPDATE_IDENTS_TTL_SECONDS,
    Instance,
    build_config_map,
    build_generated_secret,
    build_update_idents_job,
    desired_children,
    stale_children,
)
from operator_testkit.tables import assert_golden, by_kind_and_name
from samples import sample_spec

GOLDEN = Path(__file__).parent / "golden" / "monocle"
SECRET_HASH = "0123456789abcdef0123456789abcdef"
CONFIG_HASH = "fedcba9876543210"

SAMPLES: dict[str, dict[str, Any]] = {
    "seed": sample_spec("monocle_v1alpha1_monocle", "Monocle"),
    # Everything else the spec can say.
    "full": {
        "monoclePublicURL": "https://monocle.example.com",
        "image": "quay.io/change-metrics/monocle:1.9.0",
        "elastic": {
            "image": "docker.elastic.co/elasticsearch/elasticsearch:7.17.10",
            "storageClassName": "fast",
            "storageSize": "5Gi",
            "javaHeap": "1g",
        },
        "ingress": {
            "host": "monocle.example.com",
            "ingressClassName": "nginx",
            "tls": {"secretName": "monocle-tls"},
            "annotations": {"cert-manager.io/cluster-issuer": "letsencrypt"},
        },
        "secretRef": {"name": "monocle-tokens"},
        "configMapRef": {"name": "monocle-config"},
        "resources": {
            "elastic": {"limits": {"memory": "4Gi"}},
            "api": {"requests": {"cpu": "200m"}},
            "crawler": {"requests": {"cpu": "50m"}},
        },
    },
}


def instance(sample: str, name: str = "monocle-sample") -> Instance:
    return Instance.from_object(
        {"metadata": {"name": name, "namespace": "metrics", "uid": "uid-1"}, "spec": SAMPLES[sample]}
    )


def every_manifest(sample: str) -> list[dict[str, Any]]:
    i = instance(sample)
    extra = [build_generated_secret(i, "generated-crawler-key"), build_config_map(i)]
    return [
        *desired_children(i, SECRET_HASH),
        *(m for m in extra if m is not None),
        build_update_idents_job(i, CONFIG_HASH),
    ]


def pod_specs(sample: str) -> dict[str, dict[str, Any]]:
    """Pod spec of every workload, by kind/name."""
    return {
        key: m["spec"]["template"]["spec"]
        for key, m in by_kind_and_name(every_manifest(sample)).items()
        if m["kind"] in ("Deployment", "StatefulSet", "Job")
    }


@pytest.mark.parametrize("sample", sorted(SAMPLES))
def test_children_match_golden_files(sample: str) -> None:
    assert_golden(every_manifest(sample), GOLDEN / f"{sample}.yaml")


def test_seed_sample_children_are_named_after_the_instance() -> None:
    children = by_kind_and_name(every_manifest("seed"))
    assert sorted(children) == [
        "ConfigMap/monocle-sample-api",
        "Deployment/monocle-sample-api",
        "Deployment/monocle-sample-crawler",
        "Job/monocle-sample-update-idents-fedcba9876",
        "Secret/monocle-sample-api",
        "Service/monocle-sample-api",
        "Service/monocle-sample-elastic",
        "StatefulSet/monocle-sample-elastic",
    ]
    for child in children.values():
        assert child["metadata"]["ownerReferences"][0]["uid"] == "uid-1"
        assert child["metadata"]["namespace"] == "metrics"
        assert child["metadata"]["labels"]["app.kubernetes.io/instance"] == "monocle-sample"


def test_selectors_include_the_instance_so_two_instances_never_share_pods() -> None:
    first = by_kind_and_name(desired_children(instance("seed", "one"), SECRET_HASH))
    second = by_kind_and_name(desired_children(instance("seed", "two"), SECRET_HASH))
    assert not set(first) & set(second), "no two instances share an object name"
    for manifest in [*first.values(), *second.values()]:
        spec = manifest["spec"]
        selector = spec["selector"]["matchLabels"] if manifest["kind"] != "Service" else spec["selector"]
        assert (
            selector["app.kubernetes.io/instance"]
            == manifest["metadata"]["labels"]["app.kubernetes.io/instance"]
        )
        if "template" in spec:
            assert selector.items() <= spec["template"]["metadata"]["labels"].items()


def test_elasticsearch_is_single_node_with_heap_probes_and_a_volume() -> None:
    children = by_kind_and_name(every_manifest("full"))
    sts = children["StatefulSet/monocle-sample-elastic"]
    (container,) = sts["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env == {"discovery.type": "single-node", "ES_JAVA_OPTS": "-Xms1g -Xmx1g"}
    assert container["readinessProbe"]["httpGet"]["path"].startswith("/_cluster/health")
    assert container["livenessProbe"]["httpGet"]["path"].startswith("/_cluster/health")
    (claim,) = sts["spec"]["volumeClaimTemplates"]
    assert claim["spec"]["resources"]["requests"]["storage"] == "5Gi"
    assert claim["spec"]["storageClassName"] == "fast"
    service = children["Service/monocle-sample-elastic"]
    assert service["spec"]["ports"][0]["port"] == 9200


def test_the_claim_template_keeps_its_created_size_when_the_spec_grows() -> None:
    sts = by_kind_and_name(desired_children(instance("full"), SECRET_HASH, claim_size="2Gi"))
    (claim,) = sts["StatefulSet/monocle-sample-elastic"]["spec"]["volumeClaimTemplates"]
    assert claim["spec"]["resources"]["requests"]["storage"] == "2Gi"


def test_api_runs_monocle_api_with_env_secrets_config_and_probes() -> None:
    api = by_kind_and_name(every_manifest("seed"))["Deployment/monocle-sample-api"]
    template = api["spec"]["template"]
    (container,) = template["spec"]["containers"]
    assert container["command"] == ["monocle", "api"]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["MONOCLE_ELASTIC_URL"] == "http://monocle-sample-elastic:9200"
    assert env["MONOCLE_PUBLIC_URL"] == "http://localhost:8090"
    assert container["envFrom"] == [{"secretRef": {"name": "monocle-sample-api"}}]
    assert container["ports"][0]["containerPort"] == 8080
    assert {"name": "config", "mountPath": "/etc/monocle", "readOnly": True} in container["volumeMounts"]
    assert template["spec"]["volumes"] == [{"name": "config", "configMap": {"name": "monocle-sample-api"}}]
    assert container["readinessProbe"]["httpGet"]["path"] == "/health"
    assert container["livenessProbe"]["httpGet"]["path"] == "/health"
    assert template["metadata"]["annotations"] == {SECRET_HASH_ANNOTATION: SECRET_HASH}


def test_crawler_runs_monocle_crawler_against_the_api_with_its_health_probed() -> None:
    crawler = by_kind_and_name(every_manifest("seed"))["Deployment/monocle-sample-crawler"]
    template = crawler["spec"]["template"]
    (container,) = template["spec"]["containers"]
    assert container["command"] == ["monocle", "crawler"]
    assert {"name": "MONOCLE_PUBLIC_URL", "value": "http://monocle-sample-api:8080"} in container["env"]
    port = container["ports"][0]["containerPort"]
    assert container["readinessProbe"]["httpGet"] == {"path": "/health", "port": port}
    assert template["metadata"]["annotations"] == {SECRET_HASH_ANNOTATION: SECRET_HASH}


def test_user_secret_and_config_map_are_used_and_the_users_keys_win() -> None:
    children = by_kind_and_name(every_manifest("full"))
    assert "ConfigMap/monocle-sample-api" not in children, "the user's ConfigMap replaces the generated one"
    for name in ("Deployment/monocle-sample-api", "Deployment/monocle-sample-crawler"):
        pod = children[name]["spec"]["template"]["spec"]
        assert pod["containers"][0]["envFrom"] == [
            {"secretRef": {"name": "monocle-sample-api"}},
            {"secretRef": {"name": "monocle-tokens"}},
        ]
        assert pod["volumes"] == [{"name": "config", "configMap": {"name": "monocle-config"}}]


def test_update_idents_job() -> None:
    job = build_update_idents_job(instance("seed"), CONFIG_HASH)
    assert job["metadata"]["name"] == "monocle-sample-update-idents-fedcba9876"
    assert job["metadata"]["annotations"] == {CONFIG_HASH_ANNOTATION: CONFIG_HASH}
    assert job["spec"]["ttlSecondsAfterFinished"] == UPDATE_IDENTS_TTL_SECONDS == 3600
    pod = job["spec"]["template"]["spec"]
    assert pod["restartPolicy"] == "Never"
    (container,) = pod["containers"]
    assert container["command"] == [
        "monocle",
        "janitor",
        "update-idents",
        "--elastic",
        "$(MONOCLE_ELASTIC_URL)",
        "--config",
        "/etc/monocle/config.yaml",
    ]
    assert {"name": "MONOCLE_ELASTIC_URL", "value": "http://monocle-sample-elastic:9200"} in container["env"]
    assert container["volumeMounts"] == [{"name": "config", "mountPath": "/etc/monocle", "readOnly": True}]
    other = build_update_idents_job(instance("seed", "other"), CONFIG_HASH)
    assert other["metadata"]["name"] != job["metadata"]["name"], "the seed's fixed name collided"


@pytest.mark.parametrize("sample", sorted(SAMPLES))
def test_every_pod_meets_the_restricted_pod_security_standard(sample: str) -> None:
    specs = pod_specs(sample)
    assert len(specs) == 4, "Elasticsearch, API, crawler and the Job"
    for name, pod in specs.items():
        assert pod["securityContext"]["runAsNonRoot"] is True, name
        assert pod["securityContext"]["runAsUser"] > 0, name
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}, name
        for container in pod["containers"]:
            context = container["securityContext"]
            assert context["allowPrivilegeEscalation"] is False, name
            assert context["capabilities"] == {"drop": ["ALL"]}, name


def test_ingress_only_when_asked_and_pruned_when_dropped() -> None:
    assert not any(m["kind"] == "Ingress" for m in desired_children(instance("seed"), SECRET_HASH))
    full = by_kind_and_name(desired_children(instance("full"), SECRET_HASH))
    ingress = full["Ingress/monocle-sample-api"]
    assert ingress["spec"]["ingressClassName"] == "nginx"
    assert ingress["spec"]["tls"] == [{"hosts": ["monocle.example.com"], "secretName": "monocle-tls"}]
    assert ingress["metadata"]["annotations"] == {"cert-manager.io/cluster-issuer": "letsencrypt"}
    backend = ingress["spec"]["rules"][0]["http"]["paths"][0]["backend"]
    assert backend == {"service": {"name": "monocle-sample-api", "port": {"number": 8080}}}
    stale = stale_children(desired_children(instance("seed"), SECRET_HASH), list(full.values()))
    assert [m["kind"] for m in stale] == ["Ingress"], "the same engine: only the Ingress is pruned"


def opensearch(spec: dict[str, Any]) -> Instance:
    return Instance.from_object(
        {"metadata": {"name": "monocle-sample", "namespace": "metrics", "uid": "uid-1"}, "spec": spec}
    )


def test_opensearch_runs_as_its_upstream_image_is_run_in_a_statefulset_of_its_own() -> None:
    spec = {"elastic": {"engine": "OpenSearch", "javaHeap": "1g"}}
    children = by_kind_and_name(desired_children(opensearch(spec), SECRET_HASH))
    assert "StatefulSet/monocle-sample-elastic" not in children
    engine = children["StatefulSet/monocle-sample-opensearch"]
    (container,) = engine["spec"]["template"]["spec"]["containers"]
    assert container["name"] == "opensearch"
    assert container["image"] == "opensearchproject/opensearch:2.19.6"
    env = {variable["name"]: variable["value"] for variable in container["env"]}
    assert env == {
        "discovery.type": "single-node",
        "OPENSEARCH_JAVA_OPTS": "-Xms1g -Xmx1g",
        "DISABLE_SECURITY_PLUGIN": "true",
        "DISABLE_INSTALL_DEMO_CONFIG": "true",
    }
    assert container["volumeMounts"] == [{"name": "data", "mountPath": "/usr/share/opensearch/data"}]
    assert opensearch(spec).elastic_claim_name == "data-monocle-sample-opensearch-0"
    # The Service keeps its name and selects the engine's pods, whichever engine.
    service = children["Service/monocle-sample-elastic"]
    assert service["spec"]["selector"].items() <= engine["spec"]["template"]["metadata"]["labels"].items()
    # Monocle's pods are restarted by a change of engine; an image of the user's is kept.
    for name in ("monocle-sample-api", "monocle-sample-crawler"):
        annotations = children[f"Deployment/{name}"]["spec"]["template"]["metadata"]["annotations"]
        assert annotations["monocle.change-metrics.io/engine"] == "OpenSearch"
    mine = {"elastic": {"engine": "OpenSearch", "image": "registry.example/opensearch:2.19.6"}}
    (container,) = by_kind_and_name(desired_children(opensearch(mine), SECRET_HASH))[
        "StatefulSet/monocle-sample-opensearch"
    ]["spec"]["template"]["spec"]["containers"]
    assert container["image"] == "registry.example/opensearch:2.19.6"


def test_a_change_of_engine_prunes_the_old_engines_statefulset_and_nothing_else() -> None:
    before = desired_children(instance("seed"), SECRET_HASH)
    after = desired_children(
        opensearch({"elastic": {"engine": "OpenSearch", "onEngineChange": "Recrawl"}}), SECRET_HASH
    )
    stale = stale_children(after, before)
    assert [f"{m['kind']}/{m['metadata']['name']}" for m in stale] == ["StatefulSet/monocle-sample-elastic"]
