"""Which Typesense API a cluster speaks, from the version its server reports (``GET /debug``): pure
decisions, table-tested in tests/unit/test_typesense_content_versions.py and held to Typesense's own
published specification of each version in tests/unit/test_typesense_api_spec.py.

Typesense 30 moved a collection's synonyms into synonym sets and its overrides into curation sets:
sets of their own, linked to collections by the collection's ``synonym_sets`` and ``curation_sets``.
The per-collection routes answer 404 there, and keys scoped to ``synonyms:*`` or ``overrides:*`` get
401 on the sets. So on 30 and later a TypesenseSynonym is an item of a synonym set and a
TypesenseOverride an item of a curation set, and an API key's actions must name the resources that
version has.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

__all__ = [
    "CURATION_SETS",
    "SETS_FROM",
    "SYNONYM_SETS",
    "ServerVersion",
    "SetKind",
    "action_refusal",
    "default_set_name",
    "set_item_path",
    "set_links",
    "set_path",
    "speaks_sets",
]


@dataclass(frozen=True, order=True)
class ServerVersion:
    """A typesense-server release: 0.24.1 is (0, 24, 1), 30.1 is (30, 1, 0)."""

    major: int
    minor: int = 0
    patch: int = 0
    text: str = ""
    """What the server said, for messages."""

    @classmethod
    def parse(cls, said: str) -> ServerVersion | None:
        """The version in ``said`` ("0.24.1", "30.1", "v29.0.rc3"), None when it holds none (a
        nightly build says "nightly"; its API cannot be told from it)."""
        found = re.match(r"^v?(\d+)(?:\.(\d+))?(?:\.(\d+))?", said.strip())
        if found is None:
            return None
        major, minor, patch = (int(part or 0) for part in found.groups())
        return cls(major, minor, patch, said.strip())

    @property
    def uses_sets(self) -> bool:
        """Whether synonyms and overrides live in sets (30 on) rather than under their collection."""
        return (self.major, self.minor) >= SETS_FROM

    def __str__(self) -> str:
        return self.text or f"{self.major}.{self.minor}.{self.patch}"


SETS_FROM = (30, 0)
"""The first version whose synonyms and overrides live in synonym and curation sets."""


@dataclass(frozen=True)
class SetKind:
    """Synonym sets or curation sets."""

    route: str
    """Their route, which is also the collection's field that links them and a key's resource."""
    replaces: str
    """The resource of the per-collection routes before 30: synonyms, overrides."""
    suffix: str
    """Of the set the operator makes for a collection when the spec names none."""
    noun: str
    """How an Event names one: "synonym set", "curation set"."""
    spec_field: str
    """The content object's field that names one: synonymSet, curationSet."""


SYNONYM_SETS = SetKind("synonym_sets", "synonyms", "synonyms", "synonym set", "synonymSet")
CURATION_SETS = SetKind("curation_sets", "overrides", "curations", "curation set", "curationSet")


def speaks_sets(version: ServerVersion | None) -> bool:
    """Whether a server of ``version`` keeps synonyms and overrides in sets; one whose version could
    not be read (a nightly build) is spoken to as before 30."""
    return version is not None and version.uses_sets


def default_set_name(kind: SetKind, collection: str) -> str:
    """The set the operator keeps for a collection's rules when the spec names none: one per
    collection (an alias's name is the alias's: the set follows the alias through migrations)."""
    return f"{collection}-{kind.suffix}"


def set_path(kind: SetKind, name: str) -> str:
    return f"/{kind.route}/{quote(name, safe='')}"


def set_item_path(kind: SetKind, name: str, item: str) -> str:
    return f"{set_path(kind, name)}/items/{quote(item, safe='')}"


def set_links(collection: Mapping[str, Any]) -> dict[str, list[str]]:
    """The sets a collection (as Typesense answers it) links, as a new collection's schema takes them:
    what a migration carries to the next version on 30 and later."""
    kinds = (SYNONYM_SETS, CURATION_SETS)
    return {kind.route: list(collection[kind.route]) for kind in kinds if collection.get(kind.route)}


def action_refusal(actions: Iterable[str], version: ServerVersion) -> str | None:
    """Why ``actions`` cannot be given to a key on ``version`` (a resource that version lacks, with the
    one it has instead), None when every action exists there."""
    for action in actions:
        resource = action.split(":", 1)[0]
        for kind in (SYNONYM_SETS, CURATION_SETS):
            if version.uses_sets and resource == kind.replaces:
                return (
                    f"action {action}: Typesense {version} keeps {kind.replaces} in {kind.route} "
                    f"(a {kind.replaces}:* key gets 401 there); ask for {kind.route}:"
                    f"{action.split(':', 1)[1]} instead"
                )
            if not version.uses_sets and resource == kind.route:
                return (
                    f"action {action}: Typesense {version} has no {kind.route} (they came with 30.0); "
                    f"ask for {kind.replaces}:{action.split(':', 1)[1]} instead"
                )
    return None
