"""Managed fields and server-side apply, as kube-apiserver's field manager does them
(k8s.io/apimachinery/pkg/util/managedfields/internal over sigs.k8s.io/structured-merge-diff).

`metadata.managedFields` holds one entry per (manager, operation, apiVersion, subresource): the
fields that manager owns, in FieldsV1. Every create, update and non-apply patch moves the fields it
changed to its manager (the `fieldManager` option, else the User-Agent's product) as an `Update`
entry; fields it removed leave every entry. An apply (`Apply` entry) owns exactly the fields of its
configuration: it fails with a conflict where it would change a field another manager owns, unless
forced, and it removes the fields it applied before and no longer applies unless someone else owns
them.

Upstream builds this from a chain of managers; the same steps happen here, in the same order:
version check, the last-applied annotation's upgrade and sync (for the `kubectl` manager only),
skipping untracked objects, capping the number of update entries, manager identifiers, entry
times, stripping the fields nobody owns (apiVersion, kind, metadata.name and the like), and the
structured merge itself (`structure`).
"""

from __future__ import annotations

import copy
import functools
import json
import unicodedata
from dataclasses import dataclass, field
from typing import Any

from apiserver.apply.fieldpath import FieldSet, FieldsV1Error, Path, PathElement, path_string, values_equal
from apiserver.apply.structure import (
    MapNode,
    StructureError,
    compare,
    ensure_named_fields_are_members,
    merge,
    remove_items,
    structure_of,
    to_field_set,
    validate,
    validation_message,
)
from apiserver.machinery import errors, objectmeta
from apiserver.machinery.errors import StatusError
from apiserver.machinery.gofmt import go_json
from apiserver.machinery.schema import decode_object, parse_rfc3339
from apiserver.machinery.types import JSON
from apiserver.resources.base import ResourceKind

APPLY = "Apply"
UPDATE = "Update"
FIELDS_V1 = "FieldsV1"
LAST_APPLIED_ANNOTATION = "kubectl.kubernetes.io/last-applied-configuration"
# The manager whose apply upgrades from, and keeps in sync, kubectl's client-side apply annotation.
KUBECTL_MANAGER = "kubectl"
FIELD_MANAGER_MAX_LENGTH = 128
# Update entries beyond this many are merged, oldest first, into "ancient-changes" entries.
MAX_UPDATE_MANAGERS = 10
ANCIENT_CHANGES = "ancient-changes"
BEFORE_FIRST_APPLY = "before-first-apply"
UNKNOWN_MANAGER = "unknown"
_CURRENT_OPERATION = "current-operation"
_ENTRY_KEYS = ("manager", "operation", "apiVersion", "time", "fieldsType", "fieldsV1", "subresource")


def _path(*names: str) -> Path:
    return tuple(PathElement.field(name) for name in names)


# Fields no manager ever owns: they are the server's, or name the object.
STRIPPED_FIELDS = FieldSet(
    [
        _path("apiVersion"),
        _path("kind"),
        _path("metadata"),
        _path("metadata", "name"),
        _path("metadata", "namespace"),
        _path("metadata", "creationTimestamp"),
        _path("metadata", "selfLink"),
        _path("metadata", "uid"),
        _path("metadata", "clusterName"),
        _path("metadata", "generation"),
        _path("metadata", "managedFields"),
        _path("metadata", "resourceVersion"),
    ]
)


class ManagedFieldsError(ValueError):
    """managedFields that cannot be decoded."""


# ----------------------------------------------------------------------------- managers


def _is_go_printable(char: str) -> bool:
    return char == " " or unicodedata.category(char)[0] in "LMNPS"


def prefix_from_user_agent(user_agent: str) -> str:
    """The manager a request without fieldManager gets: its User-Agent up to the first '/', without
    unprintable characters, cut to 128 bytes."""
    out = ""
    size = 0
    for char in user_agent.split("/")[0]:
        if not _is_go_printable(char):
            continue
        width = len(char.encode())
        if size + width > FIELD_MANAGER_MAX_LENGTH:
            break
        out += char
        size += width
    return out


def manager_or_user_agent(manager: str, user_agent: str) -> str:
    return manager if manager else prefix_from_user_agent(user_agent)


@functools.lru_cache(maxsize=1024)
def manager_identifier(manager: str, operation: str, api_version: str, subresource: str = "") -> str:
    """The key of a managedFields entry: its manager, operation, apiVersion (not for Apply, whose
    entry follows the applier across versions) and subresource, as Go's JSON of the entry."""
    parts = [("manager", manager), ("operation", operation)]
    if operation != APPLY:
        parts.append(("apiVersion", api_version))
    parts.append(("subresource", subresource))
    return "{" + ",".join(f"{go_json(k)}:{go_json(v)}" for k, v in parts if v) + "}"


def print_manager(identifier: str) -> str:
    """How a conflict names a manager: `"name"`, plus `using <apiVersion>` for Update entries."""
    try:
        entry = json.loads(identifier)
    except ValueError:
        return errors.go_quote(identifier)
    if not isinstance(entry, dict):
        return errors.go_quote(identifier)
    shown = errors.go_quote(str(entry.get("manager") or ""))
    if entry.get("subresource"):
        shown += f" with subresource {errors.go_quote(str(entry['subresource']))}"
    if entry.get("operation") == UPDATE:
        return f"{shown} using {entry.get('apiVersion') or ''}"
    return shown


# ----------------------------------------------------------------------------- entries


@dataclass
class VersionedSet:
    fields: FieldSet
    api_version: str
    applied: bool


@dataclass
class Managed:
    """Decoded managedFields: each manager identifier's fields, and the entries' times."""

    fields: dict[str, VersionedSet] = field(default_factory=dict)
    times: dict[str, str | None] = field(default_factory=dict)

    def copy(self) -> Managed:
        return Managed(dict(self.fields), dict(self.times))


def decode_managed_fields(entries: Any) -> Managed:
    """metadata.managedFields as the field manager works with them; ManagedFieldsError if any entry
    is not a valid one."""
    managed = Managed()
    if entries is None:
        return managed
    if not isinstance(entries, list):
        raise ManagedFieldsError("managedFields must be a list")
    for index, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise ManagedFieldsError(f"managed fields entry {index} is not an object")
        operation = entry.get("operation") or ""
        if operation not in (APPLY, UPDATE):
            raise ManagedFieldsError("operation must be `Apply` or `Update`")
        api_version = entry.get("apiVersion") or ""
        if not api_version:
            raise ManagedFieldsError("apiVersion must not be empty")
        fields_type = entry.get("fieldsType") or ""
        if fields_type == "":
            raise ManagedFieldsError(f"missing fieldsType in managed fields entry {index}")
        if fields_type != FIELDS_V1:
            raise ManagedFieldsError(f'invalid fieldsType "{fields_type}" in managed fields entry {index}')
        identifier = manager_identifier(
            str(entry.get("manager") or ""), operation, str(api_version), str(entry.get("subresource") or "")
        )
        try:
            fields = FieldSet.from_fields_v1(entry.get("fieldsV1") or {})
        except FieldsV1Error as exc:
            raise ManagedFieldsError(f"error decoding set: {exc}") from None
        managed.fields[identifier] = VersionedSet(fields, str(api_version), operation == APPLY)
        managed.times[identifier] = entry.get("time")
    return managed


def _seconds(time: str | None) -> float:
    moment = parse_rfc3339(time) if time else None
    return moment.timestamp() if moment is not None else 0.0


def encode_managed_fields(managed: Managed) -> list[JSON]:
    """The managedFields entries, in upstream's order (Apply before Update, then oldest first, then by
    manager, apiVersion and subresource)."""
    entries: list[JSON] = []
    for identifier, versioned in managed.fields.items():
        named = json.loads(identifier)
        entry: JSON = {"manager": named.get("manager", "")}
        entry["operation"] = APPLY if versioned.applied else named.get("operation", "")
        entry["apiVersion"] = versioned.api_version
        time = managed.times.get(identifier)
        if time:
            entry["time"] = time
        entry["fieldsType"] = FIELDS_V1
        entry["fieldsV1"] = versioned.fields.to_fields_v1()
        entry["subresource"] = named.get("subresource", "")
        entries.append({k: v for k, v in entry.items() if v not in ("", None)})
    if len(entries) < 2:
        return entries  # (a create's one entry: no timestamp to parse for an order)
    entries.sort(
        key=lambda e: (
            e.get("operation", ""),
            _seconds(e.get("time")),
            e.get("manager", ""),
            e.get("apiVersion", ""),
            e.get("subresource", ""),
        )
    )
    return entries


def requests_reset(raw: Any) -> bool:
    """Whether a request body asks to clear managedFields: an empty list, or one empty entry."""
    meta = raw.get("metadata") if isinstance(raw, dict) else None
    entries = meta.get("managedFields") if isinstance(meta, dict) else None
    if not isinstance(entries, list):
        return False
    if not entries:
        return True
    only = entries[0]
    return (
        len(entries) == 1
        and isinstance(only, dict)
        and all(only.get(key) in (None, "") for key in _ENTRY_KEYS)
    )


def restore_unchanged_times(new: JSON, old: JSON) -> None:
    """Where an update changed nothing but managedFields times, keeps the old times (upstream's
    IgnoreManagedFieldsTimestampsTransformer), so that a no-op is not written."""
    old_entries = objectmeta.metadata(old).get("managedFields") or []
    new_entries = objectmeta.metadata(new).get("managedFields") or []
    if len(old_entries) != len(new_entries) or not new_entries:
        return
    if all(n.get("time") == o.get("time") for n, o in zip(new_entries, old_entries, strict=True)):
        return

    def timeless(entry: JSON) -> JSON:
        return {k: v for k, v in entry.items() if k != "time"}

    if not all(values_equal(timeless(n), timeless(o)) for n, o in zip(new_entries, old_entries, strict=True)):
        return
    restored = [
        {**n, "time": o["time"]} if o.get("time") else timeless(n)
        for n, o in zip(new_entries, old_entries, strict=True)
    ]
    candidate = copy.copy(new)
    candidate["metadata"] = {**new["metadata"], "managedFields": restored}
    if values_equal(candidate, old):
        new["metadata"]["managedFields"] = [
            {key: entry[key] for key in _ENTRY_KEYS if key in entry} for entry in restored
        ]


# ----------------------------------------------------------------------------- conflicts


class ApplyConflicts(Exception):
    """Fields an apply would take from other managers: (manager identifier, path) pairs."""

    def __init__(self, conflicts: list[tuple[str, Path]]) -> None:
        super().__init__(conflicts)
        self.conflicts = conflicts

    def status_error(self) -> StatusError:
        """upstream's NewConflictError: 409 Conflict with one cause per conflicting field."""
        causes = [
            {
                "reason": "FieldManagerConflict",
                "message": f"conflict with {print_manager(manager)}",
                "field": path_string(path),
            }
            for manager, path in self.conflicts
        ]
        if len(self.conflicts) == 1:
            manager, path = self.conflicts[0]
            message = (
                f"Apply failed with 1 conflict: conflict with {print_manager(manager)}: {path_string(path)}"
            )
        else:
            lines: list[str] = []
            for manager in sorted({manager for manager, _ in self.conflicts}):
                lines.append(f"conflicts with {print_manager(manager)}:")
                lines += [f"- {path_string(path)}" for m, path in self.conflicts if m == manager]
            message = f"Apply failed with {len(self.conflicts)} conflicts: " + "\n".join(lines)
        return StatusError(409, "Conflict", message, {"causes": causes})


# ----------------------------------------------------------------------------- the field manager


def _metadata(obj: JSON) -> JSON:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def _without_managed_fields(obj: JSON) -> JSON:
    out = copy.deepcopy(obj)
    meta = out.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
    return out


def _given_up_without_managed_fields(obj: JSON) -> JSON:
    """`obj` without managedFields, for a caller that gives `obj` up: a new top level and metadata,
    the rest shared (no deep copy of a body the request decoded for this write alone)."""
    out = dict(obj)
    meta = out.get("metadata")
    if isinstance(meta, dict):
        out["metadata"] = {key: value for key, value in meta.items() if key != "managedFields"}
    return out


def _with_managed_fields(obj: JSON, managed: Managed) -> JSON:
    meta = objectmeta.metadata(obj)
    entries = encode_managed_fields(managed)
    if entries:
        meta["managedFields"] = entries
    else:
        meta.pop("managedFields", None)
    return obj


def _group_version_kind(api_version: Any, kind: Any) -> str:
    """schema.GroupVersionKind.String() of an object's apiVersion and kind."""
    text = api_version if isinstance(api_version, str) else ""
    kind_text = kind if isinstance(kind, str) else ""
    group, version = "", text
    if text.count("/") == 1:
        group, version = text.split("/")
    elif text.count("/") > 1:
        version = ""
    return f"{group}/{version}, Kind={kind_text}"


class FieldManager:
    """Tracks managed fields and applies configurations for one kind."""

    def __init__(self, kind: ResourceKind) -> None:
        self.kind = kind
        self.api_version = kind.api_version
        self.root: MapNode = structure_of(kind.model)
        self.gvk = f"{kind.group}/{kind.version}, Kind={kind.kind}"
        zero = decode_object(self.kind.model, {}, kind=self.kind.kind, version=self.kind.version).obj
        self._empty: JSON = {"kind": self.kind.kind, "apiVersion": self.api_version, **zero}

    def empty_object(self) -> JSON:
        """The zero object of the kind, as upstream's `New()` gives it: what a create is compared to.
        (Decoded once; each caller gets its own copy.)"""
        return copy.deepcopy(self._empty)

    # ------------------------------------------------------------------ update

    def create(self, new: JSON, manager: str, *, reset: bool = False) -> JSON:
        """update() of a create: from the empty object (read, never changed, so not copied)."""
        return self.update(self._empty, new, manager, reset=reset)

    def update(
        self, live: JSON, new: JSON, manager: str, *, reset: bool = False, subresource: str = ""
    ) -> JSON:
        """`new` with its managedFields updated for a create, update or non-apply patch from `live`
        (the empty object for a create) by `manager`. `reset`: the request sent an empty
        managedFields list. On any failure the live object's managedFields are kept. `new` is the
        caller's to give up (decoded for this write): the answer shares its parts. `subresource`:
        the one written through (its entry names it)."""
        try:
            managed = self._live_or_new(live, new, reset)
            out = _given_up_without_managed_fields(new)
            managed = self._update_managers(live, out, managed, manager, subresource)
            return _with_managed_fields(out, managed)
        except ValueError:
            out = copy.deepcopy(new)
            entries = _metadata(live).get("managedFields")
            if entries:
                objectmeta.metadata(out)["managedFields"] = copy.deepcopy(entries)
            else:
                objectmeta.metadata(out).pop("managedFields", None)
            return out

    def _live_or_new(self, live: JSON, new: JSON, reset: bool) -> Managed:
        if reset:
            return Managed()
        try:
            managed = decode_managed_fields(_metadata(new).get("managedFields"))
            if managed.fields:
                return managed
        except ManagedFieldsError:
            pass
        try:
            return decode_managed_fields(_metadata(live).get("managedFields"))
        except ManagedFieldsError:
            return Managed()

    def _update_managers(
        self, live: JSON, new: JSON, managed: Managed, manager: str, subresource: str = ""
    ) -> Managed:
        # An object that carries no managed fields is not tracked until it is applied to; a create is.
        if not managed.fields and _metadata(live).get("uid"):
            return managed
        return self._cap_update_managers(self._track_update(live, new, managed, manager, subresource))

    def _track_update(
        self, live: JSON, new: JSON, managed: Managed, manager: str, subresource: str = ""
    ) -> Managed:
        identifier = manager_identifier(manager or UNKNOWN_MANAGER, UPDATE, self.api_version, subresource)
        out = managed.copy()
        out.fields = self._structured_update(live, new, out.fields, _CURRENT_OPERATION)
        self._strip(out.fields, _CURRENT_OPERATION)
        current = out.fields.pop(_CURRENT_OPERATION, None)
        if current is not None:
            # The request changed something: its fields join the manager's, whose time is now.
            previous = out.fields.get(identifier)
            fields = current.fields.union(previous.fields) if previous else current.fields
            out.fields[identifier] = VersionedSet(fields, current.api_version, current.applied)
            out.times[identifier] = objectmeta.now_text()
        return out

    def _structured_update(
        self, live: JSON, new: JSON, managers: dict[str, VersionedSet], workflow: str
    ) -> dict[str, VersionedSet]:
        managers = self._reconcile(managers)
        comparison = compare(self.root, live, new)
        managers = self._take_changes(comparison, managers, workflow, force=True)
        own = managers.get(workflow)
        fields = own.fields if own else FieldSet()
        fields = fields.difference(comparison.removed).union(comparison.modified).union(comparison.added)
        if fields.empty():
            managers.pop(workflow, None)
        else:
            managers[workflow] = VersionedSet(fields, self.api_version, False)
        return managers

    def _reconcile(self, managers: dict[str, VersionedSet]) -> dict[str, VersionedSet]:
        # Entries for versions this server does not serve cannot be converted: upstream drops them.
        return {m: vs for m, vs in managers.items() if vs.api_version == self.api_version}

    def _take_changes(
        self, comparison: Any, managers: dict[str, VersionedSet], workflow: str, *, force: bool
    ) -> dict[str, VersionedSet]:
        """The changed fields leave every other manager (conflicts unless forced); removed fields
        leave everyone; empty entries go."""
        changed = comparison.modified.union(comparison.added)
        conflicts: dict[str, FieldSet] = {}
        for manager, versioned in managers.items():
            if manager == workflow:
                continue
            taken = versioned.fields.intersection(changed)
            if not taken.empty():
                conflicts[manager] = taken
        if conflicts and not force:
            raise ApplyConflicts(
                [(manager, path) for manager in sorted(conflicts) for path in conflicts[manager]]
            )
        out = dict(managers)
        for manager, versioned in managers.items():
            if manager == workflow:
                continue
            fields = versioned.fields
            if manager in conflicts:
                fields = fields.difference(conflicts[manager])
            if not comparison.removed.empty():
                fields = fields.difference(comparison.removed)
            out[manager] = VersionedSet(fields, versioned.api_version, versioned.applied)
        return {m: vs for m, vs in out.items() if not vs.fields.empty()}

    @staticmethod
    def _strip(managers: dict[str, VersionedSet], manager: str) -> None:
        versioned = managers.get(manager)
        if versioned is None:
            return
        fields = versioned.fields.difference(STRIPPED_FIELDS)
        if fields.empty():
            del managers[manager]
        else:
            managers[manager] = VersionedSet(fields, versioned.api_version, versioned.applied)

    @staticmethod
    def _cap_update_managers(managed: Managed) -> Managed:
        updaters = [m for m, vs in managed.fields.items() if not vs.applied]
        if len(updaters) <= MAX_UPDATE_MANAGERS:
            return managed
        updaters.sort(key=lambda m: (_seconds(managed.times.get(m)), m))
        first_of_version: dict[str, str] = {}
        length = len(updaters)
        for manager in updaters:
            if length <= MAX_UPDATE_MANAGERS:
                break
            versioned = managed.fields[manager]
            version = versioned.api_version
            bucket = manager_identifier(ANCIENT_CHANGES, UPDATE, version)
            if version not in first_of_version:
                first_of_version[version] = manager
                continue
            if bucket not in managed.fields:
                managed.fields[bucket] = managed.fields.pop(first_of_version[version])
            managed.fields[bucket] = VersionedSet(
                versioned.fields.union(managed.fields[bucket].fields), version, versioned.applied
            )
            managed.fields.pop(manager, None)
            length -= 1
            managed.times[bucket] = managed.times.get(manager)
        return managed

    # ------------------------------------------------------------------ apply

    def apply(self, live: JSON, config: JSON, manager: str, *, force: bool, subresource: str = "") -> JSON:
        """The live object (the empty object when there is none) with `config` applied by `manager`
        (through `subresource`, whose entry names it), managedFields included. Raises StatusError:
        400 for a configuration that is not an object of this kind, 409 for conflicts."""
        try:
            managed = decode_managed_fields(_metadata(live).get("managedFields"))
        except ManagedFieldsError as exc:
            raise errors.internal_error(f"failed to decode managed fields: {exc}") from None
        self.check_configuration(config)
        try:
            identifier = manager_identifier(manager or UNKNOWN_MANAGER, APPLY, self.api_version, subresource)
            obj, managed = self._apply_upgrading_last_applied(
                live, config, managed, identifier, manager, force
            )
        except ApplyConflicts as conflicts:
            raise conflicts.status_error() from None
        annotations = _metadata(obj).get("annotations")
        if (
            manager == KUBECTL_MANAGER
            and isinstance(annotations, dict)
            and annotations.get(LAST_APPLIED_ANNOTATION)
        ):
            # kubectl's client-side apply annotation, when present, follows its server-side applies.
            annotations[LAST_APPLIED_ANNOTATION] = _last_applied(config)
        return _with_managed_fields(obj, managed)

    def check_configuration(self, config: JSON) -> None:
        """StatusError 400 unless `config` is an apply configuration of this kind: its apiVersion
        and kind, no managedFields, every field of the schema (upstream's typed patch object)."""
        gvk = _group_version_kind(config.get("apiVersion"), config.get("kind"))
        if gvk != self.gvk:
            raise errors.bad_request(f"invalid object type: {gvk}")
        if isinstance(_metadata(config).get("managedFields"), list):
            raise errors.bad_request("metadata.managedFields must be nil")
        problems = validate(self.root, config)
        if problems:
            meta = _metadata(config)
            where = f"{meta.get('namespace') or ''}/{meta.get('name') or ''}; {self.gvk}"
            raise errors.bad_request(
                f"failed to create typed patch object ({where}): {validation_message(problems)}"
            )

    def _apply_upgrading_last_applied(
        self, live: JSON, config: JSON, managed: Managed, identifier: str, manager: str, force: bool
    ) -> tuple[JSON, Managed]:
        try:
            return self._apply_tracked(live, config, managed, identifier, force)
        except ApplyConflicts as conflicts:
            if manager != KUBECTL_MANAGER:  # the manager's name, whatever its subresource (upstream)
                raise
            # Moving from client-side to server-side apply: fields kubectl applied before (as its
            # annotation records) and that still have those values are not conflicts.
            allowed = self._allowed_by_last_applied(live)
            if allowed is None:
                raise
            remaining = [(m, path) for m, path in conflicts.conflicts if not allowed.has(path)]
            if remaining:
                raise ApplyConflicts(remaining) from None
            return self._apply_tracked(live, config, managed, identifier, True)

    def _allowed_by_last_applied(self, live: JSON) -> FieldSet | None:
        annotations = _metadata(live).get("annotations")
        text = annotations.get(LAST_APPLIED_ANNOTATION) if isinstance(annotations, dict) else None
        if not text:
            return None
        try:
            last = json.loads(text)
        except ValueError:
            return None
        if not isinstance(last, dict) or last.get("apiVersion") != self.api_version:
            return None
        if validate(self.root, last):
            return None
        comparison = compare(self.root, last, live)
        return (
            to_field_set(self.root, last)
            .difference(comparison.modified)
            .difference(comparison.added)
            .difference(comparison.removed)
        )

    def _apply_tracked(
        self, live: JSON, config: JSON, managed: Managed, identifier: str, force: bool
    ) -> tuple[JSON, Managed]:
        if not managed.fields:
            # The first apply to an object nobody tracked: what is there belongs to an Update
            # manager named before-first-apply (nothing, for an object being created).
            managed = self._cap_update_managers(
                self._track_update(self.empty_object(), live, managed, BEFORE_FIRST_APPLY)
            )
        merged, fields = self._structured_apply(live, config, managed.fields, identifier, force)
        self._strip(fields, identifier)
        out = Managed(fields, dict(managed.times))
        if merged is None:
            return _without_managed_fields(live), out
        out.times[identifier] = objectmeta.now_text()
        return merged, out

    def _structured_apply(
        self,
        live: JSON,
        config: JSON,
        managers: dict[str, VersionedSet],
        manager: str,
        force: bool,
    ) -> tuple[JSON | None, dict[str, VersionedSet]]:
        managers = self._reconcile(managers)
        try:
            merged = merge(self.root, live, config)
        except StructureError as exc:
            raise errors.internal_error(f"failed to merge config: {exc}") from None
        last = managers.get(manager)
        managers[manager] = VersionedSet(to_field_set(self.root, config), self.api_version, True)
        merged = self._prune(merged, managers, last)
        managers = self._take_changes(compare(self.root, live, merged), managers, manager, force=force)
        if values_equal(live, merged):
            return None, managers
        return copy.deepcopy(merged), managers

    def _members(self, fields: FieldSet) -> FieldSet:
        return ensure_named_fields_are_members(fields, self.root)

    def _prune(self, merged: JSON, managers: dict[str, VersionedSet], last: VersionedSet | None) -> JSON:
        """Removes what the applier applied last time, does not apply now, and nobody else owns."""
        if last is None or last.fields.empty():
            return merged
        last_fields = self._members(last.fields)
        pruned = remove_items(self.root, merged, last_fields)
        # Put back whatever anyone (the applier's new configuration included) owns.
        owned = FieldSet()
        for versioned in managers.values():
            owned = owned.union(versioned.fields)
        merged_fields = self._members(to_field_set(self.root, merged))
        pruned_fields = self._members(to_field_set(self.root, pruned))
        pruned = remove_items(
            self.root, merged, merged_fields.difference(pruned_fields.union(self._members(owned)))
        )
        # Only what the applier owned last time is removed; unowned fields stay.
        pruned_fields = self._members(to_field_set(self.root, pruned))
        result = remove_items(
            self.root, merged, merged_fields.difference(pruned_fields).intersection(last_fields)
        )
        return result if isinstance(result, dict) else merged


def _last_applied(config: JSON) -> str:
    """The last-applied annotation kubectl would write for `config`: its JSON without the annotation."""
    out = copy.deepcopy(config)
    annotations = _metadata(out).get("annotations")
    if isinstance(annotations, dict):
        annotations.pop(LAST_APPLIED_ANNOTATION, None)
    return go_json(out) + "\n"
