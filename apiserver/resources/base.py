"""What a served kind provides to the generic registry: its names, its schema, its strategy.

Objects travel as plain JSON dicts (`JSON`). A kind's `decode` turns a request body that already
parsed as JSON/YAML into the canonical stored shape: unknown fields pruned (and reported), Go's
omitempty applied, scheme defaults set. Everything else is the strategy of k8s.io/apiserver's
`rest.RESTCreateStrategy`/`RESTUpdateStrategy` for that kind.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from datetime import datetime
from typing import Any, ClassVar

from pydantic import BaseModel

from apiserver.machinery.errors import FieldError
from apiserver.machinery.printing import TableColumn, rfc3339
from apiserver.machinery.schema import Decoded
from apiserver.machinery.selectors import (
    DEFAULT_SELECTABLE_FIELDS,
    field_label_not_known,
    field_label_not_supported,
)
from apiserver.machinery.types import JSON
from apiserver.patch.strategic import PatchSchema


class ResourceKind(ABC):
    """One served kind. Subclasses set the class attributes and implement the strategy."""

    group: ClassVar[str]
    version: ClassVar[str]
    kind: ClassVar[str]
    list_kind: ClassVar[str]
    plural: ClassVar[str]
    singular: ClassVar[str]
    short_names: ClassVar[tuple[str, ...]] = ()
    categories: ClassVar[tuple[str, ...]] = ()
    namespaced: ClassVar[bool] = True
    # The pydantic model of the whole object (apiVersion, kind, metadata, ...): the schema that
    # decoding, OpenAPI and `kubectl explain` use.
    model: ClassVar[type[BaseModel]]
    # How strategic merge patch treats the kind's lists (merge keys, atomic lists).
    patch_schema: ClassVar[PatchSchema]
    # The field label conversion upstream registers for the kind, if any (Event has one,
    # RoleBinding does not): each label a field selector may name -> the key of `selectable_fields`
    # it matches. None: upstream's default (metadata.name and metadata.namespace, unchanged). It
    # also decides the wording of the refusal of any other label.
    field_label_conversion: ClassVar[Mapping[str, str] | None] = None
    # Server-side printing: every column upstream's printer defines for the kind, wide ones
    # (priority 1) included, since the server always prints wide and kubectl drops what it hides.
    # Empty: upstream's generic convertor (rest.NewDefaultTableConvertor), Name and Created At,
    # whose cells the default `table_row` gives.
    table_columns: ClassVar[tuple[TableColumn, ...]] = ()
    # The Go type upstream's handlers name in conversion errors (`*rbac.RoleBinding`).
    go_type: ClassVar[str] = ""
    # Whether a delete's propagation options set the garbage collector's finalizers (orphan,
    # foregroundDeletion); False where upstream's strategy declares the Unsupported policy.
    garbage_collected: ClassVar[bool] = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"

    @abstractmethod
    def decode(self, data: JSON, *, unstructured: bool = False) -> Decoded:
        """Canonical object from parsed JSON. Raises schema.DecodeError (400 BadRequest) on a type
        error, naming the field, as upstream's decoder does; with `unstructured`, as upstream's
        unstructured converter (a strategic merge patch's) does."""

    @abstractmethod
    def prepare_for_create(self, obj: JSON) -> None:
        """Clears or sets what the server owns on create (in place)."""

    @abstractmethod
    def prepare_for_update(self, obj: JSON, old: JSON) -> None:
        """Clears or carries over what the server owns on update (in place)."""

    @abstractmethod
    def validate(self, obj: JSON) -> list[FieldError]:
        """All errors of a new object: metadata and the kind's own fields."""

    @abstractmethod
    def validate_update(self, obj: JSON, old: JSON) -> list[FieldError]:
        """All errors of an update from `old` to `obj` (including immutability)."""

    @property
    def field_labels(self) -> Mapping[str, str]:
        """The labels a field selector may name, each with the field it matches (the conversion)."""
        if self.field_label_conversion is not None:
            return self.field_label_conversion
        return {label: label for label in DEFAULT_SELECTABLE_FIELDS}

    def field_label_error(self, label: str) -> str:
        """The message for a field selector on a label the kind's conversion refuses."""
        if self.field_label_conversion is not None:
            return field_label_not_supported(label)
        return field_label_not_known(label)

    @property
    def selectable_field_names(self) -> frozenset[str]:
        """The keys of any object's field set: what an already converted selector may name."""
        return frozenset(self.selectable_fields({"metadata": {}}))

    @abstractmethod
    def selectable_fields(self, obj: JSON) -> dict[str, str]:
        """The field set field selectors match against (metadata.name, metadata.namespace, ...)."""

    def table_row(self, obj: JSON, now: datetime) -> list[Any]:
        """The cells of `obj`'s row, one per entry of `table_columns`; ages are relative to `now`."""
        meta = obj.get("metadata")
        meta = meta if isinstance(meta, dict) else {}
        return [meta.get("name") or "", rfc3339(meta.get("creationTimestamp"))]
