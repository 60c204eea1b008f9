"""MonocleTask: its rules, its Job's command line, what its Job says of it, and the config check that
says before any Job what Monocle's janitor would only log."""

from __future__ import annotations

from typing import Any

import pytest

from monocle_operator.api import MONOCLE_TASK
from monocle_operator.controller.task.status import job_verdict
from monocle_operator.resources import Instance, Task, build_task_job, janitor_arguments, task_target_problem
from operator_core.crdgen import crd_manifest
from operator_testkit import cel

SPEC_SCHEMA = crd_manifest(MONOCLE_TASK)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"][
    "spec"
]
WIPE = {"monocle": "m", "command": "WipeCrawlerData", "workspace": "demo", "crawler": "gerrit"}
DATE = {"monocle": "m", "command": "SetCrawlerCommitDate", "workspace": "demo", "crawler": "gerrit"}


@pytest.mark.parametrize(
    ("spec", "allowed"),
    [
        ({"monocle": "m", "command": "UpdateIdents"}, True),
        ({"monocle": "m", "command": "UpdateIdents", "workspace": "demo"}, True),
        ({"monocle": "m", "command": "UpdateIdents", "crawler": "gerrit"}, False),
        (WIPE, True),
        ({**WIPE, "crawler": None}, False),
        ({**WIPE, "commitDate": "2024-01-01"}, False),
        ({**DATE, "commitDate": "2024-01-01"}, True),
        (DATE, False),
    ],
)
def test_what_each_command_needs(spec: dict[str, Any], allowed: bool) -> None:
    present = {key: value for key, value in spec.items() if value is not None}
    rules = [r for r in cel.rules(SPEC_SCHEMA) if "oldSelf" not in r]
    assert all(cel.evaluate(rule, {"self": present}) for rule in rules) is allowed


@pytest.mark.parametrize(
    ("date", "allowed"),
    [
        ("2024-01-31", True),
        ("2024-01-31 12:00:00 UTC", True),
        ("2024-01-31T12:00:00Z", False),
        ("yesterday", False),
    ],
)
def test_the_commit_date_is_as_monocle_reads_it(date: str, allowed: bool) -> None:
    (rule,) = cel.rules(SPEC_SCHEMA["properties"]["commitDate"])
    assert cel.evaluate(rule, {"self": date}) is allowed


def test_a_task_runs_once_so_its_spec_never_changes() -> None:
    (rule,) = [r for r in cel.rules(SPEC_SCHEMA) if "oldSelf" in r]
    assert cel.evaluate(rule, {"self": WIPE, "oldSelf": WIPE})
    assert not cel.evaluate(rule, {"self": {**WIPE, "crawler": "github"}, "oldSelf": WIPE})


def task(spec: dict[str, Any], name: str = "wipe-gerrit") -> Task:
    return Task.from_object(
        {"metadata": {"name": name, "namespace": "metrics", "uid": "task-uid"}, "spec": spec}
    )


@pytest.mark.parametrize(
    ("spec", "arguments"),
    [
        ({"monocle": "m", "command": "UpdateIdents"}, ["update-idents"]),
        (
            {"monocle": "m", "command": "UpdateIdents", "workspace": "demo"},
            ["update-idents", "--workspace", "demo"],
        ),
        (WIPE, ["wipe-crawler-data", "--workspace", "demo", "--crawler-name", "gerrit"]),
        (
            {**DATE, "commitDate": "2024-01-31"},
            [
                "set-crawler-commit-date",
                "--workspace",
                "demo",
                "--crawler-name",
                "gerrit",
                "--commit-date",
                "2024-01-31",
            ],
        ),
    ],
)
def test_the_janitor_gets_monocles_own_flags(spec: dict[str, Any], arguments: list[str]) -> None:
    subcommand, *flags = arguments
    common = ["--elastic", "$(MONOCLE_ELASTIC_URL)", "--config", "/etc/monocle/config.yaml"]
    assert janitor_arguments(task(spec).spec) == ["monocle", "janitor", subcommand, *common, *flags]


def test_the_tasks_job_is_named_after_it_owned_by_it_and_never_retried() -> None:
    instance = Instance.from_object(
        {
            "metadata": {"name": "m", "namespace": "metrics", "uid": "m-uid"},
            "spec": {"image": "monocle:1.9.0"},
        }
    )
    job = build_task_job(task(WIPE), instance)
    assert job["metadata"]["name"] == "wipe-gerrit"
    (owner,) = job["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["uid"]) == ("MonocleTask", "task-uid")
    assert job["metadata"]["labels"]["app.kubernetes.io/instance"] == "wipe-gerrit"
    assert job["spec"]["backoffLimit"] == 0
    assert "ttlSecondsAfterFinished" not in job["spec"], "kept with the task, for its log"
    pod = job["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["image"] == "monocle:1.9.0"
    assert container["terminationMessagePolicy"] == "FallbackToLogsOnError"
    assert {"name": "MONOCLE_ELASTIC_URL", "value": "http://m-elastic:9200"} in container["env"]
    assert pod["volumes"] == [{"name": "config", "configMap": {"name": "m-api"}}]


CONFIG = """workspaces:
  - name: demo
    crawlers:
      - name: gerrit
        provider: {gerrit_url: https://review.example.com}
  - name: openstack
"""


@pytest.mark.parametrize(
    ("workspace", "crawler", "expected"),
    [
        (None, None, None),
        ("demo", None, None),
        ("demo", "gerrit", None),
        (
            "tripleo",
            None,
            ("WorkspaceNotFound", "workspace tripleo is not in config.yaml of ConfigMap m-api"),
        ),
        ("demo", "github", ("CrawlerNotFound", "crawler github is not in workspace demo")),
        ("openstack", "gerrit", ("CrawlerNotFound", "(crawlers: none)")),
    ],
)
def test_a_workspace_or_crawler_not_in_the_config_is_said_before_any_job(
    workspace: str | None, crawler: str | None, expected: tuple[str, str] | None
) -> None:
    problem = task_target_problem(CONFIG, "ConfigMap m-api", workspace, crawler)
    if expected is None:
        assert problem is None
    else:
        assert problem is not None
        assert problem[0] == expected[0]
        assert expected[1] in problem[1], problem


def job(*conditions: dict[str, str]) -> dict[str, Any]:
    return {"metadata": {"name": "wipe-gerrit"}, "status": {"conditions": list(conditions)}}


@pytest.mark.parametrize(
    ("state", "live", "said", "expected"),
    [
        (None, job(), "", ("Running", "Running", "Job wipe-gerrit is running")),
        ("Complete", job(), "", ("Succeeded", "Succeeded", "kubectl logs job/wipe-gerrit")),
        (
            "Failed",
            job({"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}),
            "stand-in: Elasticsearch did not answer in a minute",
            ("Failed", "BackoffLimitExceeded", "is not run again: stand-in: Elasticsearch did not answer"),
        ),
        ("Failed", job(), "", ("Failed", "Failed", "kubectl logs job/wipe-gerrit")),
    ],
)
def test_what_the_job_says_of_the_task(
    state: str | None, live: dict[str, Any], said: str, expected: tuple[str, str, str]
) -> None:
    verdict = job_verdict(live, state, said)
    assert (verdict.phase, verdict.reason) == expected[:2]
    assert expected[2] in verdict.message, verdict.message
