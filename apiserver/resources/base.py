"""The kind contract: everything kind-specific the generic server reads from a served kind.

Names, schema and strategy for the registry; selectable fields and their conversion; printer
columns; the patch schema; how long objects live (and the flag that says so); the admission its
writes go through; the verbs upstream's aggregated admin/edit/view roles grant on it. The server
reads these generically: adding a kind is one module declaring them, plus its entry in `KINDS`.

Objects travel as plain JSON dicts (`JSON`). A kind's `decode` turns a request body that already
parsed as JSON/YAML into the canonical stored shape: unknown fields pruned (and reported), Go's
omitempty applied, scheme defaults set. Everything else is the strategy of k8s.io/apiserver's
`rest.RESTCreateStrategy`/`RESTUpdateStrategy` for that kind.
"""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar, Protocol

from pydantic import BaseModel

from apiserver.machinery.errors import FieldError, GroupResource
from apiserver.machinery.printing import TableColumn, rfc3339
from apiserver.machinery.schema import Decoded
from apiserver.machinery.selectors import (
    DEFAULT_SELECTABLE_FIELDS,
    field_label_not_known,
    field_label_not_supported,
)
from apiserver.machinery.types import JSON
from apiserver.machinery.user import UserInfo
from apiserver.patch.schema import OBJECT_META_PATCH_SCHEMA, PatchSchema

READ_VERBS = ("get", "list", "watch")
WRITE_VERBS = ("create", "update", "patch", "delete", "deletecollection")
# Upstream's aggregated ClusterRoles a kind adds rules to (see `ResourceKind.role_verbs`).
ADMIN_ROLE = "admin"
EDIT_ROLE = "edit"
VIEW_ROLE = "view"

Admission = Callable[[UserInfo | None, str, JSON, JSON | None], Awaitable[None]]
"""A check a write passes before validation: (user, namespace, new object, old object or None);
it refuses by raising a StatusError."""


class ServerChecks(Protocol):
    """The checks only the running server can make, which a kind's admission may use."""

    @property
    def escalation_check(self) -> Admission:
        """Refuses a write that grants permissions its author does not hold (upstream's
        rbac escalation check, on RoleBindings)."""
        ...

    async def allows(
        self, user: UserInfo, verb: str, group: str, resource: str, namespace: str, name: str = ""
    ) -> bool:
        """Whether `user` may `verb` `resource` of `group` in `namespace` ("": every namespace),
        the object `name` if given."""
        ...


@dataclass(frozen=True)
class Expiry:
    """Objects that live a fixed time after their last write (a storage TTL), and the command-line
    flag that sets it, as kube-apiserver's `--event-ttl`."""

    flag: str
    default_seconds: int
    help: str


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
    # How strategic merge patch treats the kind's lists (merge keys, atomic lists); ObjectMeta's
    # alone for a kind with no list fields of its own that merge.
    patch_schema: ClassVar[PatchSchema] = OBJECT_META_PATCH_SCHEMA
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
    # Objects expire this long after their last write (None: they live until deleted).
    expiry: ClassVar[Expiry | None] = None
    # The verbs each of upstream's aggregated ClusterRoles (`ADMIN_ROLE`, `EDIT_ROLE`,
    # `VIEW_ROLE`) grants on the kind. Each role takes in the one below it (admin holds edit's
    # rules, edit view's), so a verb is named at the lowest role that grants it.
    role_verbs: ClassVar[Mapping[str, tuple[str, ...]]] = {}
    # Whether the kind serves /status, through which only the status is written (and writes of the
    # object leave the status as it was: `keep_to_subresource`).
    status_subresource: ClassVar[bool] = False

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"

    @property
    def group_resource(self) -> GroupResource:
        return GroupResource(self.group, self.plural)

    def admission(self, checks: ServerChecks) -> Admission | None:
        """The check the kind's writes go through before validation, if any."""
        return None

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

    def reset_for_status(self, obj: JSON, old: JSON) -> None:
        """What a write through /status may not change, taken back from `old` (in place): all
        but the status, the managed fields and the resourceVersion the request names (upstream's
        status strategy)."""
        meta = obj.get("metadata")
        given: JSON = meta if isinstance(meta, dict) else {}
        kept = {key: given[key] for key in ("managedFields", "resourceVersion") if key in given}
        status = obj.get("status")
        obj.clear()
        obj.update(copy.deepcopy(old))
        obj.pop("status", None)
        if status is not None:
            obj["status"] = status
        old_meta = obj.setdefault("metadata", {})
        old_meta.pop("managedFields", None)
        old_meta.update(kept)

    def keep_status(self, obj: JSON, old: JSON | None) -> None:
        """A write of the object itself does not change the status of a kind that serves /status:
        `old`'s is put back (none for a create), in place."""
        if not self.status_subresource:
            return
        obj.pop("status", None)
        if old is not None and "status" in old:
            obj["status"] = copy.deepcopy(old["status"])

    def keep_to_subresource(self, obj: JSON, old: JSON, subresource: str) -> None:
        """What a write through `subresource` ("": the object) may change, and nothing else, kept
        of `obj` (the reset fields of upstream's strategies, applied before fields are tracked and
        again after mutating admission)."""
        if subresource == "status":
            self.reset_for_status(obj, old)
        else:
            self.keep_status(obj, old)

    def validate_status_update(self, obj: JSON, old: JSON) -> list[FieldError]:
        """All errors of a write through /status (the kind's status checks)."""
        return []

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
