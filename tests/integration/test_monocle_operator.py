"""The Monocle operator, as its own ServiceAccount, on the real control plane.

Pods are made by the real controller-manager (ReplicaSets, the StatefulSet and
the Job) in namespaces that enforce the restricted Pod Security Standard, so a
pod that is not restricted is refused there. No kubelet runs them here: that
the Job completes is an end-to-end concern (tests/e2e/nodes/test_monocle.py).
"""

from __future__ import annotations

import asyncio
import base64
import time
import uuid
from typing import Any

import pytest

from operator_core.kube import Kube
from operator_testkit import assertions
from operator_testkit.assertions import (
    all_gone,
    events_for,
    operator_requests,
    reconciles_counted,
    settle,
    wait_for_object,
    wait_for_reconcile,
)
from operator_testkit.controlplane import ControlPlane
from operator_testkit.fixtures import Kubectl, wait_until
from operator_testkit.operators import OperatorProcess
from operator_testkit.volumes import static_storage
from samples import load_sample

pytestmark = pytest.mark.usefixtures("monocle_operator")

API = "monocle.monocle.change-metrics.io/v1alpha1"
OPERATOR_USER = "system:serviceaccount:monocle-system:monocle-operator"
TOKEN = "ghp_not-a-real-token-4f9c2b7e1d"
NO_RECHECK_SECONDS = 8.0
"""How long an instance waiting for the user's Secret is watched for requests: longer than the 5 s
recheck the operator used to make, and than the first two back-off steps (2 s, 5 s) a retry would take."""


@pytest.fixture
def restricted(namespace: str, kubectl: Kubectl) -> str:
    """The test's namespace, refusing every pod that breaks the restricted Pod Security Standard."""
    kubectl("label", "namespace", namespace, "pod-security.kubernetes.io/enforce=restricted")
    return namespace


def monocle(namespace: str, name: str = "monocle-sample", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "Monocle",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


async def get_instance(kube: Kube, namespace: str, name: str = "monocle-sample") -> dict[str, Any]:
    found = await kube.get(API, "Monocle", name, namespace)
    assert found is not None
    return found


async def wait_for_condition(
    kube: Kube, namespace: str, condition_type: str, status: str, reason: str | None = None
) -> dict[str, Any]:
    """A condition of monocle-sample, once it has that status (and reason)."""
    return await assertions.wait_for_condition(
        kube, API, "Monocle", "monocle-sample", namespace, condition_type, status, reason
    )


async def owned_by(kube: Kube, kind: str, namespace: str, owner: str) -> list[dict[str, Any]]:
    """ReplicaSets (or Pods) whose controller is ``owner``."""
    api_version = "apps/v1" if kind == "ReplicaSet" else "v1"
    return [
        item
        for item in await kube.list(api_version, kind, namespace)
        if any(ref["name"] == owner for ref in item["metadata"].get("ownerReferences") or [])
    ]


async def count_owned(kube: Kube, kind: str, namespace: str, owner: str, count: int) -> bool:
    return len(await owned_by(kube, kind, namespace, owner)) == count


async def poke_and_wait_for_a_reconcile(
    operator: OperatorProcess, control_plane: ControlPlane, namespace: str, *poke: list[str]
) -> None:
    """Run each ``kubectl`` command of ``poke``, then wait for the reconcile it causes (the operator's own
    count) and for whatever it writes (status, Events), which comes before the operator goes quiet."""
    before = await reconciles_counted(operator, at_or_after=time.time())
    for command in poke:
        control_plane.kubectl(*command)
    await wait_for_reconcile(operator, more_than=before, since=time.time())
    await settle(control_plane, OPERATOR_USER, namespace, quiet_seconds=1.0)


async def edit_config(kube: Kube, namespace: str, text: str, name: str = "monocle-sample-api") -> None:
    live = await kube.get("v1", "ConfigMap", name, namespace)
    assert live is not None
    await kube.apply(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace},
            "data": {"config.yaml": text},
        },
        force=True,
    )


async def update_idents_jobs(
    kube: Kube, namespace: str, instance: str = "monocle-sample"
) -> list[dict[str, Any]]:
    labels = {"app.kubernetes.io/instance": instance, "app.kubernetes.io/component": "update-idents"}
    return await kube.list("batch/v1", "Job", namespace, labels=labels)


async def test_seed_sample_applies_unchanged_and_every_child_appears_with_restricted_pods(
    kube: Kube, restricted: str
) -> None:
    namespace = restricted
    for document in load_sample("monocle_v1alpha1_monocle"):
        await kube.apply({**document, "metadata": {**document["metadata"], "namespace": namespace}})
    for api_version, kind, name in (
        ("v1", "Secret", "monocle-sample-api"),
        ("v1", "ConfigMap", "monocle-sample-api"),
        ("v1", "Service", "monocle-sample-elastic"),
        ("v1", "Service", "monocle-sample-api"),
        ("apps/v1", "StatefulSet", "monocle-sample-elastic"),
        ("apps/v1", "Deployment", "monocle-sample-api"),
        ("apps/v1", "Deployment", "monocle-sample-crawler"),
    ):
        await wait_for_object(kube, api_version, kind, name, namespace)
    secret = await wait_for_object(kube, "v1", "Secret", "monocle-sample-api", namespace)
    assert len(base64.b64decode(secret["data"]["CRAWLERS_API_KEY"])) >= 32
    config = await wait_for_object(kube, "v1", "ConfigMap", "monocle-sample-api", namespace)
    assert "name: demo" in config["data"]["config.yaml"]
    # The restricted namespace admits them: the controllers' pods exist.
    await wait_for_object(kube, "v1", "Pod", "monocle-sample-elastic-0", namespace)
    for deployment in ("monocle-sample-api", "monocle-sample-crawler"):
        (replica_set,) = await wait_until(lambda d=deployment: owned_by(kube, "ReplicaSet", namespace, d))  # type: ignore[misc]
        await wait_until(
            lambda r=replica_set: owned_by(kube, "Pod", namespace, r["metadata"]["name"]),
            what=f"a pod of {deployment}",
        )
    await wait_for_condition(kube, namespace, "ConfigValid", "True", "Valid")
    elastic = await wait_for_condition(kube, namespace, "ElasticReady", "False", "NotReady")
    assert "monocle-sample-elastic" in elastic["message"]
    ready = await wait_for_condition(kube, namespace, "Ready", "False")
    assert ready["message"], "Ready says which component is not ready"
    obj = await get_instance(kube, namespace)
    assert obj["status"]["configHash"], "the config the instance started with is recorded"
    assert obj["status"]["observedGeneration"] == obj["metadata"]["generation"]
    assert await update_idents_jobs(kube, namespace) == [], "a new instance runs no update-idents"
    announced = " ".join(event["message"] for event in await events_for(kube, namespace, "Created"))
    assert "monocle-sample-elastic" not in announced, "the children a new instance starts with are not news"


async def test_secret_data_rolls_api_and_crawler_and_metadata_edits_do_not(
    kube: Kube,
    namespace: str,
    control_plane: ControlPlane,
    kubectl: Kubectl,
    monocle_operator: OperatorProcess,
) -> None:
    await kube.apply(monocle(namespace))
    for deployment in ("monocle-sample-api", "monocle-sample-crawler"):
        await wait_until(
            lambda d=deployment: count_owned(kube, "ReplicaSet", namespace, d, 1), what=f"{deployment} RS"
        )
    await settle(control_plane, OPERATOR_USER, namespace)
    await poke_and_wait_for_a_reconcile(
        monocle_operator,
        control_plane,
        namespace,
        ["annotate", "secret/monocle-sample-api", "-n", namespace, f"example.com/note={uuid.uuid4().hex}"],
        ["label", "secret/monocle-sample-api", "-n", namespace, "example.com/team=metrics"],
    )
    for deployment in ("monocle-sample-api", "monocle-sample-crawler"):
        assert await count_owned(kube, "ReplicaSet", namespace, deployment, 1), (
            "a metadata edit restarts nothing"
        )

    encoded = base64.b64encode(TOKEN.encode()).decode()
    kubectl(
        "patch",
        "secret/monocle-sample-api",
        "-n",
        namespace,
        "-p",
        f'{{"data":{{"GITHUB_TOKEN":"{encoded}"}}}}',
    )
    for deployment in ("monocle-sample-api", "monocle-sample-crawler"):
        await wait_until(
            lambda d=deployment: count_owned(kube, "ReplicaSet", namespace, d, 2),
            what=f"a second ReplicaSet of {deployment}, made by the controller-manager",
        )
    assert await events_for(kube, namespace, "Updated")
    everything = repr(await kube.list("v1", "Event", namespace)) + repr(await get_instance(kube, namespace))
    assert TOKEN not in everything
    assert TOKEN not in monocle_operator.log()


async def test_config_change_runs_one_update_idents_job_and_invalid_config_runs_none(
    kube: Kube, restricted: str
) -> None:
    namespace = restricted
    await kube.apply(monocle(namespace))
    started = await wait_until(
        lambda: _status_field(kube, namespace, "configHash"), what="the first config hash"
    )
    await edit_config(kube, namespace, "workspaces:\n  - name: demo\n  - name: openstack\n")
    (job,) = await wait_until(lambda: update_idents_jobs(kube, namespace), what="an update-idents Job")  # type: ignore[misc]
    name = job["metadata"]["name"]
    assert name.startswith("monocle-sample-update-idents-")
    assert job["spec"]["ttlSecondsAfterFinished"] == 3600
    pod = job["spec"]["template"]["spec"]
    assert pod["restartPolicy"] == "Never"
    (container,) = pod["containers"]
    assert container["command"][:3] == ["monocle", "janitor", "update-idents"]
    assert container["command"][3:] == [
        "--elastic",
        "$(MONOCLE_ELASTIC_URL)",
        "--config",
        "/etc/monocle/config.yaml",
    ]
    assert container["volumeMounts"] == [{"name": "config", "mountPath": "/etc/monocle", "readOnly": True}]
    assert pod["volumes"][0]["configMap"]["name"] == "monocle-sample-api"
    await wait_until(lambda: owned_by(kube, "Pod", namespace, name), what="the Job's pod (restricted)")

    async def recorded_hash() -> str | None:
        status = (await get_instance(kube, namespace)).get("status") or {}
        return status.get("configHash") if status.get("updateIdentsJob") == name else None

    recorded = await wait_until(recorded_hash, what="the hash recorded after the Job was created")
    assert recorded != started
    assert len(await events_for(kube, namespace, "UpdateIdentsStarted")) == 1

    await edit_config(kube, namespace, "workspaces:\n  - name: [unclosed\n")
    invalid = await wait_for_condition(kube, namespace, "ConfigValid", "False", "InvalidYAML")
    assert "not valid YAML" in invalid["message"]
    assert await wait_until(lambda: events_for(kube, namespace, "InvalidConfig"), what="a Warning")
    await edit_config(kube, namespace, "workspaces:\n  - name: Open Stack\n")
    bad_name = await wait_for_condition(kube, namespace, "ConfigValid", "False", "InvalidWorkspaceName")
    assert "'Open Stack' is not a valid index name" in bad_name["message"]
    await wait_for_condition(kube, namespace, "Ready", "False", "InvalidWorkspaceName")
    assert [j["metadata"]["name"] for j in await update_idents_jobs(kube, namespace)] == [name], "no Job"
    assert (await get_instance(kube, namespace))["status"]["configHash"] == recorded

    await edit_config(kube, namespace, "workspaces:\n  - name: openstack\n")
    await wait_for_condition(kube, namespace, "ConfigValid", "True")

    async def replaced() -> list[str]:
        names = [j["metadata"]["name"] for j in await update_idents_jobs(kube, namespace)]
        return names if len(names) == 1 and names != [name] else []

    await wait_until(replaced, what="the earlier Job replaced by exactly one new one")


async def _status_field(kube: Kube, namespace: str, field: str, name: str = "monocle-sample") -> Any:
    return ((await get_instance(kube, namespace, name)).get("status") or {}).get(field)


async def test_deleted_children_are_restored_and_spec_changes_are_applied(kube: Kube, namespace: str) -> None:
    await kube.apply(monocle(namespace))
    await wait_for_object(kube, "apps/v1", "Deployment", "monocle-sample-crawler", namespace)
    await kube.delete("v1", "Service", "monocle-sample-api", namespace)
    await kube.delete("apps/v1", "Deployment", "monocle-sample-crawler", namespace)
    await kube.delete("v1", "ConfigMap", "monocle-sample-api", namespace)
    await wait_for_object(kube, "v1", "Service", "monocle-sample-api", namespace)
    await wait_for_object(kube, "apps/v1", "Deployment", "monocle-sample-crawler", namespace)
    await wait_for_object(kube, "v1", "ConfigMap", "monocle-sample-api", namespace)

    spec = {
        "image": "quay.io/change-metrics/monocle:1.9.0",
        "monoclePublicURL": "https://monocle.example.com",
        "ingress": {"host": "monocle.example.com"},
    }
    await kube.apply(monocle(namespace, **spec))

    async def applied() -> bool:
        api = await kube.get("apps/v1", "Deployment", "monocle-sample-api", namespace)
        crawler = await kube.get("apps/v1", "Deployment", "monocle-sample-crawler", namespace)
        ingress = await kube.get("networking.k8s.io/v1", "Ingress", "monocle-sample-api", namespace)
        if not (api and crawler and ingress):
            return False
        container = api["spec"]["template"]["spec"]["containers"][0]
        env = {e["name"]: e.get("value") for e in container["env"]}
        return env["MONOCLE_PUBLIC_URL"] == "https://monocle.example.com"

    await wait_until(applied, what="the public URL and the ingress to be applied")
    # No kubelet runs the engine here, so it is never ready: the new Monocle image waits for it, and
    # says so (the engine first, then Monocle: tests/e2e/nodes/test_monocle.py sees the whole roll).
    waiting = await wait_for_condition(kube, namespace, "ApiReady", "False", "WaitingForEngine")
    assert spec["image"] in waiting["message"], waiting
    for name in ("monocle-sample-api", "monocle-sample-crawler"):
        deployment = await kube.get("apps/v1", "Deployment", name, namespace)
        assert deployment is not None
        image = deployment["spec"]["template"]["spec"]["containers"][0]["image"]
        assert image == "quay.io/change-metrics/monocle:1.8.0", name
    await kube.apply(monocle(namespace, **{k: v for k, v in spec.items() if k != "ingress"}))
    await wait_until(
        lambda: _gone(kube, "networking.k8s.io/v1", "Ingress", "monocle-sample-api", namespace),
        what="the Ingress to be pruned",
    )


async def _gone(kube: Kube, api_version: str, kind: str, name: str, namespace: str) -> bool:
    return await kube.get(api_version, kind, name, namespace) is None


async def test_two_instances_in_one_namespace_do_not_interfere(
    kube: Kube, namespace: str, control_plane: ControlPlane
) -> None:
    await kube.apply(monocle(namespace, "one"))
    await kube.apply(monocle(namespace, "two"))
    for name in ("one", "two"):
        await wait_until(
            lambda n=name: _status_field(kube, namespace, "configHash", n), what=f"{name} settled"
        )
    for name in ("one", "two"):
        service = await wait_for_object(kube, "v1", "Service", f"{name}-api", namespace)
        pods = await wait_until(
            lambda s=service: kube.list("v1", "Pod", namespace, labels=s["spec"]["selector"]), what="api pods"
        )
        assert {p["metadata"]["name"].rsplit("-", 2)[0] for p in pods} == {f"{name}-api"}  # type: ignore[attr-defined]
    await edit_config(kube, namespace, "workspaces:\n  - name: changed\n", name="one-api")
    (job,) = await wait_until(lambda: update_idents_jobs(kube, namespace, "one"), what="one's Job")  # type: ignore[misc]
    assert job["metadata"]["name"].startswith("one-update-idents-")
    await settle(control_plane, OPERATOR_USER, namespace, quiet_seconds=1.0)
    assert await update_idents_jobs(kube, namespace, "two") == []
    two = await get_instance(kube, namespace, "two")
    assert "updateIdentsJob" not in two["status"]


async def test_steady_state_reconcile_makes_no_request_at_all(
    kube: Kube, namespace: str, control_plane: ControlPlane, monocle_operator: OperatorProcess
) -> None:
    """Every read comes from the watch caches and nothing is written when nothing changed: zero requests."""
    await kube.apply(monocle(namespace))
    await wait_for_condition(kube, namespace, "CrawlerReady", "False")
    since = await settle(control_plane, OPERATOR_USER, namespace)
    poke = ["annotate", "service/monocle-sample-api", "-n", namespace, f"example.com/poke={uuid.uuid4().hex}"]
    await poke_and_wait_for_a_reconcile(monocle_operator, control_plane, namespace, poke)
    requests = operator_requests(control_plane, OPERATOR_USER, namespace)[since:]
    assert requests == [], [(e["verb"], e["objectRef"]) for e in requests]


async def test_deleting_the_instance_collects_children_and_keeps_the_users_secret_and_config(
    kube: Kube, namespace: str, monocle_operator: OperatorProcess
) -> None:
    await kube.create(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "tokens", "namespace": namespace},
            "stringData": {"GITHUB_TOKEN": TOKEN},
        }
    )
    await kube.apply(
        monocle(namespace, secretRef={"name": "tokens"}, configMapRef={"name": "monocle-config"})
    )
    missing = await wait_for_condition(kube, namespace, "ConfigValid", "False", "ConfigMapNotFound")
    assert "ConfigMap monocle-config (spec.configMapRef) does not exist" in missing["message"]
    await kube.create(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "monocle-config", "namespace": namespace},
            "data": {"config.yaml": "workspaces:\n  - name: mine\n"},
        }
    )
    api = await wait_for_object(kube, "apps/v1", "Deployment", "monocle-sample-api", namespace)
    assert {"secretRef": {"name": "tokens"}} in api["spec"]["template"]["spec"]["containers"][0]["envFrom"]
    await wait_for_condition(kube, namespace, "ConfigValid", "True")
    assert await kube.get("v1", "ConfigMap", "monocle-sample-api", namespace) is None

    await kube.delete(API, "Monocle", "monocle-sample", namespace)

    children = (
        ("apps/v1", "StatefulSet", "monocle-sample-elastic"),
        ("apps/v1", "Deployment", "monocle-sample-api"),
        ("apps/v1", "Deployment", "monocle-sample-crawler"),
        ("v1", "Service", "monocle-sample-api"),
        ("v1", "Secret", "monocle-sample-api"),
    )
    await wait_until(
        lambda: all_gone(kube, namespace, children), timeout=60, what="garbage collection of the children"
    )
    assert await kube.get("v1", "Secret", "tokens", namespace) is not None, "the user's Secret survives"
    assert await kube.get("v1", "ConfigMap", "monocle-config", namespace) is not None
    assert TOKEN not in monocle_operator.log()
    assert "Traceback" not in monocle_operator.log()


async def test_a_larger_storage_size_grows_the_bound_claim_where_the_class_allows_it(
    kube: Kube, namespace: str
) -> None:
    storage_class = f"expandable-{namespace[-6:]}"
    volume = f"pv-{namespace[-6:]}"
    async with static_storage(kube, storage_class, [volume], expandable=True):
        elastic = {"storageClassName": storage_class, "storageSize": "1Gi"}
        await kube.apply(monocle(namespace, elastic=elastic))

        async def bound() -> bool:
            claim = await kube.get("v1", "PersistentVolumeClaim", "data-monocle-sample-elastic-0", namespace)
            return bool(claim and (claim.get("status") or {}).get("phase") == "Bound")

        await wait_until(bound, timeout=60, what="the PV controller to bind the claim")
        await kube.apply(monocle(namespace, elastic={**elastic, "storageSize": "2Gi"}))

        async def grown() -> bool:
            claim = await kube.get("v1", "PersistentVolumeClaim", "data-monocle-sample-elastic-0", namespace)
            return bool(claim and claim["spec"]["resources"]["requests"]["storage"] == "2Gi")

        await wait_until(grown, what="the claim to ask for 2Gi")
        assert await wait_until(lambda: events_for(kube, namespace, "StorageExpanded"), what="an Event")
        sts = await kube.get("apps/v1", "StatefulSet", "monocle-sample-elastic", namespace)
        assert sts is not None
        (template,) = sts["spec"]["volumeClaimTemplates"]
        assert template["spec"]["resources"]["requests"]["storage"] == "1Gi", "the template cannot change"


async def test_a_missing_user_secret_is_reported_once_and_its_creation_is_picked_up_at_once(
    kube: Kube, namespace: str, control_plane: ControlPlane
) -> None:
    await kube.apply(monocle(namespace, secretRef={"name": "tokens"}))
    missing = await wait_for_condition(kube, namespace, "ApiReady", "False", "SecretNotFound")
    assert "Secret tokens (spec.secretRef) does not exist" in missing["message"]
    await wait_for_condition(kube, namespace, "CrawlerReady", "False", "SecretNotFound")
    assert await kube.get("apps/v1", "Deployment", "monocle-sample-api", namespace) is None

    # Only the user can create the Secret, and its creation wakes the instance: no recheck on a timer.
    since = await settle(control_plane, OPERATOR_USER, namespace)
    await asyncio.sleep(NO_RECHECK_SECONDS)
    assert assertions.operator_requests(control_plane, OPERATOR_USER, namespace)[since:] == []
    (warning,) = await events_for(kube, namespace, "SecretMissing")
    assert warning["type"] == "Warning"

    await kube.create(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "tokens", "namespace": namespace},
            "stringData": {"GITHUB_TOKEN": TOKEN},
        }
    )
    # The Secret's watch event wakes the instance: no wait for the next recheck, let alone a resync.
    await wait_for_object(kube, "apps/v1", "Deployment", "monocle-sample-api", namespace, timeout=4)


async def test_a_child_the_api_server_refuses_is_reported_once_retried_and_applied_once_fixed(
    kube: Kube, namespace: str, control_plane: ControlPlane
) -> None:
    """The shared step: ChildrenApplied=False naming the child, one Warning over many retries, and Ready
    says why; once the conflicting object is gone, the next retry applies it."""
    conflicting = {"app": "someone-else"}
    await kube.create(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "monocle-sample-api", "namespace": namespace},
            "spec": {
                "selector": {"matchLabels": conflicting},
                "template": {
                    "metadata": {"labels": conflicting},
                    "spec": {"containers": [{"name": "c", "image": "example/other:1"}]},
                },
            },
        }
    )
    await kube.apply(monocle(namespace))
    failed = await wait_for_condition(kube, namespace, "ChildrenApplied", "False", "ApplyFailed")
    assert failed["message"].startswith("Deployment monocle-sample-api: ")
    assert "immutable" in failed["message"]
    ready = await wait_for_condition(kube, namespace, "Ready", "False", "ApplyFailed")
    assert ready["message"] == failed["message"]

    def applies_of_the_refused_child() -> int:
        return sum(
            1
            for event in assertions.operator_requests(control_plane, OPERATOR_USER, namespace)
            if event["verb"] == "patch"
            and (event.get("objectRef") or {}).get("name") == "monocle-sample-api"
            and (event.get("objectRef") or {}).get("resource") == "deployments"
        )

    await wait_until(lambda: applies_of_the_refused_child() >= 3, what="two retries of the refused apply")
    (warning,) = await events_for(kube, namespace, "ApplyFailed")
    assert warning["type"] == "Warning"

    await kube.delete("apps/v1", "Deployment", "monocle-sample-api", namespace)
    # Nothing of ours names the removed object, so the next retry finds it gone: at most the longest
    # back-off step (30 s) later.
    await assertions.wait_for_condition(
        kube, API, "Monocle", "monocle-sample", namespace, "ChildrenApplied", "True", "Applied", timeout=45
    )
    assert len(await events_for(kube, namespace, "ApplyFailed")) == 1
