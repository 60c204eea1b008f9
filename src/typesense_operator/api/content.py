"""What lives inside a TypesenseCluster, as objects: TypesenseCollection, TypesenseAlias,
TypesenseSynonym and TypesenseOverride, version v1alpha1 (docs/typesense-content.md).

Each names its cluster in the same namespace and is put into Typesense through the cluster's own API,
with the cluster's admin key. The API server refuses what it can check (CEL: field types, a sorting
field that is not numeric, an empty synonym list); Typesense refuses the rest, in its own words, in the
object's Ready condition. No peer has these: the Go operator declines everything inside a cluster.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal, get_args

from pydantic import ConfigDict, Field

from operator_core.apimodel import ApiModel, cel, immutable
from operator_core.conditions import Condition
from operator_core.crdgen import CustomResource, PrinterColumn
from typesense_operator.api.backups import ClusterReference
from typesense_operator.api.destinations import SecretKeyReference
from typesense_operator.api.v1alpha1 import GROUP, VERSION

__all__ = [
    "API_KEY_ACTION",
    "CONTENT_RESOURCES",
    "FIELD_TYPES",
    "NUMERIC_FIELD_TYPES",
    "TYPESENSE_ALIAS",
    "TYPESENSE_API_KEY",
    "TYPESENSE_COLLECTION",
    "TYPESENSE_OVERRIDE",
    "TYPESENSE_SYNONYM",
    "ApiKeyStatus",
    "CollectionField",
    "CollectionMigration",
    "ContentStatus",
    "TypesenseAliasSpec",
    "TypesenseApiKeySpec",
    "TypesenseCollectionSpec",
    "TypesenseOverrideSpec",
    "TypesenseSynonymSpec",
]

NUMERIC_FIELD_TYPES = ("int32", "int64", "float")
"""What a collection's default_sorting_field may be."""

FieldType = Literal[
    "string",
    "string[]",
    "int32",
    "int32[]",
    "int64",
    "int64[]",
    "float",
    "float[]",
    "bool",
    "bool[]",
    "geopoint",
    "geopoint[]",
    "object",
    "object[]",
    "string*",
    "auto",
]
FIELD_TYPES: tuple[str, ...] = get_args(FieldType)
"""The field types typesense-server 0.24.1 takes."""


def _name_in_typesense(field: str) -> Any:
    """spec.name, spec.id or a set's name: a name in Typesense, one path segment, fixed once set."""
    article = "an" if field == "id" else "a"
    return Field(
        default=None,
        min_length=1,
        max_length=256,
        json_schema_extra=cel(
            ("!self.contains('/')", f"{article} {field} in Typesense cannot contain '/'"),
            ("self == oldSelf", f"spec.{field} is immutable once set"),
        ),
    )


class CollectionField(ApiModel):
    """One field of a collection's schema, as Typesense takes it."""

    name: str = Field(min_length=1, max_length=256)
    """The field's name; `.*` with type auto indexes every field of every document."""
    type: FieldType
    """string, int32, int64, float, bool, geopoint, object (each also as an array: string[] ...),
    string* (a string or an array of strings) or auto (the type of the first document's value)."""
    facet: bool | None = None
    """Whether the field can be faceted on (Typesense's default: false)."""
    index: bool | None = None
    """Whether the field is indexed (false: only stored, returned with the document; default true)."""
    optional: bool | None = None
    """Whether a document may leave the field out (default false)."""
    sort: bool | None = None
    """Whether results can be sorted on the field (default true for numbers, false for strings)."""
    infix: bool | None = None
    """Whether infix (substring) search works on the field (default false; costs memory)."""
    locale: str | None = Field(default=None, max_length=16)
    """The language of the field's text, for its tokenizer (th, ja, ko, zh, ...); default English."""


_SORTING_FIELD_IS_NUMERIC = (
    "!has(self.defaultSortingField) || self.fields.exists(f, f.name == self.defaultSortingField"
    f" && f.type in {list(NUMERIC_FIELD_TYPES)})",
    "defaultSortingField must name a field of the schema whose type is int32, int64 or float",
)
_NESTED_FIELDS_NEED_THE_FLAG = (
    "!self.fields.exists(f, f.type in ['object', 'object[]']) "
    "|| (has(self.enableNestedFields) && self.enableNestedFields)",
    "fields of type object or object[] need enableNestedFields: true",
)


class CollectionMigration(ApiModel):
    """How a change that Typesense cannot make in place (a field's type, the sorting field, the token
    settings) is made: a new collection with the new schema, every document copied into it in
    batches with the synonyms and overrides, what was written meanwhile carried over, the alias moved
    to it at once, the old one dropped after a grace. Searches through the alias never fail, and writes
    through it are not lost."""

    batch_size: int = Field(default=1000, ge=1, le=10000)
    """Documents per import request while copying."""
    drop_old_after_seconds: int = Field(default=300, ge=0, le=2_592_000)
    """How long the old collection is kept after the alias moved (for clients that name it)."""


class TypesenseCollectionSpec(ApiModel):
    """A collection and its schema. Fields added or dropped, and a field's facet, optional, index, sort,
    infix or locale changed, are changed in place, with one PATCH of the collection (a changed field
    is dropped and added again in it); a field's type, defaultSortingField, tokenSeparators,
    symbolsToIndex and enableNestedFields are not changed in place: such a change is refused in the
    Ready condition, with nothing applied."""

    cluster: ClusterReference
    """The cluster the collection lives in."""
    name: str | None = _name_in_typesense("name")
    """The collection's name in Typesense; the object's own name when not set. Immutable."""
    fields: list[CollectionField] = Field(
        min_length=1,
        max_length=1000,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )
    """The schema's fields, each name once."""
    default_sorting_field: str | None = Field(default=None, min_length=1, max_length=256)
    """The numeric field that orders results when a search gives no sort_by. Typesense cannot change it
    in place."""
    token_separators: list[str] | None = Field(default=None, max_length=32)
    """Characters that split words, besides space (such as - or /)."""
    symbols_to_index: list[str] | None = Field(default=None, max_length=32)
    """Symbols that are indexed as words instead of being dropped (such as + or #)."""
    enable_nested_fields: bool | None = None
    """Whether fields of type object and object[] are indexed (Typesense 0.24 and later)."""
    migration: CollectionMigration | None = None
    """Make the changes Typesense cannot make in place by migration. Set only when the collection is
    made: Typesense then holds it as <name>-1, <name>-2, ... behind an alias <name>, which searches and
    writes use."""
    deletion_policy: Literal["Retain", "Delete"] = "Retain"
    """What deleting this object does to the collection: Retain (the default) keeps it and its
    documents in Typesense; Delete drops it, with every document (and, with a migration, its alias)."""

    model_config = ConfigDict(
        json_schema_extra=cel(
            _SORTING_FIELD_IS_NUMERIC,
            _NESTED_FIELDS_NEED_THE_FLAG,
            (
                "has(self.migration) == has(oldSelf.migration)",
                "spec.migration can only be set or removed when the collection is made",
            ),
        )
    )


class TypesenseAliasSpec(ApiModel):
    """An alias: a second name of a collection, moved to another at once (a search through it never
    sees a moment without one)."""

    cluster: ClusterReference
    """The cluster the alias lives in."""
    name: str | None = _name_in_typesense("name")
    """The alias's name in Typesense; the object's own name when not set. Immutable."""
    collection: str = Field(min_length=1, max_length=256)
    """The name in Typesense of the collection the alias points to."""
    deletion_policy: Literal["Retain", "Delete"] = "Delete"
    """What deleting this object does to the alias: Delete (the default) removes it from Typesense
    (the collection stays); Retain keeps it."""


class TypesenseSynonymSpec(ApiModel):
    """A synonym rule of one collection: multi-way (every word stands for the others) or one-way
    (the words stand for root, not the other way)."""

    cluster: ClusterReference
    """The cluster the collection lives in."""
    collection: str = Field(min_length=1, max_length=256, json_schema_extra=immutable("spec.collection"))
    """The name in Typesense of the collection (or of an alias of it). Immutable."""
    id: str | None = _name_in_typesense("id")
    """The rule's id in Typesense; the object's own name when not set. Immutable."""
    synonyms: list[str] = Field(min_length=1, max_length=256)
    """The words or phrases that are synonyms."""
    root: str | None = Field(default=None, min_length=1, max_length=256)
    """One-way: a search for root also finds the synonyms (and not the other way). Not set: multi-way."""
    synonym_set: str | None = _name_in_typesense("synonymSet")
    """Typesense 30 and later: the synonym set the rule is an item of, linked to the collection by the
    operator; ``<collection>-synonyms`` when not set. Refused on earlier versions, whose synonyms
    live under their collection. Immutable."""
    deletion_policy: Literal["Retain", "Delete"] = "Delete"
    """What deleting this object does to the rule: Delete (the default) removes it; Retain keeps it."""

    model_config = ConfigDict(
        json_schema_extra=cel(
            ("has(self.root) || size(self.synonyms) >= 2", "a multi-way synonym needs at least two words")
        )
    )


class OverrideRule(ApiModel):
    """Which searches an override applies to."""

    query: str = Field(min_length=1, max_length=1024)
    """The search text the rule matches."""
    match: Literal["exact", "contains"]
    """exact: the whole search is the query; contains: the search contains it."""


class PinnedHit(ApiModel):
    """A document placed at a position of the results."""

    id: str = Field(min_length=1, max_length=256)
    """The document's id."""
    position: int = Field(ge=1, le=250)
    """Its position in the results, from 1."""


class HiddenHit(ApiModel):
    """A document kept out of the results."""

    id: str = Field(min_length=1, max_length=256)
    """The document's id."""


class TypesenseOverrideSpec(ApiModel):
    """A curation rule of one collection: documents pinned or hidden, a filter, a sort, for the
    searches its rule matches."""

    cluster: ClusterReference
    """The cluster the collection lives in."""
    collection: str = Field(min_length=1, max_length=256, json_schema_extra=immutable("spec.collection"))
    """The name in Typesense of the collection (or of an alias of it). Immutable."""
    id: str | None = _name_in_typesense("id")
    """The rule's id in Typesense; the object's own name when not set. Immutable."""
    rule: OverrideRule
    """Which searches it applies to."""
    includes: list[PinnedHit] | None = Field(default=None, max_length=250)
    """Documents pinned at positions."""
    excludes: list[HiddenHit] | None = Field(default=None, max_length=250)
    """Documents hidden."""
    filter_by: str | None = Field(default=None, min_length=1, max_length=4096)
    """A filter applied to the matching searches, as Typesense's filter_by writes it."""
    sort_by: str | None = Field(default=None, min_length=1, max_length=1024)
    """A sort applied to the matching searches, as Typesense's sort_by writes it (such as year:desc)."""
    remove_matched_tokens: bool | None = None
    """Whether the rule's query is removed from the search text (Typesense's default: true)."""
    filter_curated_hits: bool | None = None
    """Whether the search's own filter also applies to the pinned documents (default false)."""
    curation_set: str | None = _name_in_typesense("curationSet")
    """Typesense 30 and later: the curation set the rule is an item of, linked to the collection by the
    operator; ``<collection>-curations`` when not set. Refused on earlier versions, whose overrides
    live under their collection. Immutable."""
    deletion_policy: Literal["Retain", "Delete"] = "Delete"
    """What deleting this object does to the rule: Delete (the default) removes it; Retain keeps it."""

    model_config = ConfigDict(
        json_schema_extra=cel(
            (
                "has(self.includes) || has(self.excludes) || has(self.filterBy) || has(self.sortBy)",
                "an override needs includes, excludes, filterBy or sortBy",
            )
        )
    )


class RetiringCollection(ApiModel):
    """An earlier version of a migrated collection, kept for its grace."""

    name: str
    """Its name in Typesense (<name>-<n>)."""
    drop_after: datetime
    """When it is dropped: its own migration's end and spec.migration.dropOldAfterSeconds."""


class MigrationStatus(ApiModel):
    """The last migration of a collection."""

    source: str | None = None
    """The collection the documents were copied from."""
    target: str | None = None
    """The collection they were copied into, which the alias names once it is done."""
    documents: int | None = None
    """Documents copied."""
    caught_up: int | None = None
    """Documents written to the source during the copy (or deleted there), or through the alias just
    before it moved, that were carried into the target afterwards."""
    done_at: datetime | None = None
    """When the alias moved to the target."""
    source_dropped_after: datetime | None = None
    """When the source is dropped (not set once it is)."""
    retiring: list[RetiringCollection] = Field(default_factory=list)
    """Every earlier version not dropped yet, each with its own time: the last migration's source and
    those of the migrations before it whose grace is not over (dropped with the object too, under
    deletionPolicy Delete)."""


class ContentStatus(ApiModel):
    """What the operator last saw of the object in Typesense."""

    name: str | None = None
    """Its name (or id) in Typesense; a migrated collection's current collection (<name>-<n>)."""
    alias: str | None = None
    """A collection with spec.migration: the alias that names its current collection."""
    migration: MigrationStatus | None = None
    """A collection with spec.migration: its last migration."""
    cluster_uid: str | None = None
    """The uid of the cluster it was put into: a cluster made again under the same name is another."""
    documents: int | None = None
    """A collection's: its number of documents when last looked at."""
    fields: int | None = None
    """A collection's: its number of fields in Typesense."""
    set: str | None = None
    """A synonym's or an override's, on Typesense 30 and later: the synonym or curation set it is an
    item of."""
    conditions: list[Condition] | None = Field(
        default=None,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
    )
    """Ready is True while Typesense holds what the spec declares; False with the reason (the cluster
    not ready, Typesense's refusal in its own words, a change it cannot make in place)."""
    observed_generation: int | None = None
    """The .metadata.generation the status was last computed from."""


API_KEY_ACTION = (
    r"^([*]|(documents|collections|aliases|synonyms|overrides|synonym_sets|curation_sets|keys|metrics[.]json"
    r"|stats[.]json|debug)"
    r":([*]|search|get|list|create|upsert|update|delete|import|export))$"
)
"""An action of a Typesense key: ``*``, or a resource and what may be done with it (documents:search,
collections:*, keys:create, metrics.json:list ...), as typesense-server checks them. synonyms and
overrides are the resources of 0.24 to 29, synonym_sets and curation_sets those of 30 and later: the
operator refuses a key whose actions name what its cluster's version lacks."""


ApiKeyAction = Annotated[
    str,
    Field(
        min_length=1,
        max_length=64,
        json_schema_extra=cel(
            (
                f"self.matches('{API_KEY_ACTION}')",
                "each action must be *, or a resource (documents, collections, aliases, synonyms, "
                "overrides, synonym_sets, curation_sets, keys, metrics.json, stats.json, debug), a colon "
                "and *, search, get, list, "
                "create, upsert, update, delete, import or export, such as documents:search",
            )
        ),
    ),
]


class ApiKeySecret(ApiModel):
    """Where the operator writes the key's value: a Secret in the object's namespace, made and owned by
    the operator (deleted with the object)."""

    name: str = Field(min_length=1, max_length=253)
    """Name of the Secret."""
    key: str = Field(default="api-key", min_length=1, max_length=253)
    """The data key that holds the value."""


class TypesenseApiKeySpec(ApiModel):
    """A scoped API key of a cluster. Its value is generated by the operator (or taken from valueFrom)
    and written to a Secret, never to the status, a log or an Event. A change of actions, collections,
    description or expiresAt, or a new value of the rotate annotation, rotates it: a new value in the
    Secret, a new key in Typesense, the old key deleted after rotationGraceSeconds. A key deleted in
    Typesense by hand is made again with the same value."""

    cluster: ClusterReference
    """The cluster the key is for."""
    actions: list[ApiKeyAction] = Field(min_length=1, max_length=64)
    """What the key may do, such as documents:search or collections:*."""
    collections: list[Annotated[str, Field(min_length=1, max_length=256)]] = Field(
        min_length=1, max_length=256
    )
    """The collections it may act on (names or regular expressions, such as books_.*); * for all."""
    description: str | None = Field(default=None, max_length=1024)
    """What the key is for, kept in Typesense beside it."""
    expires_at: datetime | None = None
    """When Typesense stops accepting the key; never when not set."""
    secret: ApiKeySecret
    """The Secret the value is written to."""
    value_from: SecretKeyReference | None = None
    """Take the value from this Secret key instead of generating one (a value shared with a system
    outside the cluster); a new value there rotates the key."""
    rotation_grace_seconds: int = Field(default=300, ge=0, le=2_592_000)
    """How long the previous key keeps working after a rotation, for clients to read the new value."""
    deletion_policy: Literal["Retain", "Delete"] = "Delete"
    """What deleting this object does to the key: Delete (the default) deletes it from Typesense, so
    that it stops working; Retain leaves it there (its Secret goes either way)."""


class ApiKeyStatus(ApiModel):
    """The key as the operator last put it into Typesense. Never its value."""

    key_id: int | None = None
    """Its id in Typesense."""
    value_prefix: str | None = None
    """The first 4 characters of its value, as Typesense lists keys."""
    key_hash: str | None = None
    """A hash of what the key was made with (its actions, collections, description, expiry, rotate
    annotation and value source): a change rotates it."""
    rotated_at: datetime | None = None
    """When the current key was made."""
    previous_key_id: int | None = None
    """The key before the last rotation, while it is kept for rotationGraceSeconds."""
    previous_key_deleted_after: datetime | None = None
    """When the previous key is deleted."""
    cluster_uid: str | None = None
    """The uid of the cluster the key was made in."""
    conditions: list[Condition] | None = Field(
        default=None,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
    )
    """Ready is True while Typesense accepts the key in the Secret; False with the reason."""
    observed_generation: int | None = None
    """The .metadata.generation the status was last computed from."""


def _content(
    kind: str,
    plural: str,
    short: str,
    spec: type[ApiModel],
    what: str,
    *columns: PrinterColumn,
    status: type[ApiModel] = ContentStatus,
) -> CustomResource:
    return CustomResource(
        group=GROUP,
        version=VERSION,
        kind=kind,
        plural=plural,
        spec_model=spec,
        status_model=status,
        description=what,
        short_names=(short,),
        categories=("typesense",),
        printer_columns=(
            PrinterColumn("Cluster", ".spec.cluster.name", description="The cluster it lives in"),
            *columns,
            PrinterColumn(
                "Ready", '.status.conditions[?(@.type=="Ready")].status', description="In Typesense"
            ),
            PrinterColumn(
                "Reason",
                '.status.conditions[?(@.type=="Ready")].reason',
                description="Why (not) ready",
                priority=1,
            ),
            PrinterColumn("Age", ".metadata.creationTimestamp", "date"),
        ),
    )


TYPESENSE_COLLECTION = _content(
    "TypesenseCollection",
    "typesensecollections",
    "tscollection",
    TypesenseCollectionSpec,
    "A collection of a TypesenseCluster and its schema, changed in place where Typesense can.",
    PrinterColumn("Collection", ".status.name", description="Its name in Typesense"),
    PrinterColumn("Documents", ".status.documents", "integer", "Documents when last looked at"),
)
TYPESENSE_ALIAS = _content(
    "TypesenseAlias",
    "typesensealiases",
    "tsalias",
    TypesenseAliasSpec,
    "An alias of a collection of a TypesenseCluster.",
    PrinterColumn("Alias", ".status.name", description="Its name in Typesense"),
    PrinterColumn("Collection", ".spec.collection", description="The collection it points to"),
)
TYPESENSE_SYNONYM = _content(
    "TypesenseSynonym",
    "typesensesynonyms",
    "tssynonym",
    TypesenseSynonymSpec,
    "A synonym rule (one-way or multi-way) of a collection of a TypesenseCluster.",
    PrinterColumn("Collection", ".spec.collection", description="The collection it belongs to"),
    PrinterColumn("Root", ".spec.root", description="One-way: the word the synonyms stand for", priority=1),
)
TYPESENSE_OVERRIDE = _content(
    "TypesenseOverride",
    "typesenseoverrides",
    "tsoverride",
    TypesenseOverrideSpec,
    "A curation rule (pinned or hidden documents, a filter) of a collection of a TypesenseCluster.",
    PrinterColumn("Collection", ".spec.collection", description="The collection it belongs to"),
    PrinterColumn("Query", ".spec.rule.query", description="The searches it applies to"),
)

TYPESENSE_API_KEY = _content(
    "TypesenseApiKey",
    "typesenseapikeys",
    "tsapikey",
    TypesenseApiKeySpec,
    "A scoped API key of a TypesenseCluster, its value in a Secret, rotated on a change.",
    PrinterColumn("Secret", ".spec.secret.name", description="Where the value is"),
    PrinterColumn("Key", ".status.keyId", "integer", "Its id in Typesense"),
    PrinterColumn("Rotated", ".status.rotatedAt", "date", "When the current key was made", priority=1),
    status=ApiKeyStatus,
)

CONTENT_RESOURCES = (
    TYPESENSE_COLLECTION,
    TYPESENSE_ALIAS,
    TYPESENSE_SYNONYM,
    TYPESENSE_OVERRIDE,
    TYPESENSE_API_KEY,
)
