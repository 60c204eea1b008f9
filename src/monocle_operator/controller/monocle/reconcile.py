"""One reconcile of one Monocle instance: an ordered list of small steps over a scope, then status once.

Steps read, diff and apply; every decision comes from the pure ``resources``
room or from :mod:`.status`. A step that cannot go on (a Secret or ConfigMap
only the user can create is missing) returns ``STOP``. Status is written once,
at the end, and only when it changed, so a reconcile where nothing changed
makes no write call.

The update-idents flow is re-entrant: the Job carries the hash of the config
it runs for, so when the status write after a created Job is lost, the next
reconcile finds the Job and records its hash instead of starting another.
The hash is recorded only after the Job exists, so a failed create is retried.
"""

from __future__ import annotations

import base64
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from prometheus_client import Counter

from monocle_operator.api import MONOCLE
from monocle_operator.api.reasons import ConditionType, EventReason
from monocle_operator.controller.monocle.rollout import MonocleImage, engine_settled, monocle_image_now
from monocle_operator.controller.monocle.status import (
    deployment_condition,
    engine_health_condition,
    ready_condition,
    statefulset_condition,
    status_fields,
)
from monocle_operator.engine import EngineUnreachable, MonocleRuntime
from monocle_operator.resources import (
    CONFIG_KEY,
    CRAWLERS_API_KEY,
    ELASTIC_PORT,
    ENGINES,
    PRUNABLE_KINDS,
    UPDATE_IDENTS,
    ConfigCheck,
    Expansion,
    Instance,
    build_claim_expansion,
    build_config_map,
    build_generated_secret,
    build_update_idents_job,
    check_config,
    config_hash,
    decide_expansion,
    desired_children,
    engine_image,
    secret_data_hash,
)
from operator_core.applying import apply_report_prune
from operator_core.children import StepEventReason
from operator_core.conditions import find
from operator_core.metrics import REGISTRY
from operator_core.reconciling import WAIT_FOR_CHANGE, Context
from operator_core.secrets import register_secret
from operator_core.steps import Outcome, Steps
from operator_core.steps import Scope as BaseScope
from operator_core.storage import claim_template_size, expansion_allowed, requested_size

__all__ = ["STEPS", "Outcome", "Scope", "reconcile"]

ENGINE_RECHECK_SECONDS = 30.0
"""How soon an engine that is not healthy, or whose health is unknown, is asked again."""

UPDATE_IDENTS_JOBS = Counter(
    "monocle_update_idents_jobs_total",
    "update-idents Jobs started because an instance's config.yaml changed.",
    registry=REGISTRY,
)


@dataclass(kw_only=True)
class Scope(BaseScope):
    """What one reconcile of one Monocle instance knows and has decided so far. Its :attr:`next_look` is
    the resync interval: pods becoming ready are seen through child events, so this is only the safety
    net."""

    instance: Instance
    runtime: MonocleRuntime
    secret_hash: str | None = None
    config: ConfigCheck | None = None
    config_text: str | None = None
    config_hash: str | None = None
    """The config hash to record in status: only ever one that update-idents ran for (or started with)."""
    update_idents_job: str | None = None
    monocle_image: MonocleImage | None = None
    """The image the API and the crawler are given now (the spec's, or theirs while it waits)."""
    waiting_for_user: bool = False
    """A Secret or ConfigMap only the user can create is missing: only its creation can help, and the
    objects the spec names wake the instance when they change."""

    @classmethod
    def of(cls, obj: dict[str, Any], context: Context) -> Scope:
        return cls(
            **BaseScope.parts(obj, context),
            instance=Instance.from_object(obj),
            runtime=context.runtime_of(MonocleRuntime),
        )

    @property
    def requeue_after(self) -> float:
        return WAIT_FOR_CHANGE if self.waiting_for_user else self.next_look


def _decoded(data: Mapping[str, str] | None) -> dict[str, str]:
    return {key: base64.b64decode(value).decode(errors="replace") for key, value in (data or {}).items()}


async def ensure_secrets(scope: Scope) -> Outcome:
    """The generated Secret is created once and never overwritten; the user's must exist."""
    instance = scope.instance
    generated = await scope.kube.get("v1", "Secret", instance.api_name, instance.namespace)
    if generated is None:
        key = secrets.token_urlsafe(32)
        register_secret(key)
        generated = await scope.kube.create(build_generated_secret(instance, key))
        await scope.book.event(
            "Normal",
            EventReason.SECRET_GENERATED,
            f"generated {CRAWLERS_API_KEY} in Secret {instance.api_name}",
        )
    user: dict[str, Any] | None = None
    if instance.spec.secret_ref is not None:
        user = await scope.kube.get("v1", "Secret", instance.spec.secret_ref.name, instance.namespace)
        if user is None:
            message = (
                f"Secret {instance.spec.secret_ref.name} (spec.secretRef) does not exist in namespace "
                f"{instance.namespace}; create it, or remove spec.secretRef"
            )
            # One Warning when the Secret goes missing, not one every recheck.
            await scope.book.set(
                ConditionType.API_READY, "False", "SecretNotFound", message, warn=EventReason.SECRET_MISSING
            )
            await scope.book.set(ConditionType.CRAWLER_READY, "False", "SecretNotFound", message)
            scope.waiting_for_user = True
            return Outcome.STOP
    values = {**_decoded(generated.get("data")), **_decoded((user or {}).get("data"))}
    for value in values.values():
        register_secret(value)
    hash_key = values.get(CRAWLERS_API_KEY) or instance.uid
    scope.secret_hash = secret_data_hash(hash_key.encode(), generated.get("data"), (user or {}).get("data"))
    return Outcome.CONTINUE


async def check_configuration(scope: Scope) -> Outcome:
    """The generated ConfigMap is created once (then it is the user's to edit); the config is judged."""
    instance = scope.instance
    default = build_config_map(instance)
    source = f"ConfigMap {instance.config_map_name}"
    live = await scope.kube.get("v1", "ConfigMap", instance.config_map_name, instance.namespace)
    if live is None and default is not None:
        live = await scope.kube.create(default)
        await scope.book.event("Normal", StepEventReason.CREATED, f"created {source}")
    if live is None:
        await scope.book.set(
            ConditionType.CONFIG_VALID,
            "False",
            "ConfigMapNotFound",
            f"{source} (spec.configMapRef) does not exist in namespace {instance.namespace}; create it "
            f"with the key {CONFIG_KEY}, or remove spec.configMapRef",
            warn=EventReason.INVALID_CONFIG,
        )
        scope.waiting_for_user = True
        return Outcome.STOP
    scope.config_text = (live.get("data") or {}).get(CONFIG_KEY)
    scope.config = check_config(scope.config_text, source)
    # The Warning goes out when the verdict turns (not on every reconcile of the same bad config).
    await scope.book.set(
        ConditionType.CONFIG_VALID,
        "True" if scope.config.valid else "False",
        scope.config.reason,
        scope.config.message,
        warn=None if scope.config.valid else EventReason.INVALID_CONFIG,
    )
    return Outcome.CONTINUE


async def apply_children(scope: Scope) -> Outcome:
    """Every child; the other engine's StatefulSet, after a change of engine, is pruned, and its
    volume kept (spec.elastic.onEngineChange: Recrawl, which admission requires for the change)."""
    instance = scope.instance
    assert scope.secret_hash is not None
    engine = instance.spec.elastic.engine
    live_sts = await scope.kube.get(
        "apps/v1", "StatefulSet", instance.engine_statefulset_name(), instance.namespace
    )
    left = [
        (other, instance.engine_statefulset_name(other))
        for other in ENGINES
        if other != engine and _standing(await scope.kube.get(
            "apps/v1", "StatefulSet", instance.engine_statefulset_name(other), instance.namespace,
            labelled_only=True,  # only one of ours is pruned: no request to learn of another
        ))
    ]  # fmt: skip
    # A new Monocle image waits for the engine to run its own and be healthy (as last observed).
    healthy = find(scope.book.conditions, ConditionType.ENGINE_HEALTHY)
    settled = engine_settled(
        live_sts, engine_image(instance), healthy is not None and healthy.status == "True"
    )
    api = await scope.kube.get("apps/v1", "Deployment", instance.api_name, instance.namespace)
    scope.monocle_image = monocle_image_now(instance.spec.image, api, settled)
    if scope.monocle_image.waiting is not None:
        scope.next_look = min(scope.next_look, ENGINE_RECHECK_SECONDS)
    desired = desired_children(
        instance, scope.secret_hash, claim_template_size(live_sts), scope.monocle_image.now
    )
    await apply_report_prune(scope.kube, scope.book, instance, desired, PRUNABLE_KINDS)
    for other, name in left:
        await scope.book.event(
            "Normal",
            EventReason.ENGINE_CHANGED,
            f"the engine is {engine} now, not {other}: it starts empty on a volume of its own and the "
            f"crawlers fetch everything again (onEngineChange: Recrawl); StatefulSet {name} goes, its "
            f"volume data-{name}-0 is kept until you delete it",
        )
    return Outcome.CONTINUE


def _standing(obj: dict[str, Any] | None) -> bool:
    return obj is not None and not obj["metadata"].get("deletionTimestamp")


async def run_update_idents(scope: Scope) -> Outcome:
    """A changed, valid config.yaml gets one update-idents Job, replacing only this instance's earlier one."""
    instance = scope.instance
    applied = scope.current.get("configHash")
    scope.config_hash, scope.update_idents_job = applied, scope.current.get("updateIdentsJob")
    if scope.config is None or not scope.config.valid or scope.config_text is None:
        return Outcome.CONTINUE
    wanted = config_hash(scope.config_text)
    if applied is None:
        # A new instance: Elasticsearch holds nothing yet for update-idents to correct.
        scope.config_hash = wanted
        return Outcome.CONTINUE
    if applied == wanted:
        return Outcome.CONTINUE
    selector = instance.component_selector(UPDATE_IDENTS)
    jobs = await scope.kube.list("batch/v1", "Job", instance.namespace, labels=selector)
    name = instance.update_idents_job_name(wanted)
    for job in jobs:
        if job["metadata"]["name"] != name:
            await scope.kube.delete("batch/v1", "Job", job["metadata"]["name"], instance.namespace)
    # The Job for this config may exist already: created, but its hash never reached status.
    if not any(job["metadata"]["name"] == name for job in jobs):
        await scope.kube.create(build_update_idents_job(instance, wanted))
        UPDATE_IDENTS_JOBS.inc()
        await scope.book.event(
            "Normal", EventReason.UPDATE_IDENTS_STARTED, f"config.yaml changed: started Job {name}"
        )
    scope.config_hash, scope.update_idents_job = wanted, name
    return Outcome.CONTINUE


async def expand_storage(scope: Scope) -> Outcome:
    """Grow the data claim when the spec asks for more and its StorageClass allows it."""
    instance = scope.instance
    claim = await scope.kube.get(
        "v1", "PersistentVolumeClaim", instance.elastic_claim_name, instance.namespace
    )
    if claim is None:
        return Outcome.CONTINUE
    claimed = requested_size(claim["spec"])
    class_name = claim["spec"].get("storageClassName")
    allows = await expansion_allowed(scope.kube, class_name)
    plan = decide_expansion(instance.spec.elastic.storage_size, claimed, class_name, allows)
    if plan.action is Expansion.EXPAND:
        await scope.kube.apply(build_claim_expansion(instance, plan.size))
        await scope.book.event("Normal", EventReason.STORAGE_EXPANDED, plan.message)
    elif plan.action is Expansion.NOT_EXPANDABLE and _spec_changed(scope):
        await scope.book.event("Warning", EventReason.STORAGE_NOT_EXPANDABLE, plan.message)
    return Outcome.CONTINUE


def _spec_changed(scope: Scope) -> bool:
    return bool(scope.current.get("observedGeneration") != scope.obj["metadata"].get("generation"))


async def observe_components(scope: Scope) -> Outcome:
    instance, kube = scope.instance, scope.kube
    sts = await kube.get("apps/v1", "StatefulSet", instance.engine_statefulset_name(), instance.namespace)
    await scope.book.set(
        ConditionType.ELASTIC_READY, *statefulset_condition(sts, instance.spec.elastic.engine)
    )
    api = await kube.get("apps/v1", "Deployment", instance.api_name, instance.namespace)
    crawler = await kube.get("apps/v1", "Deployment", instance.crawler_name, instance.namespace)
    image = scope.monocle_image
    if image is not None and image.waiting is not None:
        waiting = (
            f"stays on {image.now} until the engine runs {engine_image(instance)}, rolled out and "
            f"healthy; then it takes {image.waiting}"
        )
        await scope.book.set(ConditionType.API_READY, "False", "WaitingForEngine", f"the API {waiting}")
        await scope.book.set(
            ConditionType.CRAWLER_READY, "False", "WaitingForEngine", f"the crawler {waiting}"
        )
        return Outcome.CONTINUE
    await scope.book.set(ConditionType.API_READY, *deployment_condition(api, "API"))
    await scope.book.set(ConditionType.CRAWLER_READY, *deployment_condition(crawler, "crawler"))
    return Outcome.CONTINUE


async def observe_engine_health(scope: Scope) -> Outcome:
    """EngineHealthy from the engine's own cluster health, asked of its pod at its address (the pods
    are in the watch cache: no request to the API server). Not healthy, or not known, it is asked
    again within :data:`ENGINE_RECHECK_SECONDS`: a health that changes moves no Kubernetes object."""
    instance = scope.instance
    pod_name = f"{instance.engine_statefulset_name()}-0"
    pod = await scope.kube.get("v1", "Pod", pod_name, instance.namespace, labelled_only=True)
    address = _engine_address(pod)
    health: dict[str, Any] | None = None
    unreachable: str | None = None
    if address is not None:
        try:
            health = await scope.runtime.engine_health(address)
        except EngineUnreachable as error:
            unreachable = str(error)
    status, reason, message = engine_health_condition(pod_name, address, health, unreachable)
    await scope.book.set(
        ConditionType.ENGINE_HEALTHY,
        status,
        reason,
        message,
        warn=EventReason.ENGINE_RED if reason == "Red" else None,
    )
    if status != "True":
        scope.next_look = min(scope.next_look, ENGINE_RECHECK_SECONDS)
    return Outcome.CONTINUE


def _engine_address(pod: Mapping[str, Any] | None) -> str | None:
    """``http://<pod IP>:9200`` of a running engine pod that is not going away."""
    if pod is None or pod["metadata"].get("deletionTimestamp"):
        return None
    status = pod.get("status") or {}
    if status.get("phase") != "Running" or not status.get("podIP"):
        return None
    return f"http://{status['podIP']}:{ELASTIC_PORT}"


async def report(scope: Scope, completed: bool) -> None:
    """Ready from the components, and the config hash update-idents ran for and its Job."""
    book = scope.book
    await book.set_ready(
        *ready_condition(book.conditions),
        became_ready=EventReason.READY,
        became_not_ready=EventReason.NOT_READY,
        condition_type=ConditionType.READY,
    )
    scope.status.update(
        status_fields(config_hash=scope.config_hash, update_idents_job=scope.update_idents_job)
    )


STEPS = Steps(
    MONOCLE,
    Scope.of,
    (
        ensure_secrets,
        check_configuration,
        apply_children,
        run_update_idents,
        expand_storage,
        observe_components,
        observe_engine_health,
    ),
    report,
)
reconcile = STEPS.reconcile
"""Bring one instance to its spec and write its status; returns seconds until the next look."""
