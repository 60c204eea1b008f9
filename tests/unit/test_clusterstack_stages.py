"""Staged cluster addons: upstream's clusteraddon.yaml read, stages resumed from status, CEL conditions."""

from __future__ import annotations

from typing import Any

import pytest

from clusterstack_operator.releases.stage_conditions import InvalidCondition, judge
from clusterstack_operator.releases.stages import (
    AFTER_CONTROL_PLANE_INITIALIZED,
    BEFORE_CLUSTER_UPGRADE,
    InvalidStages,
    hook_to_run,
    kept_after,
    parse_stages,
    stage_progress,
    stages_to_run,
)

# Upstream's own test release (test/cluster-stacks/1/.../clusteraddon.yaml), hook names and all.
UPSTREAM = """\
apiVersion: clusteraddonconfig.x-k8s.io/v1alpha1
clusterAddonVersion: clusteraddons.clusterstack.x-k8s.io/v1alpha1
addonStages:
  AfterControlPlaneInitialized:
    - name: cni
      action: apply
    - name: metrics-server
      action: apply
  BeforeClusterUpgrade:
    - name: ngnix
      action: apply
      waitForPostCondition:
        objects:
          - key: msdeployment
            apiVersion: apps/v1
            kind: Deployment
            name: metrics-server
            namespace: kube-system
          - key: ngnix
            apiVersion: apps/v1
            kind: Deployment
            name: cluster-addon-ngnix
            namespace: kube-system
        conditions: msdeployment.spec.replicas == ngnix.spec.replicas
"""


def test_upstreams_format_is_read_stage_by_stage() -> None:
    config = parse_stages(UPSTREAM)
    first = config.stages(AFTER_CONTROL_PLANE_INITIALIZED)
    assert [(s.name, s.action, s.wait_for_pre_condition.waits) for s in first] == [
        ("cni", "apply", False),
        ("metrics-server", "apply", False),
    ]
    (ngnix,) = config.stages(BEFORE_CLUSTER_UPGRADE)
    post = ngnix.wait_for_post_condition
    assert [o.key for o in post.objects] == ["msdeployment", "ngnix"]
    assert post.conditions == "msdeployment.spec.replicas == ngnix.spec.replicas"
    assert config.stages("SomeOtherHook") == ()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("- a list", "not a YAML mapping"),
        ("apiVersion: v2\naddonStages: {}", "not clusteraddonconfig.x-k8s.io/v1alpha1"),
        (
            "apiVersion: clusteraddonconfig.x-k8s.io/v1alpha1\naddonStages:\n  H:\n    - action: apply\n",
            "addonStages.H.0.name: Field required",
        ),
        (
            "apiVersion: clusteraddonconfig.x-k8s.io/v1alpha1\naddonStages:\n"
            "  H:\n    - {name: a, action: upgrade}\n",
            "addonStages.H.0.action",
        ),
        (
            "apiVersion: clusteraddonconfig.x-k8s.io/v1alpha1\naddonStages:\n  H:\n    - name: a\n"
            "      waitForPreCondition:\n        objects: [{key: x, apiVersion: v1, kind: A, name: a},"
            " {key: x, apiVersion: v1, kind: B, name: b}]\n        conditions: 'true'\n",
            "stage a of H names an object key twice",
        ),
        ("apiVersion: [", "clusteraddon.yaml is not YAML"),
    ],
)
def test_a_config_that_cannot_be_followed_says_where(text: str, message: str) -> None:
    with pytest.raises(InvalidStages, match=message.replace(".", r"\.")):
        parse_stages(text)


def test_the_first_addons_run_after_the_control_plane_is_up_later_ones_before_the_upgrade() -> None:
    assert hook_to_run(None) == AFTER_CONTROL_PLANE_INITIALIZED
    assert hook_to_run("v1") == BEFORE_CLUSTER_UPGRADE


def test_a_release_without_upgrade_stages_brings_new_addons_with_its_first_ones() -> None:
    only_first = parse_stages(UPSTREAM.split("  BeforeClusterUpgrade:")[0])
    hook, stages = stages_to_run(only_first, BEFORE_CLUSTER_UPGRADE)
    assert (hook, [s.name for s in stages]) == (AFTER_CONTROL_PLANE_INITIALIZED, ["cni", "metrics-server"])
    hook, stages = stages_to_run(parse_stages(UPSTREAM), BEFORE_CLUSTER_UPGRADE)
    assert (hook, [s.name for s in stages]) == (BEFORE_CLUSTER_UPGRADE, ["ngnix"])


def _recorded(hook: str, release: str, *phases: tuple[str, str]) -> dict[str, Any]:
    return {
        "hook": hook,
        "hookRelease": release,
        "stages": [{"name": name, "action": "apply", "phase": phase} for name, phase in phases],
    }


def test_stages_resume_where_the_status_says_they_stood() -> None:
    stages = parse_stages(UPSTREAM).stages(AFTER_CONTROL_PLANE_INITIALIZED)
    status = _recorded(
        AFTER_CONTROL_PLANE_INITIALIZED, "r-v1", ("cni", "done"), ("metrics-server", "waitingForPreCondition")
    )
    assert [s["phase"] for s in stage_progress(stages, AFTER_CONTROL_PLANE_INITIALIZED, "r-v1", status)] == [
        "done",
        "waitingForPreCondition",
    ]


@pytest.mark.parametrize(
    "status",
    [
        {},
        _recorded(AFTER_CONTROL_PLANE_INITIALIZED, "r-v0", ("cni", "done"), ("metrics-server", "done")),
        _recorded(BEFORE_CLUSTER_UPGRADE, "r-v1", ("cni", "done"), ("metrics-server", "done")),
        _recorded(AFTER_CONTROL_PLANE_INITIALIZED, "r-v1", ("cni", "done")),
    ],
    ids=["nothing recorded", "another release", "another hook", "other stages"],
)
def test_stages_of_another_hook_release_or_shape_start_afresh(status: dict[str, Any]) -> None:
    stages = parse_stages(UPSTREAM).stages(AFTER_CONTROL_PLANE_INITIALIZED)
    progress = stage_progress(stages, AFTER_CONTROL_PLANE_INITIALIZED, "r-v1", status)
    assert progress == [
        {"name": "cni", "action": "apply", "phase": "Pending"},
        {"name": "metrics-server", "action": "apply", "phase": "Pending"},
    ]


def test_a_delete_stage_takes_away_what_an_earlier_stage_applied() -> None:
    config = parse_stages(
        "apiVersion: clusteraddonconfig.x-k8s.io/v1alpha1\naddonStages:\n  H:\n"
        "    - {name: old-cni, action: apply}\n    - {name: new-cni, action: apply}\n"
        "    - {name: old-cni, action: delete}\n"
    )
    old, new, gone = config.stages("H")
    a, b, c = (
        ("", "ConfigMap", "kube-system", "a"),
        ("", "ConfigMap", "kube-system", "b"),
        ("", "Pod", "x", "c"),
    )
    assert kept_after([(old, [a, b]), (new, [b, c]), (gone, [a, b])]) == {c}


DEPLOYMENT = {"spec": {"replicas": 2}, "status": {"readyReplicas": 2}}


@pytest.mark.parametrize(
    ("expression", "objects", "holds", "why"),
    [
        ("d.status.readyReplicas == d.spec.replicas", {"d": DEPLOYMENT}, True, ""),
        (
            "d.status.readyReplicas == d.spec.replicas",
            {"d": {"spec": {"replicas": 2}}},
            False,
            "no such member",
        ),
        ("d.status.readyReplicas == d.spec.replicas", {"d": None}, False, "waiting for d to exist"),
        ("d.spec.replicas > 2", {"d": DEPLOYMENT}, False, "is false"),
        ("a.spec.replicas == b.spec.replicas", {"a": DEPLOYMENT, "b": DEPLOYMENT}, True, ""),
        ("has(c.data) && c.data.go == 'yes'", {"c": {"data": {"go": "yes"}}}, True, ""),
    ],
)
def test_a_condition_holds_or_says_what_it_waits_for(
    expression: str, objects: dict[str, Any], holds: bool, why: str
) -> None:
    verdict = judge(expression, objects)
    assert verdict.holds is holds
    assert why in verdict.why


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("d.spec.replicas ==", "does not compile: syntax error at line 1, column 17"),
        ("d.spec.replicas", "evaluates to a value of type int, not bool"),
        ("e.spec.replicas == 1", "names what is not one of its objects' keys (d)"),
    ],
)
def test_a_condition_that_can_never_hold_is_refused_with_the_expression(
    expression: str, message: str
) -> None:
    with pytest.raises(InvalidCondition) as refused:
        judge(expression, {"d": {"metadata": {"name": "secret-looking-value"}, "spec": {"replicas": 1}}})
    assert message in str(refused.value)
    assert repr(expression) in str(refused.value)
    assert "secret-looking-value" not in str(refused.value)
