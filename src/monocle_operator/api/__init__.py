"""The Monocle API: spec and status models, the words of its conditions and Events, and the CRD."""

from monocle_operator.api.tasks import MONOCLE_TASK, MonocleTaskSpec, MonocleTaskStatus
from monocle_operator.api.v1alpha1 import (
    DEFAULT_ELASTIC_IMAGE,
    DEFAULT_IMAGE,
    DEFAULT_OPENSEARCH_IMAGE,
    ENGINE_IMAGES,
    MONOCLE,
    Engine,
    MonocleSpec,
    MonocleStatus,
)

CUSTOM_RESOURCES = [MONOCLE, MONOCLE_TASK]

__all__ = [
    "CUSTOM_RESOURCES",
    "DEFAULT_ELASTIC_IMAGE",
    "DEFAULT_IMAGE",
    "DEFAULT_OPENSEARCH_IMAGE",
    "ENGINE_IMAGES",
    "MONOCLE",
    "MONOCLE_TASK",
    "Engine",
    "MonocleSpec",
    "MonocleStatus",
    "MonocleTaskSpec",
    "MonocleTaskStatus",
]
