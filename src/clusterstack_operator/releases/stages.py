"""Staged cluster addons (a release's ``clusteraddon.yaml``): what runs, in what order, where it stands. Pure.

A release may split its cluster addons into stages bound to Cluster API lifecycle points, in
upstream's format::

    apiVersion: clusteraddonconfig.x-k8s.io/v1alpha1
    clusterAddonVersion: clusteraddons.clusterstack.x-k8s.io/v1alpha1
    addonStages:
      AfterControlPlaneInitialized:
        - name: cni                    # a chart folder of the cluster-addon archive
          action: apply                # or delete
          waitForPreCondition:         # optional, CEL over objects of the workload cluster
            objects: [{key: d, apiVersion: apps/v1, kind: Deployment, name: x, namespace: kube-system}]
            conditions: d.status.readyReplicas == d.spec.replicas
          waitForPostCondition: ...
      BeforeClusterUpgrade: [...]

- :func:`parse_stages` reads it, saying what is wrong in words a release author can act on;
- :func:`hook_to_run` says which hook a ClusterAddon runs: the first apply of its addons runs
  ``AfterControlPlaneInitialized``, a move to a release with other addons ``BeforeClusterUpgrade``;
- :func:`stages_to_run` picks the stages of that hook (the first ones when a release has no
  ``BeforeClusterUpgrade`` stages);
- :func:`stage_progress` resumes the stages recorded in ``status.stages`` when they are the ones
  of this hook and release, and starts them afresh otherwise: the state lives in the ClusterAddon,
  so that an operator restart resumes the stage it was in;
- :func:`kept_after` folds a hook's stages into the objects that remain applied after it.

Who calls it: the ClusterAddon controller (:mod:`clusterstack_operator.controller.addon.stages`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from clusterstack_operator.releases.assets import check_api_version, validation_problems, yaml_mapping

__all__ = [
    "AFTER_CONTROL_PLANE_INITIALIZED",
    "BEFORE_CLUSTER_UPGRADE",
    "STAGES_FILE",
    "ConditionObject",
    "InvalidStages",
    "Phase",
    "Stage",
    "StagesConfig",
    "WaitFor",
    "hook_to_run",
    "kept_after",
    "parse_stages",
    "stage_progress",
    "stages_to_run",
]

STAGES_FILE = "clusteraddon.yaml"
STAGES_API_VERSION = "clusteraddonconfig.x-k8s.io/v1alpha1"
AFTER_CONTROL_PLANE_INITIALIZED = "AfterControlPlaneInitialized"
BEFORE_CLUSTER_UPGRADE = "BeforeClusterUpgrade"


class InvalidStages(ValueError):
    """The release's clusteraddon.yaml cannot be followed."""


class Phase(StrEnum):
    """Where a stage stands, in upstream's words (``status.stages[].phase``)."""

    PENDING = "Pending"
    WAITING_FOR_PRE_CONDITION = "waitingForPreCondition"
    APPLYING_OR_DELETING = "applyingOrDeleting"
    WAITING_FOR_POST_CONDITION = "waitingForPostCondition"
    DONE = "done"


class _Model(BaseModel):
    model_config = ConfigDict(populate_by_name=True, extra="forbid", frozen=True)


class ConditionObject(_Model):
    """An object of the workload cluster that a condition reads, under the name ``key``."""

    key: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    api_version: str = Field(alias="apiVersion", min_length=1)
    kind: str = Field(min_length=1)
    name: str = Field(min_length=1)
    namespace: str | None = None


class WaitFor(_Model):
    """A CEL expression over ``objects``; empty when the stage does not wait."""

    objects: tuple[ConditionObject, ...] = ()
    conditions: str = ""

    @property
    def waits(self) -> bool:
        return bool(self.conditions.strip())


class Stage(_Model):
    name: str = Field(min_length=1)
    action: Literal["apply", "delete"] = "apply"
    wait_for_pre_condition: WaitFor = Field(default_factory=WaitFor, alias="waitForPreCondition")
    wait_for_post_condition: WaitFor = Field(default_factory=WaitFor, alias="waitForPostCondition")


class StagesConfig(_Model):
    api_version: str = Field(alias="apiVersion")
    cluster_addon_version: str | None = Field(default=None, alias="clusterAddonVersion")
    addon_stages: Mapping[str, tuple[Stage, ...]] = Field(default_factory=dict, alias="addonStages")

    def stages(self, hook: str) -> tuple[Stage, ...]:
        return tuple(self.addon_stages.get(hook, ()))


def parse_stages(text: str | bytes) -> StagesConfig:
    """``clusteraddon.yaml`` read, or :class:`InvalidStages` saying what is wrong with it."""
    document = yaml_mapping(text, STAGES_FILE, InvalidStages)
    try:
        config = StagesConfig.model_validate(
            {**document, "addonStages": {k: v or [] for k, v in (document.get("addonStages") or {}).items()}}
        )
    except ValidationError as error:
        raise InvalidStages(f"{STAGES_FILE}: {validation_problems(error)}") from None
    check_api_version(config.api_version, STAGES_API_VERSION, STAGES_FILE, InvalidStages)
    for hook, stages in config.addon_stages.items():
        for stage in stages:
            for wait in (stage.wait_for_pre_condition, stage.wait_for_post_condition):
                keys = [o.key for o in wait.objects]
                if len(set(keys)) != len(keys):
                    raise InvalidStages(
                        f"{STAGES_FILE}: stage {stage.name} of {hook} names an object key twice"
                    )
    return config


def hook_to_run(applied_version: str | None) -> str:
    """The hook a ClusterAddon runs to bring new addons: the first ones once the control plane is up
    (the workload API server answers), later ones before the Cluster moves to the new release.

    Upstream learns both moments from Cluster API's runtime hooks; here they are the ClusterAddon's
    own history, so that no runtime extension has to be registered (and reached) for stages to run."""
    return AFTER_CONTROL_PLANE_INITIALIZED if applied_version is None else BEFORE_CLUSTER_UPGRADE


def stages_to_run(config: StagesConfig, hook: str) -> tuple[str, tuple[Stage, ...]]:
    """The hook that runs for ``hook``, and its stages: a release without ``BeforeClusterUpgrade``
    stages brings its new addons with its ``AfterControlPlaneInitialized`` ones, rather than with
    none (which would leave the new addons unapplied and delete the old ones)."""
    stages = config.stages(hook)
    if not stages and hook == BEFORE_CLUSTER_UPGRADE:
        return AFTER_CONTROL_PLANE_INITIALIZED, config.stages(AFTER_CONTROL_PLANE_INITIALIZED)
    return hook, stages


def stage_progress(
    stages: Sequence[Stage], hook: str, release: str, status: Mapping[str, Any]
) -> list[dict[str, str]]:
    """``status.stages`` to go on from: the recorded phases (and each stage's Helm hook run) when
    ``status`` shows this ``hook`` of this ``release`` with the same stages, otherwise every stage
    Pending."""
    fresh = [{"name": s.name, "action": s.action, "phase": Phase.PENDING.value} for s in stages]
    recorded = list(status.get("stages") or [])
    same = (
        status.get("hook") == hook
        and status.get("hookRelease") == release
        and [(r.get("name"), r.get("action")) for r in recorded] == [(f["name"], f["action"]) for f in fresh]
    )
    if not same:
        return fresh
    return [
        {
            **entry,
            "phase": str(record.get("phase") or Phase.PENDING),
            **({"helmHooks": record["helmHooks"]} if record.get("helmHooks") else {}),
        }
        for entry, record in zip(fresh, recorded, strict=True)
    ]


Identity = tuple[str, str, str, str]


def kept_after(stages: Iterable[tuple[Stage, Iterable[Identity]]]) -> set[Identity]:
    """The objects applied once the stages ran in order: each apply stage adds its objects, each
    delete stage takes its own away again. ``stages``: each stage with its rendered objects'
    (group, kind, namespace, name)."""
    kept: set[Identity] = set()
    for stage, identities in stages:
        if stage.action == "apply":
            kept |= set(identities)
        else:
            kept -= set(identities)
    return kept
