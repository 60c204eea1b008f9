"""TypesenseApiKey: a scoped key of a cluster, its value in a Secret the object owns, rotated when what
it is made with changes, made again when it is deleted in Typesense by hand.

The content kinds' first two steps (the cluster QuorumReady, its API) come first; then
:func:`sync_key` writes the value to the Secret when it needs another one
(:func:`~typesense_operator.content.keys.needs_new_value`), and makes sure Typesense has a key made
from that value: the recorded one (looked up by id), one found in Typesense's list after a crash, or
a new one. A rotation keeps the previous key for ``rotationGraceSeconds``; :func:`retire_previous`
then deletes it. The value is registered as a secret at once, so that no log line can carry it;
it never goes into the status, an Event or an error message.
"""

from __future__ import annotations

import base64
import functools
from datetime import datetime, timedelta
from typing import Any, ClassVar

from operator_core.children import Owner
from operator_core.clock import parse_wire_time, utcnow, wire_time
from operator_core.reconciling import Context
from operator_core.secrets import register_secret
from operator_core.steps import Finalizing, Outcome, Steps
from typesense_operator.api.content import TYPESENSE_API_KEY, TypesenseApiKeySpec
from typesense_operator.api.reasons import ContentReason, EventReason
from typesense_operator.content.keys import (
    PREFIX_LENGTH,
    KeyRecord,
    key_body,
    key_hash,
    matching_key,
    needs_new_value,
)
from typesense_operator.content.versions import action_refusal
from typesense_operator.controller.cluster.nodes import decoded_key, generate_key
from typesense_operator.controller.content.scope import (
    READY,
    ContentKind,
    ContentScope,
    NodeApi,
    NoNodeAnswers,
    answer_words,
    connect,
    deletion_api,
    find_cluster,
    message_of,
    named_cluster,
    refuse,
    remove_from_typesense,
    report,
    scope_for,
)
from typesense_operator.controller.runtime import TypesenseRuntime
from typesense_operator.resources.model import MANAGED_BY

__all__ = ["API_KEY", "ROTATE_ANNOTATION", "finalize_api_key", "named_secrets", "reconcile_api_key"]

ROTATE_ANNOTATION = "ts.opentelekomcloud.com/rotate"
"""A new value of this annotation on a TypesenseApiKey rotates the key (any string, a date say)."""
_RETRY_SECONDS = 5.0


class ApiKeyOwner(Owner[TypesenseApiKeySpec]):
    """A TypesenseApiKey as the owner of its Secret."""

    resource: ClassVar = TYPESENSE_API_KEY
    app: ClassVar[str] = "typesense-api-key"
    managed_by: ClassVar[str] = MANAGED_BY


API_KEY = ContentKind[TypesenseApiKeySpec](
    TYPESENSE_API_KEY, TypesenseApiKeySpec, "API key", lambda spec, name: name
)


def named_secrets(obj: dict[str, Any]) -> list[tuple[str, str]]:
    """The cluster and the Secret the value is taken from (valueFrom): their changes wake the key."""
    source = ((obj.get("spec") or {}).get("valueFrom") or {}).get("name")
    return [*named_cluster(obj), *([("Secret", source)] if source else [])]


def _record(status: dict[str, Any]) -> KeyRecord:
    return KeyRecord(
        key_id=status.get("keyId"),
        value_prefix=status.get("valuePrefix"),
        key_hash=status.get("keyHash"),
        previous_key_id=status.get("previousKeyId"),
        previous_key_deleted_after=parse_wire_time(status.get("previousKeyDeletedAfter")),
    )


def _secret(owner: ApiKeyOwner, value: str) -> dict[str, Any]:
    spec = owner.spec
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": owner.metadata(spec.secret.name, "api-key"),
        "type": "Opaque",
        "data": {spec.secret.key: base64.b64encode(value.encode()).decode()},
    }


async def sync_key(scope: ContentScope) -> Outcome:
    """The value in the Secret, and a key in Typesense made from it with the spec's scope."""
    assert scope.api is not None
    spec: TypesenseApiKeySpec = scope.spec
    kube, api, namespace = scope.kube, scope.api, scope.obj["metadata"]["namespace"]
    check = scope.context.runtime_of(TypesenseRuntime).settings.content_check_seconds
    owner = ApiKeyOwner.from_object(scope.obj)
    desired = key_hash(spec, (scope.obj["metadata"].get("annotations") or {}).get(ROTATE_ANNOTATION))
    record = _record(scope.status)
    lacking = action_refusal(spec.actions, scope.version) if scope.version is not None else None
    if lacking is not None:
        return await refuse(scope, ContentReason.NOT_IN_THIS_VERSION, lacking, check)
    found = await kube.get("v1", "Secret", spec.secret.name, namespace)
    if found is not None and not any(
        ref.get("uid") == owner.uid for ref in found["metadata"].get("ownerReferences") or []
    ):
        note = f"Secret {spec.secret.name} exists and is not this key's: name another in spec.secret"
        return await refuse(scope, ContentReason.SECRET_NOT_OURS, note, check)
    in_secret = decoded_key(found, spec.secret.key)
    from_source = None
    if spec.value_from is not None:
        source = await kube.get("v1", "Secret", spec.value_from.name, namespace)
        from_source = decoded_key(source, spec.value_from.key)
        if from_source is None:
            note = f"Secret {spec.value_from.name} (spec.valueFrom) has no key {spec.value_from.key}"
            return await refuse(scope, ContentReason.VALUE_SOURCE_MISSING, note, check)
    for value in (in_secret, from_source):
        register_secret(value)
    if needs_new_value(record, desired, in_secret, from_source, spec.value_from is not None):
        in_secret = from_source or generate_key()
        register_secret(in_secret)
        await kube.apply(_secret(owner, in_secret))
    assert in_secret is not None
    body = key_body(spec, in_secret)
    try:
        if (
            record.key_id is not None
            and record.value_prefix == in_secret[:PREFIX_LENGTH]
            and record.key_hash == desired
        ):
            code, answer = await api.call("GET", f"/keys/{record.key_id}")
            if code == 200:
                return await _in_sync(scope, record, check)
            if code != 404:
                return await refuse(
                    scope, ContentReason.REJECTED, f"reading key {record.key_id}: {message_of(answer)}", check
                )
            again = await _make(scope, body, record, replaces=None)
            if again is not None:
                note = (
                    f"key {record.key_id} was deleted in Typesense: made again as {again} from the same value"
                )
                await scope.book.event("Warning", EventReason.CONTENT_APPLIED, note)
            return await _settle(scope, again, check)
        code, listed = await api.call("GET", "/keys")
        if code != 200:
            return await refuse(scope, ContentReason.REJECTED, f"listing keys: {message_of(listed)}", check)
        adopted = matching_key((listed or {}).get("keys") or [], in_secret, body)
        if adopted is not None and adopted != record.key_id:
            made: int | None = adopted
        else:
            same_value = record.value_prefix == in_secret[:PREFIX_LENGTH] and record.key_id is not None
            # Typesense holds one key per value: a scope change of a key whose value comes from elsewhere
            # deletes the old key first, without a grace.
            made = await _make(scope, body, record, replaces=record.key_id if same_value else None)
        if made is None:
            return scope.wait(check)
        rotated = record.key_id is not None
        grace = timedelta(seconds=spec.rotation_grace_seconds)
        previous = record.key_id if rotated and record.value_prefix != in_secret[:PREFIX_LENGTH] else None
        scope.status.update(
            keyId=made,
            valuePrefix=in_secret[:PREFIX_LENGTH],
            keyHash=desired,
            rotatedAt=wire_time(utcnow()),
            previousKeyId=previous if previous is not None else record.previous_key_id,
            previousKeyDeletedAfter=wire_time(utcnow() + grace)
            if previous is not None
            else scope.status.get("previousKeyDeletedAfter"),
        )
        until = scope.status["previousKeyDeletedAfter"]
        words = (
            f"key {made} made; the previous key {previous} works until {until}"
            if previous
            else f"key {made} made"
        )
        await scope.book.event(
            "Normal", EventReason.CONTENT_APPLIED, f"{words}; its value is in Secret {spec.secret.name}"
        )
        return await _in_sync(scope, _record(scope.status), check)
    except NoNodeAnswers as error:
        await scope.book.set(
            READY, "False", ContentReason.NODES_UNREACHABLE, f"no node of the cluster answered: {error}"
        )
        return scope.wait(_RETRY_SECONDS)


async def _make(
    scope: ContentScope, body: dict[str, Any], record: KeyRecord, replaces: int | None
) -> int | None:
    """A new key from ``body``; None when Typesense refused it (said in Ready, in its words)."""
    assert scope.api is not None
    if replaces is not None:
        await scope.api.call("DELETE", f"/keys/{replaces}")
    code, answer = await scope.api.call("POST", "/keys", body)
    if code != 201:
        await refuse(scope, ContentReason.REJECTED, f"making the key: {answer_words(answer, code)}", 0)
        return None
    return int(answer["id"])


async def _settle(scope: ContentScope, made: int | None, check: float) -> Outcome:
    if made is None:
        return scope.wait(check)
    scope.status.update(keyId=made, rotatedAt=wire_time(utcnow()))
    return await _in_sync(scope, _record(scope.status), check)


async def _in_sync(scope: ContentScope, record: KeyRecord, check: float) -> Outcome:
    note = f"Typesense accepts key {record.key_id}, whose value is in Secret {scope.spec.secret.name}"
    await scope.book.set(READY, "True", ContentReason.IN_SYNC, note)
    return scope.wait(_until_previous_goes(record, check))


def _until_previous_goes(record: KeyRecord, check: float, now: datetime | None = None) -> float:
    if record.previous_key_id is None or record.previous_key_deleted_after is None:
        return check
    left = (record.previous_key_deleted_after - (now or utcnow())).total_seconds()
    return max(min(check, left), 1.0)


async def retire_previous(scope: ContentScope) -> Outcome:
    """The previous key, once its grace is over, is deleted from Typesense."""
    record = _record(scope.status)
    if scope.api is None or record.previous_key_id is None or record.previous_key_deleted_after is None:
        return Outcome.CONTINUE
    if utcnow() < record.previous_key_deleted_after:
        return Outcome.CONTINUE
    try:
        code, answer = await scope.api.call("DELETE", f"/keys/{record.previous_key_id}")
    except NoNodeAnswers:
        scope.next_look = min(scope.next_look, _RETRY_SECONDS)
        return Outcome.CONTINUE
    if code in (200, 404):
        note = f"the previous key {record.previous_key_id} is deleted: its grace is over"
        await scope.book.event("Normal", EventReason.CONTENT_DELETED, note)
        scope.status.update(previousKeyId=None, previousKeyDeletedAfter=None)
    else:
        await scope.book.event(
            "Warning",
            EventReason.CONTENT_NOT_DELETED,
            f"previous key {record.previous_key_id}: {message_of(answer)}",
        )
    return Outcome.CONTINUE


_STEPS = Steps(
    TYPESENSE_API_KEY, scope_for(API_KEY), (find_cluster, connect, retire_previous, sync_key), report
)


async def reconcile_api_key(obj: dict[str, Any], context: Context) -> float:
    return await _STEPS.reconcile(obj, context)


def _key_ids(obj: dict[str, Any]) -> list[int]:
    """The key and a previous one still in its grace, as Typesense numbers them."""
    status = obj.get("status") or {}
    return [key for key in (status.get("keyId"), status.get("previousKeyId")) if key is not None]


def _keys_to_delete(obj: dict[str, Any]) -> bool:
    spec = TypesenseApiKeySpec.model_validate(obj.get("spec") or {})
    return spec.deletion_policy != "Retain" and bool(_key_ids(obj))


async def delete_keys(scope: ContentScope) -> Outcome:
    """The keys deleted from Typesense; a cluster that is gone or not QuorumReady has nothing to delete
    from or is waited for, as for the other content kinds."""
    ids = _key_ids(scope.obj)
    keys = f"key(s) {', '.join(map(str, ids))}"
    api = await deletion_api(scope, keys)
    if not isinstance(api, NodeApi):
        return api
    removals = [(f"key {key}", functools.partial(api.call, "DELETE", f"/keys/{key}")) for key in ids]
    return await remove_from_typesense(scope, removals, f"{keys} deleted from Typesense")


FINALIZING = Finalizing(scope_for(API_KEY), [delete_keys], needed=_keys_to_delete)
"""Delete the key (and a previous one still in its grace) from Typesense, then let it go."""
finalize_api_key = FINALIZING.finalize
