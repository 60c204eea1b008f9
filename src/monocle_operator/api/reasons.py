"""The words a user sees: condition types, condition reasons and Event reasons of the Monocle operator."""

from __future__ import annotations

from enum import StrEnum

from operator_core.children import CHILDREN_APPLIED

__all__ = ["ConditionType", "EventReason"]


class ConditionType(StrEnum):
    READY = "Ready"
    """Every other condition is True: Monocle is up and its configuration was taken."""
    ELASTIC_READY = "ElasticReady"
    """The search engine's pod (Elasticsearch or OpenSearch) is ready."""
    ENGINE_HEALTHY = "EngineHealthy"
    """The engine's cluster health is green or yellow (its reason says which; yellow is a single node's
    normal state); False when red, naming the red indices."""
    API_READY = "ApiReady"
    """The API Deployment has an available, up-to-date pod."""
    CRAWLER_READY = "CrawlerReady"
    """The crawler Deployment has an available, up-to-date pod."""
    CONFIG_VALID = "ConfigValid"
    """config.yaml exists, parses, and names only valid workspaces."""
    CHILDREN_APPLIED = CHILDREN_APPLIED
    """Every child object was applied on the last reconcile (set by the shared apply-report-prune step)."""


class EventReason(StrEnum):
    """The operator's own Event reasons; the children's (Created, Updated, Deleted, ApplyFailed) are
    every operator's: :class:`operator_core.children.StepEventReason`."""

    SECRET_GENERATED = "SecretGenerated"  # noqa: S105 (a reason word, not a password)
    SECRET_MISSING = "SecretMissing"  # noqa: S105 (a reason word, not a password)
    INVALID_CONFIG = "InvalidConfig"
    UPDATE_IDENTS_STARTED = "UpdateIdentsStarted"
    STORAGE_EXPANDED = "StorageExpanded"
    STORAGE_NOT_EXPANDABLE = "StorageNotExpandable"
    ENGINE_CHANGED = "EngineChanged"
    ENGINE_RED = "EngineRed"
    TASK_STARTED = "TaskStarted"
    TASK_SUCCEEDED = "TaskSucceeded"
    TASK_FAILED = "TaskFailed"
    READY = "Ready"
    NOT_READY = "NotReady"
