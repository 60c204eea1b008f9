"""Helm hooks in a rendered addon chart, read and ordered as Helm 3 (v3.20 to v3.22) runs them."""

from __future__ import annotations

from typing import Any

import pytest

from clusterstack_operator.controller.helm_hooks import HookRun
from clusterstack_operator.releases.hooks import (
    DeletePolicy,
    HookEvent,
    HookState,
    deleted_after,
    events_of,
    hook_events,
    hooks_for,
    judge_hook,
    split_hooks,
)

pytestmark = pytest.mark.unit


def obj(kind: str, name: str, **annotations: str) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name}
    if annotations:
        metadata["annotations"] = {
            f"helm.sh/{key.replace('_', '-')}": value for key, value in annotations.items()
        }
    return {"apiVersion": "v1", "kind": kind, "metadata": metadata}


def test_objects_without_the_hook_annotation_are_ordinary_and_keep_their_order() -> None:
    chart = split_hooks(
        [obj("ConfigMap", "b"), obj("Job", "migrate", hook="pre-install"), obj("Service", "a")]
    )
    assert [o["metadata"]["name"] for o in chart.ordinary] == ["b", "a"]
    (hook,) = chart.hooks
    assert hook.events == (HookEvent.PRE_INSTALL,)
    assert hook.weight == 0
    assert hook.delete_policies == {DeletePolicy.BEFORE_HOOK_CREATION}, "Helm's default"


@pytest.mark.parametrize(
    ("annotations", "events", "weight", "policies"),
    [
        ({"hook": "pre-install,post-install"}, ("pre-install", "post-install"), 0, {"before-hook-creation"}),
        (
            {"hook": " Pre-Upgrade , pre-install "},
            ("pre-upgrade", "pre-install"),
            0,
            {"before-hook-creation"},
        ),
        ({"hook": "post-install", "hook_weight": "-5"}, ("post-install",), -5, {"before-hook-creation"}),
        ({"hook": "post-install", "hook_weight": "heavy"}, ("post-install",), 0, {"before-hook-creation"}),
        (
            {"hook": "pre-install", "hook_delete_policy": "hook-succeeded,hook-failed"},
            ("pre-install",),
            0,
            {"hook-succeeded", "hook-failed"},
        ),
        ({"hook": "test-success"}, ("test",), 0, {"before-hook-creation"}),
    ],
)
def test_a_hook_is_read_as_helm_reads_it(
    annotations: dict[str, str], events: tuple[str, ...], weight: int, policies: set[str]
) -> None:
    (hook,) = split_hooks([obj("Job", "j", **annotations)]).hooks
    assert hook.events == events
    assert hook.weight == weight
    assert hook.delete_policies == policies


def test_an_unknown_event_skips_the_object_whole_and_says_why() -> None:
    chart = split_hooks([obj("Job", "typo", hook="pre-instal"), obj("ConfigMap", "kept")])
    assert chart.hooks == ()
    assert [o["metadata"]["name"] for o in chart.ordinary] == ["kept"]
    (said,) = chart.skipped
    assert said.startswith("Job typo: helm.sh/hook names 'pre-instal', which Helm does not know")


def test_hooks_run_by_weight_then_name_then_kind_order() -> None:
    chart = split_hooks(
        [
            obj("Job", "b-job", hook="pre-install", hook_weight="1"),
            obj("Job", "a-job", hook="pre-install", hook_weight="1"),
            obj("Secret", "z-secret", hook="pre-install", hook_weight="-1"),
            obj("ServiceAccount", "same", hook="pre-install"),
            obj("Job", "same", hook="pre-install"),
            obj("Widget", "same", hook="pre-install"),
            obj("Job", "later", hook="post-install"),
        ]
    )
    order = [(h.kind, h.name) for h in hooks_for(chart.hooks, HookEvent.PRE_INSTALL)]
    assert order == [
        ("Secret", "z-secret"),
        ("ServiceAccount", "same"),
        ("Job", "same"),
        ("Widget", "same"),  # a kind Helm does not order comes last
        ("Job", "a-job"),
        ("Job", "b-job"),
    ]
    assert [h.name for h in hooks_for(chart.hooks, HookEvent.POST_INSTALL)] == ["later"]


@pytest.mark.parametrize(
    ("applied", "version", "events"),
    [
        (None, "v1", ("pre-install", "post-install")),
        ("v1", "v2", ("pre-upgrade", "post-upgrade")),
        ("v1", "v1", None),  # drift repair, or a release with the same addons: no hook runs
    ],
)
def test_install_and_upgrade_are_decided_as_helm_decides_them(
    applied: str | None, version: str, events: tuple[str, str] | None
) -> None:
    assert hook_events(applied, version) == events


@pytest.mark.parametrize(
    ("event", "events"),
    [
        ("pre-install", ("pre-install", "post-install")),
        ("post-install", ("pre-install", "post-install")),
        ("post-upgrade", ("pre-upgrade", "post-upgrade")),
        ("done", None),
    ],
)
def test_a_run_under_way_keeps_its_events(event: str, events: tuple[str, str] | None) -> None:
    assert events_of(event) == events


def _job(**status: Any) -> dict[str, Any]:
    return {"kind": "Job", "metadata": {"name": "j"}, "status": status}


@pytest.mark.parametrize(
    ("kind", "live", "state", "reason"),
    [
        ("Job", _job(active=1), HookState.RUNNING, ""),
        ("Job", _job(conditions=[{"type": "Complete", "status": "True"}]), HookState.SUCCEEDED, ""),
        (
            "Job",
            _job(conditions=[{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded",
                              "message": "Job has reached the specified backoff limit"}]),
            HookState.FAILED,
            "Job j failed: BackoffLimitExceeded Job has reached the specified backoff limit",
        ),
        ("Pod", {"status": {"phase": "Running"}}, HookState.RUNNING, ""),
        ("Pod", {"status": {"phase": "Succeeded"}}, HookState.SUCCEEDED, ""),
        ("Pod", {"status": {"phase": "Failed", "reason": "Error"}}, HookState.FAILED, "Pod j failed: Error"),
        ("ConfigMap", {"data": {}}, HookState.SUCCEEDED, ""),
        ("Job", None, HookState.FAILED, "Job j is gone before it ended"),
    ],
)  # fmt: skip
def test_a_hook_is_done_when_helm_would_go_on(
    kind: str, live: dict[str, Any] | None, state: HookState, reason: str
) -> None:
    (hook,) = split_hooks([obj(kind, "j", hook="pre-install")]).hooks
    verdict = judge_hook(hook, live)
    assert (verdict.state, verdict.reason) == (state, reason)


def test_delete_policies_after_the_event() -> None:
    chart = split_hooks(
        [
            obj("Job", "a", hook="pre-install", hook_weight="1", hook_delete_policy="hook-succeeded"),
            obj("Job", "b", hook="pre-install", hook_weight="2"),
            obj("Job", "c", hook="pre-install", hook_weight="3", hook_delete_policy="hook-succeeded"),
            obj("CustomResourceDefinition", "d", hook="pre-install", hook_weight="4",
                hook_delete_policy="hook-succeeded,hook-failed"),
            obj("Job", "e", hook="pre-install", hook_weight="5", hook_delete_policy="hook-failed"),
        ]
    )  # fmt: skip
    a, b, c, d, e = hooks_for(chart.hooks, HookEvent.PRE_INSTALL)
    assert [h.name for h in deleted_after((a, b, c, d, e))] == ["c", "a"], "the last run first; never a CRD"
    assert [h.name for h in deleted_after((a, b, c, d, e), failed=e)] == ["e", "a", "c"]
    assert [h.name for h in deleted_after((a, b), failed=b)] == ["a"], "b has only before-hook-creation"
    assert b.deleted_on(DeletePolicy.BEFORE_HOOK_CREATION)
    assert not d.deleted_on(DeletePolicy.BEFORE_HOOK_CREATION)


FAILED_RUN = {
    "version": "v2",
    "event": "pre-upgrade",
    "completed": ["ConfigMap kube-system/first"],
    "running": None,
    "failed": "pre-upgrade hook Job kube-system/migrate failed: BackoffLimitExceeded",
}


@pytest.mark.parametrize(
    ("kept", "version", "retry", "event", "completed", "failed", "retried"),
    [
        # A failed run stays failed, as a failed helm upgrade does...
        (FAILED_RUN, "v2", None, "pre-upgrade", ["ConfigMap kube-system/first"], True, None),
        # ...until the retry annotation gets a value: the failed event starts over from its first hook.
        (FAILED_RUN, "v2", "1", "pre-upgrade", [], False, "1"),
        # The same value again retries nothing (the run after it failed too).
        (
            {**FAILED_RUN, "retried": "1"},
            "v2",
            "1",
            "pre-upgrade",
            ["ConfigMap kube-system/first"],
            True,
            "1",
        ),
        # Another addon version is another run, whatever the annotation says.
        (FAILED_RUN, "v3", "1", "pre-install", [], False, "1"),
        (None, "v1", None, "pre-install", [], False, None),
    ],
)
def test_a_failed_run_is_rerun_only_when_asked(
    kept: dict[str, Any] | None,
    version: str,
    retry: str | None,
    event: str,
    completed: list[str],
    failed: bool,
    retried: str | None,
) -> None:
    run = HookRun.of(kept, version, HookEvent.PRE_INSTALL, retry)
    assert (run.event, run.completed, run.failed is not None, run.retried) == (
        event,
        completed,
        failed,
        retried,
    )
