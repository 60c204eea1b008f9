"""MonocleTask, version v1alpha1: one janitor command of Monocle, declared as an object and run once.

Monocle's README has its users run ``monocle janitor`` by hand (``update-idents``,
``wipe-crawler-data``, ``set-crawler-commit-date``). A MonocleTask names the instance and the command;
the operator runs it once as a Job of the instance's image, config and engine, and says in the
status how it went. Its spec cannot change: another run is another task.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import ConfigDict, Field

from monocle_operator.api.v1alpha1 import GROUP, VERSION
from operator_core.apimodel import ApiModel, cel
from operator_core.conditions import Condition
from operator_core.crdgen import CustomResource, PrinterColumn

__all__ = ["MONOCLE_TASK", "MonocleTaskSpec", "MonocleTaskStatus", "TaskCommand", "TaskPhase"]

TaskCommand = Literal["UpdateIdents", "WipeCrawlerData", "SetCrawlerCommitDate"]
TaskPhase = Literal["Pending", "Running", "Succeeded", "Failed"]
# What Monocle's janitor parses (Monocle.Backend.Janitor): a day, or a day and a UTC time.
_COMMIT_DATE = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}( [0-9]{2}:[0-9]{2}:[0-9]{2} UTC)?$"


class MonocleTaskSpec(ApiModel):
    """One janitor command, run once against a Monocle instance's engine with its config."""

    monocle: str = Field(min_length=1, max_length=253)
    """Name of the Monocle instance, in this namespace, whose image, config.yaml and engine the command
    uses."""
    command: TaskCommand
    """UpdateIdents (apply config.yaml's identities to what is indexed), WipeCrawlerData (remove what
    a crawler fetched), or SetCrawlerCommitDate (make a crawler start again from a date)."""
    workspace: str | None = Field(default=None, min_length=1, max_length=255)
    """The workspace of config.yaml. UpdateIdents: every workspace when unset; the others need one."""
    crawler: str | None = Field(default=None, min_length=1, max_length=255)
    """The crawler's name in the workspace: for WipeCrawlerData and SetCrawlerCommitDate."""
    commit_date: str | None = Field(
        default=None,
        json_schema_extra=cel(
            (
                f"self.matches('{_COMMIT_DATE}')",
                "commitDate must be YYYY-MM-DD or YYYY-MM-DD hh:mm:ss UTC, as Monocle reads it",
            )
        ),
    )
    """For SetCrawlerCommitDate: the date the crawler fetches from again, YYYY-MM-DD or
    YYYY-MM-DD hh:mm:ss UTC."""

    model_config = ConfigDict(
        json_schema_extra=cel(
            ("self == oldSelf", "a MonocleTask runs once: its spec cannot change; create another task"),
            (
                "self.command == 'UpdateIdents' || (has(self.workspace) && has(self.crawler))",
                "WipeCrawlerData and SetCrawlerCommitDate need spec.workspace and spec.crawler",
            ),
            (
                "self.command != 'UpdateIdents' || !has(self.crawler)",
                "UpdateIdents takes no spec.crawler: it applies the identities of a workspace, or of all",
            ),
            (
                "(self.command == 'SetCrawlerCommitDate') == has(self.commitDate)",
                "spec.commitDate goes with SetCrawlerCommitDate, and only with it",
            ),
        )
    )


class MonocleTaskStatus(ApiModel):
    """How the task went, written by the operator."""

    phase: TaskPhase | None = None
    """Pending (waiting for its instance's engine), Running, Succeeded or Failed; the last two are final."""
    job: str | None = None
    """The Job that runs the command (kubectl logs job/NAME shows what Monocle said)."""
    start_time: datetime | None = None
    """When the Job was created."""
    completion_time: datetime | None = None
    """When the task ended."""
    message: str | None = None
    """The outcome in a sentence."""
    conditions: list[Condition] | None = Field(
        default=None,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
    )
    """Complete: True once it succeeded, False with the reason while it waits or when it failed."""
    observed_generation: int | None = None
    """The .metadata.generation the status was last computed from."""


MONOCLE_TASK = CustomResource(
    group=GROUP,
    version=VERSION,
    kind="MonocleTask",
    plural="monocletasks",
    spec_model=MonocleTaskSpec,
    status_model=MonocleTaskStatus,
    description="One janitor command of a Monocle instance (update-idents, wipe-crawler-data, "
    "set-crawler-commit-date), run once as a Job.",
    categories=("monocle",),
    printer_columns=(
        PrinterColumn("Monocle", ".spec.monocle", description="The instance"),
        PrinterColumn("Command", ".spec.command", description="The janitor command"),
        PrinterColumn("Workspace", ".spec.workspace", description="The workspace (all when empty)"),
        PrinterColumn("Phase", ".status.phase", description="Pending, Running, Succeeded or Failed"),
        PrinterColumn("Job", ".status.job", description="The Job that runs it", priority=1),
        PrinterColumn("Message", ".status.message", description="The outcome", priority=1),
        PrinterColumn("Age", ".metadata.creationTimestamp", "date"),
    ),
    # The Job is named after the task, and a Job's name becomes a pod label value (63 at most).
    validations=(
        {
            "rule": "size(self.metadata.name) <= 63",
            "message": "metadata.name must be at most 63 characters: the task's Job is named after it",
        },
    ),
)
