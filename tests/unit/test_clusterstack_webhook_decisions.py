"""The Cluster Stack webhooks' decisions, table by table, and the settings that turn them on.

Each decision is a pure function over what the webhook observed (the object, its old version, the
Clusters of its namespace, whether a kind is served): None allows, a sentence says why not.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from clusterstack_operator.controller.settings import settings_from_environment
from clusterstack_operator.controller.webhooks import (
    hook_warning,
    judge_cluster,
    provider_template_to_check,
    why_cluster_ref_is_refused,
    why_provider_ref_is_refused,
    why_release_deletion_is_refused,
    why_stack_deletion_is_refused,
)
from operator_core.admission import (
    AdmissionRequest,
    ValidatingWebhook,
    Verdict,
    review_response,
    webhook_configuration,
)
from operator_core.errors import SettingsError
from operator_testkit.webhooks import serving_certificates


def cluster(
    name: str, class_name: str | None, *, v1beta1: bool = False, deleting: bool = False
) -> dict[str, Any]:
    topology: dict[str, Any] = {}
    if class_name is not None:
        topology = {"class": class_name} if v1beta1 else {"classRef": {"name": class_name}}
    metadata: dict[str, Any] = {"name": name, "namespace": "team"}
    if deleting:
        metadata["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": metadata, "spec": {"topology": topology} if topology else {}}


def stack(
    *, provider: str = "docker", name: str = "ferrol", kubernetes: str = "1.30", **spec: Any
) -> dict[str, Any]:
    return {
        "metadata": {"name": f"{provider}-{name}", "namespace": "team"},
        "spec": {"provider": provider, "name": name, "kubernetesVersion": kubernetes, **spec},
    }


RELEASE = "docker-ferrol-1-30-v2"


@pytest.mark.parametrize(
    ("clusters", "refused_naming"),
    [
        ([], None),
        ([cluster("alpha", None)], None),
        ([cluster("alpha", "docker-ferrol-1-30-v1")], None),
        ([cluster("alpha", "docker-ferrol-1-31-v2")], None),
        ([cluster("alpha", "some-class-of-its-own")], None),
        (
            [cluster("alpha", "docker-ferrol-1-30-v2")],
            "Cluster alpha uses ClusterClass docker-ferrol-1-30-v2",
        ),
        ([cluster("alpha", "docker-ferrol-1-30-v2", v1beta1=True)], "Cluster alpha uses"),
        (
            [
                cluster("beta", "docker-ferrol-1-30-v2", deleting=True),
                cluster("alpha", "docker-ferrol-1-30-v2"),
            ],
            "Clusters alpha and beta (being deleted) use ClusterClass docker-ferrol-1-30-v2",
        ),
    ],
)
def test_a_release_is_deleted_only_once_no_cluster_uses_its_class(
    clusters: list[dict[str, Any]], refused_naming: str | None
) -> None:
    refused = why_release_deletion_is_refused(RELEASE, "team", clusters)
    if refused_naming is None:
        assert refused is None
    else:
        assert refused is not None
        assert refused.startswith(f"ClusterStackRelease {RELEASE} is still in use in namespace team: ")
        assert refused_naming in refused
        assert "Move them to another ClusterClass or delete them" in refused


def test_a_release_name_that_is_no_release_is_never_in_use() -> None:
    assert why_release_deletion_is_refused("handmade", "team", [cluster("alpha", "handmade")]) is None


def test_a_release_in_use_by_many_clusters_names_ten_and_counts_the_rest() -> None:
    clusters = [cluster(f"c{index:02}", RELEASE) for index in range(14)]
    refused = why_release_deletion_is_refused(RELEASE, "team", clusters)
    assert refused is not None
    assert "c00, c01" in refused
    assert "c09 and 4 more use" in refused
    assert "c10" not in refused


@pytest.mark.parametrize(
    ("clusters", "refused_naming"),
    [
        ([], None),
        ([cluster("alpha", "docker-other-1-30-v1")], None),
        ([cluster("alpha", "docker-ferrol-1-31-v1")], None),
        ([cluster("alpha", "openstack-ferrol-1-30-v1")], None),
        (
            [cluster("alpha", "docker-ferrol-1-30-v1")],
            "Cluster alpha uses ClusterClass docker-ferrol-1-30-v1",
        ),
        ([cluster("alpha", "docker-ferrol-1-30-v1-alpha.3")], "Cluster alpha uses"),
        (
            [
                cluster("alpha", "docker-ferrol-1-30-v1"),
                cluster("beta", "docker-ferrol-1-30-v2"),
                cluster("gamma", "docker-ferrol-1-30-v2"),
            ],
            "Cluster alpha uses ClusterClass docker-ferrol-1-30-v1; "
            "Clusters beta and gamma use ClusterClass docker-ferrol-1-30-v2",
        ),
    ],
)
def test_a_stack_is_deleted_only_once_no_cluster_uses_a_class_of_its_releases(
    clusters: list[dict[str, Any]], refused_naming: str | None
) -> None:
    refused = why_stack_deletion_is_refused(stack(), clusters)
    if refused_naming is None:
        assert refused is None
    else:
        assert refused is not None
        assert refused.startswith("ClusterStack docker-ferrol is still in use in namespace team: ")
        assert refused_naming in refused


def test_a_stack_without_a_valid_kubernetes_version_has_no_releases_to_protect() -> None:
    assert (
        why_stack_deletion_is_refused(stack(kubernetes="latest"), [cluster("a", "docker-ferrol-1-30-v1")])
        is None
    )


TEMPLATE = {
    "apiVersion": "infrastructure.example/v1alpha1",
    "kind": "DockerClusterStackReleaseTemplate",
    "name": "t",
}


@pytest.mark.parametrize(
    ("new", "old", "checked"),
    [
        (
            stack(providerRef=TEMPLATE),
            None,
            ("infrastructure.example/v1alpha1", "DockerClusterStackReleaseTemplate"),
        ),
        (stack(noProvider=True, providerRef=TEMPLATE), None, None),
        (stack(noProvider=True), None, None),
        (stack(), None, None),  # CEL requires a providerRef without noProvider; nothing to look up
        # An update that leaves the reference alone is never refused for it (a finalizer removed).
        (stack(providerRef=TEMPLATE, versions=["v2"]), stack(providerRef=TEMPLATE), None),
        (stack(providerRef={**TEMPLATE, "name": "other"}), stack(providerRef=TEMPLATE), None),
        (
            stack(providerRef={**TEMPLATE, "kind": "OtherTemplate"}),
            stack(providerRef=TEMPLATE),
            ("infrastructure.example/v1alpha1", "OtherTemplate"),
        ),
        (
            stack(providerRef=TEMPLATE),
            stack(noProvider=True, providerRef=TEMPLATE),
            ("infrastructure.example/v1alpha1", "DockerClusterStackReleaseTemplate"),
        ),
    ],
)
def test_a_provider_template_kind_is_looked_up_when_set_or_changed(
    new: dict[str, Any], old: dict[str, Any] | None, checked: tuple[str, str] | None
) -> None:
    assert provider_template_to_check(new, old) == checked


@pytest.mark.parametrize(
    ("kind", "served", "refused_with"),
    [
        ("DockerClusterStackReleaseTemplate", True, None),
        ("DockerClusterStackReleaseTemplate", False, "which this API server does not serve"),
        ("DockerClusterStackRelease", True, "does not end in Template"),
        ("Template", True, "does not end in Template"),
    ],
)
def test_a_provider_template_must_be_a_served_kind_ending_in_template(
    kind: str, served: bool, refused_with: str | None
) -> None:
    refused = why_provider_ref_is_refused("infrastructure.example/v1alpha1", kind, served=served)
    assert (refused is None) == (refused_with is None)
    if refused is not None:
        assert refused_with is not None
        assert refused_with in refused
        assert refused.startswith("spec.providerRef")


def addon(**reference: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "alpha", "namespace": "team"},
        "spec": {"clusterRef": {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster", **reference}},
    }


@pytest.mark.parametrize(
    ("new", "old", "refused_with"),
    [
        (addon(name="alpha"), None, None),
        (addon(name="alpha", namespace="team"), None, None),
        (
            addon(name="alpha", namespace="elsewhere"),
            None,
            "is elsewhere, but a ClusterAddon lives beside its Cluster",
        ),
        (addon(name="alpha"), addon(name="alpha"), None),
        (addon(name="beta"), addon(name="alpha"), "cannot change (here: name 'alpha' to 'beta')"),
        (addon(name="alpha", uid="u2"), addon(name="alpha", uid="u1"), "uid 'u1' to 'u2'"),
        (addon(name="alpha", namespace="elsewhere"), addon(name="alpha"), "cannot change"),
    ],
)
def test_a_cluster_addon_stays_with_one_cluster_of_its_namespace(
    new: dict[str, Any], old: dict[str, Any] | None, refused_with: str | None
) -> None:
    refused = why_cluster_ref_is_refused(new, old, "team")
    assert (refused is None) == (refused_with is None), refused
    if refused is not None:
        assert refused_with is not None
        assert refused_with in refused


def test_who_sets_or_changes_a_cluster_addons_hook_is_told_nothing_reads_it() -> None:
    hooked = {"spec": {"hook": "BeforeClusterUpgrade"}}
    warning = hook_warning(hooked, None)
    assert warning is not None
    assert warning.startswith("spec.hook (BeforeClusterUpgrade) is ignored")
    assert hook_warning(hooked, hooked) is None, "an update that leaves it as it was"
    assert hook_warning({"spec": {}}, None) is None
    assert review_response("u-3", Verdict.allow("careful"))["response"] == {
        "uid": "u-3",
        "allowed": True,
        "warnings": ["careful"],
    }


def test_a_denial_answers_its_request_by_uid_with_the_message() -> None:
    request = AdmissionRequest.from_review(
        {
            "request": {
                "uid": "u-1",
                "operation": "DELETE",
                "namespace": "team",
                "name": "x",
                "oldObject": {"a": 1},
            }
        }
    )
    assert (request.operation, request.new_object, request.subject) == ("DELETE", None, {"a": 1})
    review = review_response(request.uid, Verdict.deny("no"))
    assert review["response"] == {
        "uid": "u-1",
        "allowed": False,
        "status": {"code": 403, "reason": "Forbidden", "message": "no"},
    }
    assert review_response("u-2", Verdict.allow())["response"] == {"uid": "u-2", "allowed": True}


@pytest.mark.parametrize("review", [{}, {"request": {}}, [], "text", {"request": {"uid": 3}}])
def test_what_is_not_an_admission_review_is_refused(review: object) -> None:
    with pytest.raises(ValueError, match="not an AdmissionReview"):
        AdmissionRequest.from_review(review)


def test_the_configuration_calls_each_webhook_by_url_and_trusts_the_ca() -> None:
    async def allow(_: AdmissionRequest) -> Verdict:
        return Verdict.allow()

    hook = ValidatingWebhook("things.example.com", "example.com", "v1", "things", ("DELETE",), allow)
    configuration = webhook_configuration(
        "mine", [hook], base_url="https://127.0.0.1:9443/", ca_bundle=b"PEM", failure_policy="Fail"
    )
    (webhook,) = configuration["webhooks"]
    assert webhook["clientConfig"] == {
        "url": "https://127.0.0.1:9443/validate/things.example.com",
        "caBundle": "UEVN",
    }
    assert webhook["rules"][0]["operations"] == ["DELETE"]
    assert (webhook["failurePolicy"], webhook["sideEffects"]) == ("Fail", "None")


# -- the settings


@pytest.fixture
def certificates(tmp_path: Path) -> Path:
    """tls.crt, tls.key and ca.crt, as a cert-manager Certificate's Secret mounts them."""
    return serving_certificates(tmp_path)


def test_webhooks_are_off_unless_turned_on() -> None:
    assert settings_from_environment({}).webhook is False


def test_webhooks_with_a_certificate_and_a_url_are_accepted(certificates: Path) -> None:
    settings = settings_from_environment(
        {
            "OPERATOR_SUITE_WEBHOOK": "true",
            "OPERATOR_SUITE_WEBHOOK_CERT_DIR": str(certificates),
            "OPERATOR_SUITE_WEBHOOK_URL": "https://127.0.0.1:9443",
        }
    )
    assert (settings.webhook, settings.webhook_failure_policy) == (True, "Fail")


@pytest.mark.parametrize(
    ("variables", "message"),
    [
        ({}, "OPERATOR_SUITE_WEBHOOK_CERT_DIR is not set: the webhooks are served over TLS only"),
        (
            {"OPERATOR_SUITE_WEBHOOK_CERT_DIR": "/nonexistent"},
            "OPERATOR_SUITE_WEBHOOK_CERT_DIR='/nonexistent' has no tls.crt",
        ),
        ({"OPERATOR_SUITE_WEBHOOK_URL": "http://127.0.0.1:9443"}, "expected https://host:port"),
        ({"OPERATOR_SUITE_WEBHOOK_PORT": "70000"}, "OPERATOR_SUITE_WEBHOOK_PORT=70000 is not a TCP port"),
        ({"OPERATOR_SUITE_WEBHOOK_FAILURE_POLICY": "Maybe"}, "allowed values: Fail, Ignore"),
    ],
)
def test_webhook_settings_that_cannot_work_are_refused_naming_the_variable(
    certificates: Path, variables: dict[str, str], message: str
) -> None:
    environ = {"OPERATOR_SUITE_WEBHOOK": "on", **variables}
    if variables and "OPERATOR_SUITE_WEBHOOK_CERT_DIR" not in variables:
        environ["OPERATOR_SUITE_WEBHOOK_CERT_DIR"] = str(certificates)
    with pytest.raises(SettingsError, match=re.escape(message)):
        settings_from_environment(environ)


def test_registering_by_url_needs_the_ca_and_a_key_that_fits(certificates: Path) -> None:
    environ = {
        "OPERATOR_SUITE_WEBHOOK": "on",
        "OPERATOR_SUITE_WEBHOOK_CERT_DIR": str(certificates),
        "OPERATOR_SUITE_WEBHOOK_URL": "https://127.0.0.1:9443",
    }
    (certificates / "ca.crt").unlink()
    with pytest.raises(SettingsError, match=r"has no ca\.crt: registering the webhooks by URL"):
        settings_from_environment(environ)
    (certificates / "tls.key").write_text("not a key")
    with pytest.raises(SettingsError, match="are not a certificate and its key"):
        settings_from_environment(environ)


def _on(class_name: str | None, version: str = "v1.30.10") -> dict[str, Any]:
    topology = {"classRef": {"name": class_name}, "version": version} if class_name else {}
    return {"metadata": {"name": "c", "namespace": "team"}, "spec": {"topology": topology}}


@pytest.mark.parametrize(
    ("new", "old", "kubernetes", "refused_with", "warned"),
    [
        (_on("docker-scs-1-30-v2"), None, "v1.30.10", None, False),
        (_on("docker-scs-1-30-v2", "v1.30.9"), None, "v1.30.10", "built for Kubernetes v1.30.10", False),
        (_on("docker-scs-1-30-v2"), None, None, None, True),  # no release (yet): said, not refused
        (_on("my-own-class"), None, None, None, False),  # not a cluster stack's
        (_on(None), None, None, None, False),  # no topology: not ours to judge (upstream refuses it)
        (_on("docker-scs-1-31-v1", "v1.31.2"), _on("docker-scs-1-30-v2"), "v1.31.2", None, False),
        (
            _on("docker-scs-1-32-v1", "v1.32.1"),
            _on("docker-scs-1-30-v2"),
            "v1.32.1",
            "one minor version",
            False,
        ),
        (
            _on("docker-scs-1-29-v1", "v1.29.1"),
            _on("docker-scs-1-30-v2"),
            "v1.29.1",
            "one minor version",
            False,
        ),
        (_on("docker-other-1-30-v1"), _on("docker-scs-1-30-v2"), "v1.30.10", "stays on its provider", False),
        (_on("docker-scs-1-30-v0-sha.hdl6pjy"), _on("docker-scs-1-30-v2"), "v1.30.10", None, False),
    ],
)
def test_a_cluster_on_a_stacks_class_runs_its_releases_kubernetes_and_moves_one_minor_at_a_time(
    new: dict[str, Any],
    old: dict[str, Any] | None,
    kubernetes: str | None,
    refused_with: str | None,
    warned: bool,
) -> None:
    verdict = judge_cluster(new, old, kubernetes)
    assert (verdict.refused is None) == (refused_with is None), verdict
    if refused_with is not None:
        assert refused_with in (verdict.refused or "")
    assert bool(verdict.warnings) is warned
