"""Every validation rule of Monocle is enforced by the API server, with a message that says a fix."""

from __future__ import annotations

import re
from typing import Any

import pytest

from operator_core.errors import Invalid
from operator_core.kube import Kube

pytestmark = pytest.mark.usefixtures("installed_crds")

API = "monocle.monocle.change-metrics.io/v1alpha1"


def monocle(namespace: str, name: str = "m1", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "Monocle",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"monoclePublicURL": "monocle.example.com"}, "monoclePublicURL must start with http:// or https://"),
        ({"elastic": {"javaHeap": "512"}}, "elastic.javaHeap must be a JVM heap size"),
        ({"elastic": {"storageSize": "a lot"}}, "elastic.storageSize must be a Kubernetes quantity"),
        ({"image": ""}, "spec.image in body should be at least 1 chars long"),
        ({"ingress": {}}, "spec.ingress.host: Required value"),
    ],
)
async def test_invalid_spec_is_refused_with_a_readable_message(
    kube: Kube, namespace: str, spec: dict[str, Any], message: str
) -> None:
    with pytest.raises(Invalid, match=re.escape(message)):
        await kube.create(monocle(namespace, **spec))


async def test_defaults_are_filled_by_the_api_server(kube: Kube, namespace: str) -> None:
    created = await kube.create(monocle(namespace))
    assert created["spec"]["monoclePublicURL"] == "http://localhost:8090"
    # The engine's image is left unset: each engine has its own (ENGINE_IMAGES).
    assert created["spec"]["elastic"] == {"engine": "Elasticsearch", "storageSize": "1Gi", "javaHeap": "512m"}


async def test_name_too_long_for_the_job_is_refused(kube: Kube, namespace: str) -> None:
    with pytest.raises(Invalid, match=re.escape("metadata.name must be at most 38 characters")):
        await kube.create(monocle(namespace, name="a" * 39))


async def test_storage_may_grow_but_not_shrink_and_its_class_is_fixed(kube: Kube, namespace: str) -> None:
    await kube.apply(monocle(namespace, elastic={"storageClassName": "fast", "storageSize": "2Gi"}))
    await kube.apply(monocle(namespace, elastic={"storageClassName": "fast", "storageSize": "3Gi"}))
    with pytest.raises(Invalid, match=re.escape("elastic.storageSize cannot shrink")):
        await kube.apply(monocle(namespace, elastic={"storageClassName": "fast", "storageSize": "1Gi"}))
    with pytest.raises(Invalid, match=r"elastic\.storageClassName is fixed once the volume exists"):
        await kube.apply(monocle(namespace, elastic={"storageClassName": "slow", "storageSize": "3Gi"}))
    with pytest.raises(Invalid, match=r"elastic\.storageClassName is fixed"):
        await kube.apply(monocle(namespace, elastic={"storageSize": "3Gi"}))


async def test_a_change_of_engine_is_refused_until_the_spec_says_how_the_data_moves(
    kube: Kube, namespace: str
) -> None:
    elastic_image = "docker.elastic.co/elasticsearch/elasticsearch:7.17.5"
    # As an instance made before the engine could be chosen: its image stored.
    await kube.apply(monocle(namespace, elastic={"image": elastic_image}))
    with pytest.raises(
        Invalid, match=re.escape("elastic.engine cannot change without elastic.onEngineChange")
    ):
        await kube.apply(monocle(namespace, elastic={"engine": "OpenSearch", "image": elastic_image}))
    with pytest.raises(Invalid, match=re.escape("elastic.image names the old engine's image")):
        await kube.apply(
            monocle(
                namespace,
                elastic={"engine": "OpenSearch", "onEngineChange": "Recrawl", "image": elastic_image},
            )
        )
    with pytest.raises(Invalid, match="Unsupported value"):
        await kube.apply(monocle(namespace, elastic={"engine": "Solr", "onEngineChange": "Recrawl"}))
    changed = await kube.apply(
        monocle(namespace, elastic={"engine": "OpenSearch", "onEngineChange": "Recrawl"})
    )
    assert changed.object["spec"]["elastic"]["engine"] == "OpenSearch"
    assert "image" not in changed.object["spec"]["elastic"]
