"""Pure builders of the Cluster Stack operator's objects: from a ClusterStack to its ClusterStackReleases
and ProviderClusterStackReleases, and from rendered chart output to the objects to apply. No I/O."""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any

import yaml

from clusterstack_operator.api.v1alpha1 import CLUSTER_STACK_RELEASE
from clusterstack_operator.releases.versions import ReleaseName

__all__ = [
    "InvalidTemplate",
    "build_cluster_stack_release",
    "build_provider_release",
    "owner_reference",
    "provider_reference",
    "rendered_objects",
    "usable_versions",
]

Manifest = dict[str, Any]
TEMPLATE_SUFFIX = "Template"


class InvalidTemplate(ValueError):
    """A ProviderClusterStackReleaseTemplate that does not hold what the provider contract needs."""


def owner_reference(owner: Mapping[str, Any], *, controller: bool = False) -> dict[str, Any]:
    metadata = owner["metadata"]
    reference = {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": metadata["name"],
        "uid": metadata["uid"],
    }
    if controller:
        reference |= {"controller": True, "blockOwnerDeletion": True}
    return reference


def provider_reference(template: Mapping[str, Any], release: ReleaseName, namespace: str) -> dict[str, str]:
    """Where a release's provider object is: the template's kind without its Template suffix."""
    kind = str(template.get("kind", ""))
    if not kind.endswith(TEMPLATE_SUFFIX) or kind == TEMPLATE_SUFFIX:
        raise InvalidTemplate(
            f"spec.providerRef names a {kind}, whose kind does not end in {TEMPLATE_SUFFIX}"
        )
    return {
        "apiVersion": str(template["apiVersion"]),
        "kind": kind.removesuffix(TEMPLATE_SUFFIX),
        "name": release.tag,
        "namespace": namespace,
    }


def build_provider_release(
    template: Mapping[str, Any], stack: Mapping[str, Any], release: ReleaseName
) -> Manifest:
    """The ProviderClusterStackRelease of ``release``: the template's ``spec.template``, named for the
    release, labelled as the template's and the ClusterStack's objects (the stack's win), owned by the
    ClusterStack (the release adds itself as controller once it exists)."""
    inner = (template.get("spec") or {}).get("template")
    if not isinstance(inner, Mapping) or not isinstance(inner.get("spec"), Mapping):
        name = template.get("metadata", {}).get("name")
        raise InvalidTemplate(f"{template.get('kind')} {name} has no spec.template.spec to copy")
    namespace = stack["metadata"]["namespace"]
    reference = provider_reference(template, release, namespace)
    inner_metadata = inner.get("metadata") or {}
    stack_metadata = stack["metadata"]
    return {
        "apiVersion": reference["apiVersion"],
        "kind": reference["kind"],
        "metadata": {
            "name": release.tag,
            "namespace": namespace,
            "labels": {**(inner_metadata.get("labels") or {}), **(stack_metadata.get("labels") or {})},
            "annotations": {
                **(inner_metadata.get("annotations") or {}),
                **_user_annotations(stack_metadata.get("annotations") or {}),
            },
            "ownerReferences": [owner_reference(stack)],
        },
        "spec": copy.deepcopy(dict(inner["spec"])),
    }


def _user_annotations(annotations: Mapping[str, str]) -> dict[str, str]:
    """The stack's own annotations, without what tools write there (kubectl's last-applied copy)."""
    return {k: v for k, v in annotations.items() if not k.startswith("kubectl.kubernetes.io/")}


def build_cluster_stack_release(
    stack: Mapping[str, Any], release: ReleaseName, provider: Mapping[str, str] | None
) -> Manifest:
    """A ClusterStackRelease, owned by its ClusterStack, naming its provider object (none: no provider)."""
    spec: dict[str, Any] = {"providerRef": dict(provider)} if provider is not None else {}
    return {
        "apiVersion": CLUSTER_STACK_RELEASE.api_version,
        "kind": CLUSTER_STACK_RELEASE.kind,
        "metadata": {
            "name": release.tag,
            "namespace": stack["metadata"]["namespace"],
            "labels": {"clusterstack.x-k8s.io/cluster-stack": stack["metadata"]["name"]},
            "ownerReferences": [owner_reference(stack, controller=True)],
        },
        "spec": spec,
    }


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
