"""The Kubernetes adapter against the real API server: quiet applies, custom kinds, status, Events, errors."""

from __future__ import annotations

import json
from enum import StrEnum
from pathlib import Path
from typing import Any

import pytest

from operator_core.errors import KubeError, NotFound, Retry, Unavailable, retry_policy
from operator_core.events import EventRecorder
from operator_core.kube import APPLIED_HASH_ANNOTATION, Kube
from operator_core.manifests import LEGACY_APPLIED_HASH_ANNOTATION, with_applied_hash
from operator_core.secrets import register_secret
from operator_testkit.controlplane import ControlPlane


def configmap(namespace: str, labels: dict[str, str], **data: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "settings", "namespace": namespace, "labels": labels},
        "data": dict(data),
    }


WRITE_VERBS = {"create", "update", "patch", "delete", "deletecollection"}


async def test_unchanged_apply_makes_no_write_call(
    kube: Kube, namespace: str, control_plane: ControlPlane
) -> None:
    desired = configmap(namespace, {"app": "a"}, key="value")
    first = await kube.apply(desired)
    assert first.written
    writes = kube.write_calls
    seen = len(control_plane.audit_events())
    second = await kube.apply(desired)
    assert not second.written
    assert kube.write_calls == writes
    # The API server's own audit log agrees: one read, no write. (Only requests for this object:
    # the controller-manager fills a new namespace with its own ConfigMap and ServiceAccount.)
    name = desired["metadata"]["name"]
    requests = [
        e
        for e in control_plane.audit_events()[seen:]
        if (e.get("objectRef", {}).get("namespace"), e.get("objectRef", {}).get("name")) == (namespace, name)
    ]
    assert [e["verb"] for e in requests] == ["get"]
    assert not [e for e in requests if e["verb"] in WRITE_VERBS]
    assert second.object["metadata"]["resourceVersion"] == first.object["metadata"]["resourceVersion"]
    assert APPLIED_HASH_ANNOTATION in second.object["metadata"]["annotations"]


async def test_children_an_older_version_stamped_are_left_alone_then_move_to_the_one_domain(
    kube: Kube, namespace: str, control_plane: ControlPlane, tmp_path: Path
) -> None:
    """What an upgraded operator meets: children applied by the same field manager with the hash under
    operator-suite.dev. Nothing is written for them until they change; then the old key goes."""
    desired = configmap(namespace, {"app": "a"}, key="value")
    older = with_applied_hash(desired)
    annotations = older["metadata"]["annotations"]
    annotations[LEGACY_APPLIED_HASH_ANNOTATION] = annotations.pop(APPLIED_HASH_ANNOTATION)
    manifest = tmp_path / "older.json"
    manifest.write_text(json.dumps(older))
    control_plane.kubectl(
        "apply", "--server-side", f"--field-manager={kube.field_manager}", "-f", str(manifest)
    )
    writes = kube.write_calls
    assert not (await kube.apply(desired)).written
    assert kube.write_calls == writes
    changed = await kube.apply(configmap(namespace, {"app": "a"}, key="changed"))
    assert changed.written
    assert APPLIED_HASH_ANNOTATION in changed.object["metadata"]["annotations"]
    assert LEGACY_APPLIED_HASH_ANNOTATION not in changed.object["metadata"]["annotations"]


async def test_dropped_label_is_removed_by_the_next_apply(kube: Kube, namespace: str) -> None:
    await kube.apply(configmap(namespace, {"app": "a", "tier": "x"}, key="value"))
    result = await kube.apply(configmap(namespace, {"app": "a"}, key="value"))
    assert result.written
    assert result.object["metadata"]["labels"] == {"app": "a"}


async def test_drift_by_another_writer_is_corrected(
    kube: Kube, namespace: str, control_plane: ControlPlane
) -> None:
    desired = configmap(namespace, {"app": "a"}, key="value")
    await kube.apply(desired)
    async with Kube.connect(control_plane.kubeconfig, field_manager="someone-else") as other:
        await other.apply(configmap(namespace, {}, key="edited"), force=True)
    corrected = await kube.apply(desired)
    assert corrected.written
    assert corrected.object["data"]["key"] == "value"


@pytest.mark.usefixtures("installed_crds")
async def test_custom_kind_apply_and_status_patch(kube: Kube, namespace: str) -> None:
    cluster = {
        "apiVersion": "ts.opentelekomcloud.com/v1alpha1",
        "kind": "TypesenseCluster",
        "metadata": {"name": "c1", "namespace": namespace},
        "spec": {"image": "typesense/typesense:27.1"},
    }
    applied = await kube.apply(cluster)
    assert applied.object["spec"]["replicas"] == 3
    assert not (await kube.apply(cluster)).written
    patched = await kube.patch_status(
        "ts.opentelekomcloud.com/v1alpha1", "TypesenseCluster", "c1", namespace, {"phase": "Bootstrapping"}
    )
    assert patched["status"]["phase"] == "Bootstrapping"


async def test_missing_objects(kube: Kube, namespace: str) -> None:
    assert await kube.get("v1", "ConfigMap", "absent", namespace) is None
    assert await kube.delete("v1", "ConfigMap", "absent", namespace) is False
    with pytest.raises(NotFound, match="not served"):
        await kube.served_kind("example.dev/v1", "NoSuchKind")


class SmokeReason(StrEnum):
    Configured = "Configured"


async def test_events_are_posted_with_scrubbed_notes(kube: Kube, namespace: str) -> None:
    target = await kube.apply(configmap(namespace, {}, key="value"))
    register_secret("hunter2-very-secret")
    recorder = EventRecorder(kube, controller="operator-suite.dev/smoke")
    await recorder.emit(target.object, "Normal", SmokeReason.Configured, "used key hunter2-very-secret")
    (event,) = await kube.list("events.k8s.io/v1", "Event", namespace)
    assert event["reason"] == "Configured"
    assert event["regarding"]["name"] == "settings"
    assert "hunter2-very-secret" not in event["note"]
    assert "[REDACTED]" in event["note"]


async def test_the_pod_proxy_is_reached_with_the_kubeconfigs_own_server_and_credentials(
    kube: Kube, namespace: str
) -> None:
    """The API server answers for the pod (it does not exist), so the client reached it and was let in."""
    code, body = await kube.proxy_get(namespace, "no-such-pod", 8108, "/health", headers={}, timeout=5)
    assert code == 404
    assert b"no-such-pod" in body
    # A POST (a snapshot request) goes the same way.
    path = "/operations/snapshot?snapshot_path=/x"
    code, body = await kube.proxy("POST", namespace, "no-such-pod", 8108, path, headers={}, timeout=5)
    assert code == 404
    assert b"no-such-pod" in body


async def test_no_answer_at_all_is_unavailable_and_temporary(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:9', insecure-skip-tls-verify: true}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\n"
    )
    async with Kube.connect(kubeconfig, timeout=2) as nowhere:
        with pytest.raises(Unavailable, match="no answer from the API server") as proxied:
            await nowhere.proxy_get("ns", "pod", 8108, "/health", headers={}, timeout=2)
        with pytest.raises(Unavailable) as read:
            await nowhere.get("v1", "ConfigMap", "settings", "ns")
    for error in (proxied.value, read.value):
        assert retry_policy(error) is Retry.BACK_OFF


def exec_plugin(script: Path, token: str) -> dict[str, Any]:
    """A kubeconfig user whose credential plugin prints the token the shell word ``token`` gives at each
    run, and notes each run in ``<script>.runs``."""
    script.write_text(
        "#!/bin/sh\n"
        f"echo run >> {script.with_suffix('.runs')}\n"
        'printf \'{"apiVersion": "client.authentication.k8s.io/v1beta1", "kind": "ExecCredential", '
        f'"status": {{"token": "%s"}}}}\' "{token}"\n'
    )
    script.chmod(0o700)
    return {"exec": {"apiVersion": "client.authentication.k8s.io/v1beta1", "command": str(script)}}


@pytest.mark.parametrize("credentials", ["token file", "exec plugin"])
async def test_a_refused_credential_says_so_and_a_renewed_one_is_taken_without_a_restart(
    kube: Kube, namespace: str, control_plane: ControlPlane, tmp_path: Path, credentials: str
) -> None:
    """The kubelet rotates a token file, and an exec plugin's token expires: after a 401 the client
    reads the file or runs the plugin again, and tries once more."""
    await kube.apply(
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": "rotating", "namespace": namespace},
        }
    )
    granted = await kube.create_subresource(
        "v1",
        "ServiceAccount",
        "rotating",
        namespace,
        "token",
        {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": 600},
        },
    )
    token_file = tmp_path / "token"
    token_file.write_text("not-a-token")
    user = (
        {"tokenFile": str(token_file)}
        if credentials == "token file"
        else exec_plugin(tmp_path / "rotating.sh", f"$(cat {token_file})")
    )
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(control_plane.kubeconfig_text(user))
    review = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    async with Kube.connect(kubeconfig, timeout=5) as rotating:
        with pytest.raises(KubeError, match="Unauthorized") as refused:
            await rotating.create(review)
        assert refused.value.status == 401
        token_file.write_text(granted["status"]["token"])
        who = await rotating.create(review)
    assert who["status"]["userInfo"]["username"] == f"system:serviceaccount:{namespace}:rotating"


async def test_a_plugin_whose_every_token_is_refused_is_asked_once_more_not_forever(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    user = exec_plugin(tmp_path / "minting.sh", "minted-$(date +%s%N)")
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(control_plane.kubeconfig_text(user))
    async with Kube.connect(kubeconfig, timeout=5) as refused:
        with pytest.raises(KubeError, match="Unauthorized") as error:
            await refused.list("v1", "ConfigMap", "default")
    assert error.value.status == 401
    runs = (tmp_path / "minting.runs").read_text().split()
    assert runs == ["run", "run"]  # its first token, and one more after the 401
