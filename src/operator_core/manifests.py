"""Pure comparisons of desired manifests with live objects: what makes an apply quiet.

:func:`needs_apply` says whether server-side applying a desired manifest could
change the live object: it could not when the live object already holds every
value of the manifest (:func:`is_contained`, which catches drift by other
writers) *and* carries the hash of that same manifest (:func:`applied_hash`,
which catches fields dropped from the manifest, which server-side apply would
remove). :func:`merge_patch` is the status writers' diff. No I/O.

Who calls it: :mod:`operator_core.kube` before every apply, and the
operators' status setters.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Mapping
from typing import Any

from operator_core.quantity import QUANTITY_MAPS, QUANTITY_VALUES, same_quantity

__all__ = [
    "APPLIED_HASH_ANNOTATION",
    "LEGACY_APPLIED_HASH_ANNOTATION",
    "SUITE_DOMAIN",
    "Manifest",
    "applied_hash",
    "is_contained",
    "merge_patch",
    "needs_apply",
    "owned_status_patch",
    "with_applied_hash",
]

SUITE_DOMAIN = "operator-suite.io"
"""The one domain of the suite's own label and annotation keys."""
APPLIED_HASH_ANNOTATION = f"{SUITE_DOMAIN}/applied-hash"
LEGACY_APPLIED_HASH_ANNOTATION = "operator-suite.dev/applied-hash"
"""Where versions before the one domain kept the hash: still read, so that an upgraded operator knows
its children are current and writes nothing; its next real change of a child replaces it (the same
field manager no longer applies the old key, so server-side apply removes it)."""

Manifest = dict[str, Any]


def _secret_data_as_base64(manifest: Mapping[str, Any]) -> Manifest:
    """A Secret's stringData folded into data, as the API server stores it."""
    folded = dict(manifest)
    string_data = folded.pop("stringData", None) or {}
    if string_data:
        data = dict(folded.get("data") or {})
        for key, value in string_data.items():
            data[key] = base64.b64encode(str(value).encode()).decode()
        folded["data"] = data
    return folded


def _without_hash_annotation(manifest: Mapping[str, Any]) -> Manifest:
    """``manifest`` without our hash annotation; copies only the maps on the way to it, never its values."""
    subject = dict(manifest)
    metadata = dict(subject.get("metadata") or {})
    annotations = dict(metadata.get("annotations") or {})
    annotations.pop(APPLIED_HASH_ANNOTATION, None)
    annotations.pop(LEGACY_APPLIED_HASH_ANNOTATION, None)
    if annotations:
        metadata["annotations"] = annotations
    else:
        metadata.pop("annotations", None)
    if "metadata" in subject:
        subject["metadata"] = metadata
    return subject


def applied_hash(desired: Mapping[str, Any]) -> str:
    """A stable hash of the desired manifest, without its own hash annotation and without Secret values.

    Secret values stay out so that the annotation never becomes a way to guess them;
    a changed Secret value is still caught by :func:`is_contained`.
    """
    subject = _without_hash_annotation(desired)
    if subject.get("kind") == "Secret":
        subject.pop("data", None)
        subject.pop("stringData", None)
    canonical = json.dumps(subject, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:32]


def is_contained(desired: Any, live: Any, *, of_quantities: bool = False) -> bool:
    """True when every value in ``desired`` is present and equal in ``live``.

    Maps may have extra keys in ``live`` (defaults, other managers' fields);
    lists must have the same length and contain item by item. Quantities (the
    values of resource limits and requests, storage sizes) are compared by value,
    as the API server stores them in canonical form (``0.5`` becomes ``500m``).
    """
    if isinstance(desired, Mapping):
        if not isinstance(live, Mapping):
            return False
        for key, value in desired.items():
            if key not in live:
                return False
            if (of_quantities or key in QUANTITY_VALUES) and same_quantity(value, live[key]):
                continue
            if not is_contained(value, live[key], of_quantities=key in QUANTITY_MAPS):
                return False
        return True
    if isinstance(desired, list):
        return (
            isinstance(live, list)
            and len(desired) == len(live)
            and all(is_contained(d, v) for d, v in zip(desired, live, strict=True))
        )
    if isinstance(desired, bool) or isinstance(live, bool):
        return desired is live
    if isinstance(desired, int | float) and isinstance(live, int | float):
        return desired == live
    return bool(desired == live)


def merge_patch(current: Mapping[str, Any], desired: Mapping[str, Any]) -> Manifest:
    """The JSON merge patch (RFC 7386) that turns ``current`` into ``desired``; empty when equal.

    Keys that ``desired`` drops become null, which is how a merge patch deletes them;
    lists and scalars are replaced whole.
    """
    patch: Manifest = {}
    for key in current.keys() - desired.keys():
        patch[key] = None
    for key, value in desired.items():
        old = current.get(key)
        if isinstance(value, Mapping) and isinstance(old, Mapping):
            nested = merge_patch(old, value)
            if nested:
                patch[key] = nested
        elif key not in current or old != value:
            patch[key] = value
    return patch


def owned_status_patch(current: Mapping[str, Any], owned: Mapping[str, Any]) -> Manifest:
    """The merge patch of a status whose ``owned`` fields (those its controller writes) are to be what
    they are there, every other field of ``current`` left as it is; empty when nothing changed. A field
    owned as None is removed, and one that is not there is left out of the patch: no write for it."""
    fields = {key: value for key, value in owned.items() if value is not None or key in current}
    return merge_patch({key: current[key] for key in fields if key in current}, fields)


def with_applied_hash(desired: Mapping[str, Any]) -> Manifest:
    """The manifest with its hash annotation set (a new top level and metadata; the values are shared)."""
    return _stamped(desired, applied_hash(desired))


def _stamped(desired: Mapping[str, Any], hash_value: str, key: str = APPLIED_HASH_ANNOTATION) -> Manifest:
    stamped = dict(desired)
    metadata = dict(stamped.get("metadata") or {})
    metadata["annotations"] = {**(metadata.get("annotations") or {}), key: hash_value}
    stamped["metadata"] = metadata
    return stamped


def needs_apply(desired: Mapping[str, Any], live: Mapping[str, Any] | None) -> bool:
    """Whether server-side applying ``desired`` could change ``live``."""
    if live is None:
        return True
    hash_value = applied_hash(desired)
    live_annotations = (live.get("metadata") or {}).get("annotations") or {}
    key = (
        APPLIED_HASH_ANNOTATION
        if APPLIED_HASH_ANNOTATION in live_annotations
        else LEGACY_APPLIED_HASH_ANNOTATION
    )
    if live_annotations.get(key) != hash_value:
        # Another manifest was applied last (or none by us): the cheap answer, before any walk.
        return True
    stamped = _stamped(desired, hash_value, key)
    comparable = _secret_data_as_base64(stamped) if stamped.get("kind") == "Secret" else stamped
    return not is_contained(comparable, live)
