"""The Helm charts under charts/: linted and rendered by the real helm, accepted by a real API server
(server-side dry run, every chart in both RBAC modes, with the Prometheus Operator's real CRDs), and RBAC
that grants what the operator needs and denies the rest."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from clusterstack_operator.controller.webhooks import cluster_stack_webhooks
from operator_core.admission import webhook_configuration
from operator_testkit import charts
from operator_testkit.controlplane import ControlPlane
from operator_testkit.module_crds import ensure_prometheus_operator_crds

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
CHARTS = ("typesense-operator", "monocle-operator", "cluster-stack-operator")
RELEASE_NAMESPACE = "operators"
WATCHED = ("team-a", "team-b")
EVERYTHING_ON = [
    "--set", "metrics.serviceMonitor.enabled=true",
    "--set", "prometheusRule.enabled=true",
    "--set", "replicas=2",
]  # fmt: skip
MODES = {
    "cluster-wide": [],
    "namespaced": ["--set", "watchNamespaces={" + ",".join(WATCHED) + "}"],
}


@pytest.fixture(scope="module", autouse=True)
def _helm_home(tmp_path_factory: pytest.TempPathFactory) -> None:
    """helm's cache, configuration and data for this module: never the user's."""
    _HELM_HOME.append(tmp_path_factory.mktemp("helm"))


_HELM_HOME: list[Path] = []


def run_helm(*arguments: str) -> subprocess.CompletedProcess[str]:
    return charts.run_helm(_HELM_HOME[-1], *arguments)


def helm(*arguments: str) -> str:
    done = run_helm(*arguments)
    assert done.returncode == 0, done.stderr
    return done.stdout


def render(chart: str, *values: str, release: str = "suite") -> list[dict[str, Any]]:
    return charts.render_chart(_HELM_HOME[-1], chart, *values, release=release, namespace=RELEASE_NAMESPACE)


@pytest.fixture(scope="module")
def plane(start_module_control_plane: Any) -> ControlPlane:
    """A control plane of this module's own: the Prometheus Operator's CRDs would change what the
    shared one's Typesense tests see (a PodMonitor CRD that arrives during a test)."""
    control_plane: ControlPlane = start_module_control_plane("charts")
    crds = ensure_prometheus_operator_crds()
    control_plane.kubectl("apply", "--server-side", "-f", str(crds))
    # The suite's own too, so that `kubectl auth can-i` knows the custom kinds' names.
    control_plane.kubectl("apply", "--server-side", "-f", str(ROOT / "deploy" / "crds"))
    control_plane.kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
    for namespace in (RELEASE_NAMESPACE, *WATCHED, "team-c"):
        control_plane.kubectl("create", "namespace", namespace)
    return control_plane


@pytest.mark.parametrize("chart", CHARTS)
def test_every_chart_lints_strictly_with_its_defaults_and_with_every_option(chart: str) -> None:
    path = str(ROOT / "charts" / chart)
    helm("lint", "--strict", path)
    helm("lint", "--strict", path, *EVERYTHING_ON, *MODES["namespaced"])


def test_two_replicas_without_leader_election_are_refused_with_the_reason() -> None:
    done = run_helm(
        "template", "x", str(ROOT / "charts" / "typesense-operator"),
        "--set", "replicas=2", "--set", "leaderElection.enabled=false",
    )  # fmt: skip
    assert done.returncode != 0
    assert "replicas > 1 needs leaderElection.enabled" in done.stderr


@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("chart", CHARTS)
def test_the_api_server_accepts_every_object_of_every_chart(
    plane: ControlPlane, chart: str, mode: str
) -> None:
    values = [*EVERYTHING_ON, *MODES[mode]]
    if chart == "typesense-operator":
        values += ["--set", "dashboard.enabled=true"]
    text = helm(
        "template", "suite", str(ROOT / "charts" / chart), "-n", RELEASE_NAMESPACE, "--include-crds", *values
    )
    kinds = {document["kind"] for document in yaml.safe_load_all(text) if document}
    expected = {
        "CustomResourceDefinition",
        "Deployment",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
    }
    expected |= {"Role", "RoleBinding", "Service", "ServiceMonitor", "PrometheusRule"}
    assert expected <= kinds
    done = subprocess.run(
        [
            str(plane.binaries.kubectl), f"--kubeconfig={plane.kubeconfig}",
            "apply", "--dry-run=server", "--server-side", "--field-manager=helm-test", "-f", "-",
        ],
        input=text, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "(server dry run)" in done.stdout


def _deployment(documents: list[dict[str, Any]]) -> dict[str, Any]:
    (deployment,) = (d for d in documents if d["kind"] == "Deployment")
    return deployment


def test_the_deployment_runs_restricted_with_probes_and_the_chosen_options() -> None:
    documents = render(
        "typesense-operator", *MODES["namespaced"], "--set", "logFormat=text", "--set", "logLevel=debug"
    )
    pod = _deployment(documents)["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["command"] == ["typesense-operator"]
    assert set(container["args"]) >= {
        "--leader-elect", "--log-format=text", "--log-level=debug",
        "--namespace=team-a", "--namespace=team-b",
    }  # fmt: skip
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }


def _can_i(plane: ControlPlane, *question: str) -> bool:
    account = f"system:serviceaccount:{RELEASE_NAMESPACE}:rbac-typesense-operator"
    done = subprocess.run(
        [
            str(plane.binaries.kubectl), f"--kubeconfig={plane.kubeconfig}", "auth", "can-i", *question,
            f"--as={account}",
        ],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    return done.stdout.strip() == "yes"


@pytest.fixture
def granted(plane: ControlPlane, request: pytest.FixtureRequest) -> Iterator[str]:
    """The RBAC objects of the Typesense chart in the mode the test names, applied for real."""
    mode: str = request.param
    documents = [
        d
        for d in render("typesense-operator", *MODES[mode], release="rbac")
        if d["kind"] in ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
    ]
    text = yaml.safe_dump_all(documents)
    kubectl = [str(plane.binaries.kubectl), f"--kubeconfig={plane.kubeconfig}"]
    subprocess.run([*kubectl, "apply", "-f", "-"], input=text, text=True, check=True, capture_output=True)
    try:
        yield mode
    finally:
        subprocess.run(
            [*kubectl, "delete", "-f", "-"], input=text, text=True, check=True, capture_output=True
        )


@pytest.mark.parametrize("granted", ["cluster-wide"], indirect=True)
def test_cluster_wide_rbac_grants_what_the_operator_needs_and_denies_what_it_does_not(
    plane: ControlPlane, granted: str
) -> None:
    for question in (
        ("watch", "typesenseclusters.ts.opentelekomcloud.com", "--all-namespaces"),
        ("patch", "statefulsets", "-n", "team-c"),
        ("delete", "pods", "-n", "team-a"),
        ("create", "leases", "-n", RELEASE_NAMESPACE),
        ("watch", "leases/rbac-typesense-operator-leader", "-n", RELEASE_NAMESPACE),  # a standby's
        ("get", "leases", "-n", "kube-node-lease"),  # a node's heartbeat, before a member is taken for hung
    ):
        assert _can_i(plane, *question), question
    for question in (
        ("create", "pods", "-n", "team-a"),  # the StatefulSet controller makes them, not the operator
        ("delete", "typesenseclusters.ts.opentelekomcloud.com", "-n", "team-a"),  # a user's to delete
        # Only kopf needed these; kinds are found through API discovery now (decision 23).
        ("list", "customresourcedefinitions"),
        ("watch", "customresourcedefinitions"),
        ("list", "namespaces"),
        ("watch", "namespaces"),
        ("update", "customresourcedefinitions"),
        ("delete", "namespaces"),
        ("create", "clusterroles"),
        ("create", "leases", "-n", "team-a"),  # the Lease lives in the operator's own namespace only
        ("get", "leases", "-n", "team-a"),  # nor are other Leases read, but the nodes' heartbeats
        ("list", "leases", "-n", "kube-node-lease"),
        ("watch", "leases", "-n", RELEASE_NAMESPACE),  # its own Lease, not every other one there
        ("impersonate", "users"),
    ):
        assert not _can_i(plane, *question), question


@pytest.mark.parametrize("granted", ["namespaced"], indirect=True)
def test_namespaced_rbac_reaches_only_the_watched_namespaces(plane: ControlPlane, granted: str) -> None:
    for namespace in WATCHED:
        assert _can_i(plane, "watch", "typesenseclusters.ts.opentelekomcloud.com", "-n", namespace)
        assert _can_i(plane, "create", "secrets", "-n", namespace)
    assert not _can_i(plane, "watch", "typesenseclusters.ts.opentelekomcloud.com", "-n", "team-c")
    assert not _can_i(plane, "get", "secrets", "-n", "team-c")
    assert not _can_i(plane, "list", "secrets", "--all-namespaces")
    # Kinds are found through API discovery: no CRD or Namespace rule at all (decision 23).
    assert _can_i(plane, "get", "storageclasses")
    assert _can_i(plane, "get", "leases", "-n", "kube-node-lease")
    assert not _can_i(plane, "list", "customresourcedefinitions")
    assert not _can_i(plane, "list", "namespaces")


def _rules(documents: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [rule for d in documents if d["kind"] == kind for rule in d.get("rules") or []]


@pytest.mark.parametrize(("mode", "kind"), [("cluster-wide", "ClusterRole"), ("namespaced", "Role")])
def test_the_cluster_stack_chart_grants_orcs_images_as_upstream_and_more_by_values(
    mode: str, kind: str
) -> None:
    """The openstack scs and scs2 cluster classes render ORC Images: granted by default (upstream's
    rbac.additionalRules), and a user's provider adds its own groups the same way."""
    orc = {"apiGroups": ["openstack.k-orc.cloud"], "resources": ["images"]}
    rules = _rules(render("cluster-stack-operator", *MODES[mode]), kind)
    assert any({key: rule[key] for key in orc} == orc and "create" in rule["verbs"] for rule in rules)
    extra = [
        "--set-json",
        'rbac.additionalRules=[{"apiGroups":["example.io"],"resources":["widgets"],"verbs":["get"]}]',
    ]
    rules = _rules(render("cluster-stack-operator", *MODES[mode], *extra), kind)
    assert {"apiGroups": ["example.io"], "resources": ["widgets"], "verbs": ["get"]} in rules
    assert not any("openstack.k-orc.cloud" in rule["apiGroups"] for rule in rules), "replaced, as values are"


def _webhook_configuration(documents: list[dict[str, Any]]) -> dict[str, Any]:
    (configuration,) = (d for d in documents if d["kind"] == "ValidatingWebhookConfiguration")
    return configuration


def test_the_cluster_stack_chart_registers_the_operators_own_webhooks_through_its_service() -> None:
    """The chart's configuration is the one the operator would register itself (its webhooks, rules and
    paths), calling the chart's Service, with the chart's own CA where cert-manager is not served."""
    documents = render("cluster-stack-operator", *MODES["namespaced"])
    configuration = _webhook_configuration(documents)
    own = webhook_configuration(
        "any",
        cluster_stack_webhooks(None),
        base_url="https://x",
        ca_bundle=b"ca",
        failure_policy="Fail",  # type: ignore[arg-type]
    )
    strip = ("clientConfig", "namespaceSelector")
    assert [{k: v for k, v in w.items() if k not in strip} for w in configuration["webhooks"]] == [
        {k: v for k, v in w.items() if k not in strip} for w in own["webhooks"]
    ]
    (service,) = (
        d for d in documents if d["kind"] == "Service" and d["metadata"]["name"].endswith("-webhook")
    )
    secret = next(
        d for d in documents if d["kind"] == "Secret" and d["metadata"]["name"].endswith("-webhook-tls")
    )
    for webhook, mine in zip(configuration["webhooks"], own["webhooks"], strict=True):
        reference = webhook["clientConfig"]["service"]
        assert reference == {
            "name": service["metadata"]["name"],
            "namespace": RELEASE_NAMESPACE,
            "path": mine["clientConfig"]["url"].removeprefix("https://x"),
            "port": 443,
        }
        assert webhook["clientConfig"]["caBundle"] == secret["data"]["ca.crt"]
        assert webhook["namespaceSelector"]["matchExpressions"][0]["values"] == list(WATCHED)
    pod = _deployment(documents)["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    environment = {e["name"]: e.get("value") for e in container["env"]}
    assert environment["OPERATOR_SUITE_WEBHOOK"] == "true"
    assert {"name": "webhook-tls", "secret": {"secretName": secret["metadata"]["name"]}} in pod["volumes"]


def test_with_cert_manager_served_the_chart_asks_it_for_the_certificate() -> None:
    documents = render(
        "cluster-stack-operator", *MODES["cluster-wide"], "--api-versions", "cert-manager.io/v1"
    )
    kinds = {d["kind"] for d in documents}
    assert {"Issuer", "Certificate"} <= kinds
    assert not any(d["kind"] == "Secret" for d in documents), "cert-manager writes it"
    configuration = _webhook_configuration(documents)
    assert "cert-manager.io/inject-ca-from" in configuration["metadata"]["annotations"]
    assert all("caBundle" not in w["clientConfig"] for w in configuration["webhooks"])
    assert all("namespaceSelector" not in w for w in configuration["webhooks"]), "every namespace"
