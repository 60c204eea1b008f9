"""Pure builders of the Cluster Stack operator's objects: from a ClusterStack to its ClusterStackReleases
and ProviderClusterStackReleases, from rendered chart output to the objects to apply, and the status
both report. No I/O."""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from clusterstack_operator.api.reasons import ConditionType
from clusterstack_operator.api.v1alpha1 import (
    CAPI_CONDITIONS,
    CLUSTER_ADDON,
    CLUSTER_STACK,
    CLUSTER_STACK_RELEASE,
    ClusterAddonSpec,
    ClusterStackReleaseSpec,
    ClusterStackSpec,
    ReleaseSourceSpec,
)
from clusterstack_operator.releases.decide import StackIdentity
from clusterstack_operator.releases.versions import Channel, ReleaseName
from operator_core.children import INSTANCE_LABEL, MANAGED_BY_LABEL, Owner
from operator_core.conditions import find

__all__ = [
    "MANAGED_BY",
    "Addon",
    "InvalidTemplate",
    "Release",
    "Stack",
    "addon_objects",
    "applied_objects",
    "build_cluster_addon",
    "build_cluster_stack_release",
    "build_provider_release",
    "check_template",
    "cluster_addon_name",
    "provider_reference",
    "release_summary",
    "rendered_objects",
    "source_key",
    "source_key_of",
    "usable_versions",
]

Manifest = dict[str, Any]
TEMPLATE_SUFFIX = "Template"
MANAGED_BY = "cluster-stack-operator"
STACK_LABEL = "clusterstack.x-k8s.io/cluster-stack"
"""On a ClusterStackRelease: the ClusterStack it belongs to."""
ADDON_LABEL = "clusterstack.x-k8s.io/cluster-addon"
"""On every object applied in a workload cluster: the ClusterAddon (in the management cluster) it is of."""
CLUSTER_NAME_LABEL = "cluster.x-k8s.io/cluster-name"
"""Cluster API's label for what belongs to one Cluster: on a ClusterAddon, its Cluster."""
SOURCE_ANNOTATION = "clusterstack.x-k8s.io/release-source"
"""On a ClusterStackRelease of a stack with its own ``spec.source``: that source's key
(:func:`source_key`), under which its downloaded assets are kept. Absent: the operator's own source.
It grants nothing: the operator finds a release's downloads through its stack's credentials."""


def source_key(source: ReleaseSourceSpec | None) -> str:
    """Where a source's downloads are kept, apart from every other source's: "" for the operator's own,
    else its kind and a hash of where it is. Two sources may publish the same tag with different
    contents (a fork, say); their downloads must never be taken for each other's. Below it, each
    identity reading the source keeps its own downloads
    (:func:`clusterstack_operator.controller.stack_sources.identity_key`): this key says where, never
    who may have them."""
    if source is None:
        return ""
    if source.oci is not None:
        kind, where = "oci", f"{'http' if source.oci.plain_http else 'https'}://{source.oci.repository}"
    else:
        assert source.github is not None  # the CRD requires one of the two
        github = source.github
        kind, where = "github", f"{github.api_url or ''}/{github.organization}/{github.repository}"
    return f"{kind}-{hashlib.sha256(where.encode()).hexdigest()[:16]}"


def source_key_of(release: Mapping[str, Any]) -> str:
    """The source key a ClusterStackRelease was made with ("" without one: the operator's own source)."""
    return str(((release.get("metadata") or {}).get("annotations") or {}).get(SOURCE_ANNOTATION, ""))


class InvalidTemplate(ValueError):
    """A ProviderClusterStackReleaseTemplate that does not hold what the provider contract needs."""


@dataclass(frozen=True)
class Stack(Owner[ClusterStackSpec]):
    """One ClusterStack."""

    resource = CLUSTER_STACK
    app = "cluster-stack"
    managed_by = MANAGED_BY

    @property
    def identity(self) -> StackIdentity:
        return StackIdentity(
            self.spec.provider, self.spec.name, self.spec.kubernetes_version, Channel(self.spec.channel)
        )


@dataclass(frozen=True)
class Release(Owner[ClusterStackReleaseSpec]):
    """One ClusterStackRelease; its name is the release's tag."""

    resource = CLUSTER_STACK_RELEASE
    app = "cluster-stack-release"
    managed_by = MANAGED_BY

    @property
    def release(self) -> ReleaseName:
        return ReleaseName.parse(self.name)


@dataclass(frozen=True)
class Addon(Owner[ClusterAddonSpec]):
    """One ClusterAddon."""

    resource = CLUSTER_ADDON
    app = "cluster-addon"
    managed_by = MANAGED_BY


def _managed(labels: Mapping[str, str], instance: str) -> dict[str, str]:
    """``labels``, with the two that the operator's watches select on and wake ``instance`` by."""
    return {**labels, MANAGED_BY_LABEL: MANAGED_BY, INSTANCE_LABEL: instance}


def _plain_owner(owner: Owner[Any]) -> dict[str, Any]:
    """An owner reference that does not make ``owner`` the controller."""
    return {k: v for k, v in owner.owner_reference().items() if k not in ("controller", "blockOwnerDeletion")}


def check_template(template: Mapping[str, Any]) -> None:
    """Raise :class:`InvalidTemplate` unless ``template`` holds what the provider contract needs: a kind
    ending in Template, and a ``spec.template.spec`` to copy."""
    kind = str(template.get("kind", ""))
    if not kind.endswith(TEMPLATE_SUFFIX) or kind == TEMPLATE_SUFFIX:
        raise InvalidTemplate(
            f"spec.providerRef names a {kind}, whose kind does not end in {TEMPLATE_SUFFIX}"
        )
    inner = (template.get("spec") or {}).get("template")
    if not isinstance(inner, Mapping) or not isinstance(inner.get("spec"), Mapping):
        name = template.get("metadata", {}).get("name")
        raise InvalidTemplate(f"{kind} {name} has no spec.template.spec to copy")


def provider_reference(template: Mapping[str, Any], release: ReleaseName, namespace: str) -> dict[str, str]:
    """Where a release's provider object is: the template's kind without its Template suffix."""
    check_template(template)
    kind = str(template["kind"])
    return {
        "apiVersion": str(template["apiVersion"]),
        "kind": kind.removesuffix(TEMPLATE_SUFFIX),
        "name": release.tag,
        "namespace": namespace,
    }


def build_provider_release(
    template: Mapping[str, Any], stack: Mapping[str, Any], release: Release
) -> Manifest:
    """The ProviderClusterStackRelease of ``release``: the template's ``spec.template``, named for the
    release, labelled as the template's and the ClusterStack's objects (the stack's win), owned by the
    ClusterStack and controlled by the ClusterStackRelease, whose changes it wakes."""
    namespace = stack["metadata"]["namespace"]
    reference = provider_reference(template, release.release, namespace)  # checks the template
    inner = template["spec"]["template"]
    inner_metadata = inner.get("metadata") or {}
    stack_metadata = stack["metadata"]
    labels = {**(inner_metadata.get("labels") or {}), **(stack_metadata.get("labels") or {})}
    return {
        "apiVersion": reference["apiVersion"],
        "kind": reference["kind"],
        "metadata": {
            "name": release.name,
            "namespace": namespace,
            "labels": _managed(labels, release.name),
            "annotations": {
                **(inner_metadata.get("annotations") or {}),
                **_user_annotations(stack_metadata.get("annotations") or {}),
            },
            "ownerReferences": [
                _plain_owner(Stack.from_object(stack)),
                release.owner_reference(),
            ],
        },
        "spec": copy.deepcopy(dict(inner["spec"])),
    }


def _user_annotations(annotations: Mapping[str, str]) -> dict[str, str]:
    """The stack's own annotations, without what tools write there (kubectl's last-applied copy)."""
    return {k: v for k, v in annotations.items() if not k.startswith("kubectl.kubernetes.io/")}


def build_cluster_stack_release(
    stack: Stack, release: ReleaseName, provider: Mapping[str, str] | None
) -> Manifest:
    """A ClusterStackRelease, owned by its ClusterStack, naming its provider object (none: no provider)."""
    spec: dict[str, Any] = {"providerRef": dict(provider)} if provider is not None else {}
    return {
        "apiVersion": CLUSTER_STACK_RELEASE.api_version,
        "kind": CLUSTER_STACK_RELEASE.kind,
        "metadata": {
            "name": release.tag,
            "namespace": stack.namespace,
            "labels": _managed({STACK_LABEL: stack.name}, stack.name),
            **({"annotations": {SOURCE_ANNOTATION: key}} if (key := source_key(stack.spec.source)) else {}),
            "ownerReferences": [stack.owner_reference()],
        },
        "spec": spec,
    }


def cluster_addon_name(cluster: str) -> str:
    """The one ClusterAddon of a Cluster, named as upstream names it."""
    return f"cluster-addon-{cluster}"


def build_cluster_addon(cluster: Mapping[str, Any], stack: Stack) -> Manifest:
    """The ClusterAddon of ``cluster`` (as read, in whichever version), whose ClusterClass is a release of
    ``stack``: owned and controlled by the Cluster (deleting the Cluster collects it), referring to it,
    and labelled so that its deletion wakes the stack, which makes it again while the Cluster lives.

    Only ``spec.clusterRef`` is set: the rest of the spec is the ClusterAddon controller's to write."""
    metadata = cluster["metadata"]
    name, namespace = metadata["name"], metadata["namespace"]
    reference = {"apiVersion": cluster["apiVersion"], "kind": "Cluster", "name": name, "uid": metadata["uid"]}
    return {
        "apiVersion": CLUSTER_ADDON.api_version,
        "kind": CLUSTER_ADDON.kind,
        "metadata": {
            "name": cluster_addon_name(name),
            "namespace": namespace,
            "labels": _managed({CLUSTER_NAME_LABEL: name, STACK_LABEL: stack.name}, stack.name),
            "ownerReferences": [{**reference, "controller": True, "blockOwnerDeletion": True}],
        },
        "spec": {"clusterRef": {**reference, "namespace": namespace}},
    }


_APPLIED_FIRST = {"CustomResourceDefinition": 0, "Namespace": 1}


def addon_objects(rendered: Sequence[Manifest], addon: str) -> list[Manifest]:
    """A cluster-addon chart's objects as they are applied in the workload cluster: labelled as ours and
    as ``addon``'s, CRDs first and Namespaces next (nothing before the kind or namespace it needs), the
    rest in the chart's order."""
    labelled = []
    for obj in rendered:
        metadata = dict(obj.get("metadata") or {})
        metadata["labels"] = {
            **(metadata.get("labels") or {}),
            MANAGED_BY_LABEL: MANAGED_BY,
            ADDON_LABEL: addon,
        }
        labelled.append({**obj, "metadata": metadata})
    return sorted(labelled, key=lambda o: _APPLIED_FIRST.get(str(o.get("kind")), 2))


def usable_versions(ready: Iterable[ReleaseName]) -> str:
    """``status.usableVersions``: the ready versions in dot form, comma-separated: those with an order
    oldest first, then hash versions (which have none) as given."""
    releases = list(ready)
    ordered = sorted((r for r in releases if r.version.ordered), key=lambda r: r.version.sort_key())
    return ", ".join(r.version.dot for r in [*ordered, *(r for r in releases if not r.version.ordered)])


def rendered_objects(rendered: str, namespace: str) -> list[Manifest]:
    """The objects of ``helm template`` output, each in ``namespace`` unless it names its own (the
    applier drops it again for a cluster-scoped kind); empty documents skipped. Raises
    :class:`yaml.YAMLError` for output that is not YAML."""
    objects = []
    for document in yaml.safe_load_all(rendered):
        if not isinstance(document, dict) or not document.get("kind"):
            continue
        metadata = document.setdefault("metadata", {})
        metadata.setdefault("namespace", namespace)
        objects.append(document)
    return objects


def applied_objects(rendered: Sequence[Manifest], release: Release) -> list[Manifest]:
    """The chart's objects as they are applied: labelled so that a change to one wakes its release
    (drift is repaired at once), and owned by the release (not as its controller: Cluster API may
    take that role for a template)."""
    applied = []
    for obj in rendered:
        metadata = dict(obj.get("metadata") or {})
        metadata["labels"] = _managed(metadata.get("labels") or {}, release.name)
        metadata["ownerReferences"] = [*(metadata.get("ownerReferences") or []), _plain_owner(release)]
        applied.append({**obj, "metadata": metadata})
    return applied


def release_summary(release: Mapping[str, Any]) -> dict[str, Any]:
    """One ``status.summary`` entry for a ClusterStackRelease, with upstream's phases."""
    name = ReleaseName.parse(release["metadata"]["name"])
    status = release.get("status") or {}
    conditions = CAPI_CONDITIONS.read(release)
    ready = find(conditions, ConditionType.READY)
    if status.get("ready"):
        return {"name": name.version.dash, "ready": True, "phase": "done", "message": ""}
    message = ready.message or ready.reason if ready is not None and ready.status == "False" else ""

    def true(condition_type: str) -> bool:
        found = find(conditions, condition_type)
        return found is not None and found.status == "True"

    if true(ConditionType.PROVIDER_READY):
        phase = "applying objects"
    elif true(ConditionType.DOWNLOADED):
        phase = "provider-specific work"
    elif find(conditions, ConditionType.DOWNLOADED) is not None:
        phase = "downloading release assets"
    else:
        phase = ""
    return {"name": name.version.dash, "ready": False, "phase": phase, "message": message}
