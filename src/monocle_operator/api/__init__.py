"""The Monocle API: spec and status models, the words of its conditions and Events, and the CRD."""

from monocle_operator.api.v1alpha1 import (
    CUSTOM_RESOURCES,
    DEFAULT_ELASTIC_IMAGE,
    DEFAULT_IMAGE,
    DEFAULT_OPENSEARCH_IMAGE,
    ENGINE_IMAGES,
    MONOCLE,
    Engine,
    MonocleSpec,
    MonocleStatus,
)

__all__ = [
    "CUSTOM_RESOURCES",
    "DEFAULT_ELASTIC_IMAGE",
    "DEFAULT_IMAGE",
    "DEFAULT_OPENSEARCH_IMAGE",
    "ENGINE_IMAGES",
    "MONOCLE",
    "Engine",
    "MonocleSpec",
    "MonocleStatus",
]
