"""The generic store of one kind: metadata, create/update/patch/delete/list/watch over `Storage`.

It plays the part of k8s.io/apiserver's `registry/generic/registry.Store`: it owns system metadata
(uid, creationTimestamp, deletionTimestamp; generation is kept, never moved), preconditions,
optimistic concurrency, dry-run, finalizers, field validation, managedFields and server-side apply
(through `managedfields.FieldManager`), and knows nothing of HTTP. Objects are plain dicts;
`metadata.resourceVersion` is the storage revision, set on every read and never stored.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from apiserver.apply import fieldmanager as managedfields
from apiserver.apply.fieldmanager import FieldManager
from apiserver.machinery import continue_token, errors, objectmeta
from apiserver.machinery.errors import GroupResource, StatusError
from apiserver.machinery.metav1 import validate_common_object_meta_update
from apiserver.machinery.options import (
    FIELD_VALIDATION_IGNORE,
    FIELD_VALIDATION_STRICT,
    FIELD_VALIDATION_WARN,
    MATCH_EXACT,
    MATCH_NOT_OLDER_THAN,
    DeleteOptions,
    ListOptions,
    WriteOptions,
)
from apiserver.machinery.schema import DecodeError, cannot_handle
from apiserver.machinery.types import JSON
from apiserver.machinery.user import UserInfo
from apiserver.patch.strategic import Patcher, check_type_meta, invalid_patch
from apiserver.registry import deletion
from apiserver.resources.base import ResourceKind
from apiserver.storage.interface import (
    CompactedError,
    EventType,
    FutureRevisionError,
    KeyExistsError,
    KeyNotFoundError,
    KeyValue,
    RevisionConflictError,
    Storage,
    StorageUnavailableError,
    WatchOverflowError,
)

# Aliases for annotations inside ResourceStore, whose `list` method shadows the builtin there.
Strings = list[str]
Objects = list[JSON]
FieldErrors = list[errors.FieldError]

# How often an update that lost a compare-and-swap is retried before giving up (upstream retries
# without bound inside GuaranteedUpdate; a bound keeps a hot key from pinning a request forever).
MAX_UPDATE_ATTEMPTS = 32
# upstream: generateName collisions are retried this many times (RetryGenerateName).
MAX_GENERATE_NAME_ATTEMPTS = 8
INITIAL_EVENTS_END_ANNOTATION = "k8s.io/initial-events-end"

EXPIRED_LIST = "The resourceVersion for the provided list is too old."
EXPIRED_CONTINUE = (
    "The provided continue parameter is too old to display a consistent list result. "
    "You can start a new list without the continue parameter."
)
INCONSISTENT_CONTINUE = (
    "The provided continue parameter is too old to display a consistent list result. "
    "You can start a new list without the continue parameter, or use the continue token in this "
    "response to retrieve the remainder of the results. Continuing with the provided token results "
    "in an inconsistent list - objects that were created, modified, or deleted between the time "
    "the first chunk was returned and now may show up in the list."
)


@dataclass
class WriteResult:
    obj: JSON
    created: bool = False
    warnings: list[str] = field(default_factory=list)


@dataclass
class DeleteResult:
    obj: JSON
    # False when finalizers hold the object: it now carries deletionTimestamp and lives on.
    deleted: bool


# (user, namespace, object to store, stored object or None) -> raises to refuse the write.
Admission = Callable[[UserInfo | None, str, JSON, JSON | None], Awaitable[None]]


@dataclass(frozen=True)
class WatchEventOut:
    type: str  # ADDED, MODIFIED, DELETED, BOOKMARK, ERROR
    object: JSON


_MAX_UINT64 = 2**64 - 1


def _parse_revision(text: str) -> int:
    """A resourceVersion as upstream's versioner parses it (an unsigned 64-bit decimal)."""
    if not text:
        return 0
    if not (text.isascii() and text.isdigit()):
        reason = "invalid syntax"
    elif int(text) > _MAX_UINT64:
        reason = "value out of range"
    else:
        return int(text)
    raise errors.bad_request(
        f'invalid resource version: resourceVersion: Invalid value: "{text}": '
        f'strconv.ParseUint: parsing "{text}": {reason}'
    )


def _name_mismatch(body_name: str, url_name: str) -> StatusError:
    return errors.bad_request(
        f"the name of the object ({body_name}) does not match the name on the URL ({url_name})"
    )


def _too_large_rv(requested: int, current: int) -> StatusError:
    """Upstream's NewTooLargeResourceVersionError: clients look for its cause and retry."""
    err = errors.timeout_error(f"Too large resource version: {requested}, current: {current}", retry_after=1)
    assert err.details is not None
    err.details["causes"] = [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}]
    return err


def _manager(opts: WriteOptions) -> str:
    """Who a create, update or non-apply patch is tracked under."""
    return managedfields.manager_or_user_agent(opts.field_manager, opts.user_agent)


def _json_kind(value: Any) -> str:
    if isinstance(value, list):
        return "array"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "bool"
    return "number"


def _strict_decoding_error(found: list[str]) -> str:
    """runtime.NewStrictDecodingError: every unknown and repeated field in one message."""
    return "strict decoding error: " + ", ".join(found)


def _yaml_unmarshal_errors(lines: Sequence[str]) -> str:
    """yaml.v2's error of a YAML document's repeated keys, one line each."""
    return "yaml: unmarshal errors:\n" + "\n".join(f"  {line}" for line in lines)


def _check_apply_duplicates(lines: Sequence[str], opts: WriteOptions, warnings: Strings) -> None:
    """An apply configuration's repeated keys: 400 under Strict, a warning each under Warn."""
    if not lines or opts.field_validation == FIELD_VALIDATION_IGNORE:
        return
    if opts.field_validation == FIELD_VALIDATION_STRICT:
        yaml_error = _yaml_unmarshal_errors(lines)
        raise errors.bad_request(f"error strict decoding YAML: error converting YAML to JSON: {yaml_error}")
    warnings.extend(lines)


class ResourceStore:
    """Create, read, update, delete, list and watch one kind in one storage."""

    def __init__(
        self,
        kind: ResourceKind,
        storage: Storage,
        *,
        ttl_seconds: int = 0,
        bookmark_interval: float = 60.0,
        admission: Admission | None = None,
    ) -> None:
        self.kind = kind
        self.storage = storage
        self.ttl_seconds = ttl_seconds
        self.bookmark_interval = bookmark_interval
        # Checks a write may fail on before validation (the RoleBinding escalation guard).
        self.admission = admission
        self.gr = GroupResource(kind.group, kind.plural)
        self.field_manager = FieldManager(kind)
        self._root = f"/registry/{kind.group}/{kind.plural}/"

    # ----------------------------------------------------------------- keys and encoding

    def key(self, namespace: str, name: str) -> str:
        return f"{self._root}{namespace}/{name}"

    def prefix(self, namespace: str | None) -> str:
        return f"{self._root}{namespace}/" if namespace else self._root

    def _decode_stored(self, value: bytes, revision: int) -> JSON:
        obj: JSON = json.loads(value)
        objectmeta.metadata(obj)["resourceVersion"] = str(revision)
        return obj

    def _from_kv(self, kv: KeyValue) -> JSON:
        return self._decode_stored(kv.value, kv.mod_revision)

    @staticmethod
    def _encode_for_storage(obj: JSON) -> bytes:
        stored = dict(obj)
        meta = dict(stored.get("metadata") or {})
        meta.pop("resourceVersion", None)
        meta.pop("selfLink", None)
        stored["metadata"] = meta
        return json.dumps(stored, separators=(",", ":"), ensure_ascii=False).encode()

    def _with_type(self, obj: JSON) -> JSON:
        """apiVersion and kind first, as Go's encoder writes them."""
        body = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}
        return {"kind": self.kind.kind, "apiVersion": self.kind.api_version, **body}

    # ----------------------------------------------------------------- decoding a request body

    def decode_body(
        self, raw: Any, options: WriteOptions, warnings: Strings, yaml_duplicates: Sequence[str] = ()
    ) -> JSON:
        """Checks the body's type, prunes unknown fields per fieldValidation and returns the object.
        `yaml_duplicates`: a YAML body's repeated keys (codec.ParsedBody)."""
        if not isinstance(raw, dict):
            raise errors.bad_request(
                f"the object provided is unrecognized (must be of type {self.kind.kind}): "
                f"couldn't get version/kind; json parse error: expected an object"
            )
        api_version = raw.get("apiVersion")
        kind = raw.get("kind")
        if api_version not in (None, "") and api_version != self.kind.api_version:
            raise errors.bad_request(
                f"the API version in the data ({api_version}) does not match the expected API version "
                f"({self.kind.api_version})"
            )
        if kind not in (None, "") and kind != self.kind.kind:
            raise errors.bad_request(
                f'{kind} in version "{self.kind.version}" cannot be handled as a {self.kind.kind}: '
                f'no kind "{kind}" is registered for version "{self.kind.api_version}" in scheme "coreio"'
            )
        decoded = self.kind.decode(raw)
        self._check_strict(decoded.strict_errors, yaml_duplicates, options, warnings)
        return self._typed(decoded.obj)

    def _check_strict(
        self, found: Strings, yaml_duplicates: Sequence[str], options: WriteOptions, warnings: Strings
    ) -> None:
        """fieldValidation of a create or update body. Strict: one 400 naming every unknown and
        repeated field, a YAML body's repeated keys first (yaml.v2 reports them as one error).
        Warn: a warning each, yaml.v2's lines split apart as upstream splits them."""
        if options.field_validation == FIELD_VALIDATION_WARN:
            warnings.extend([*yaml_duplicates, *found])
        elif options.field_validation == FIELD_VALIDATION_STRICT and (yaml_duplicates or found):
            yaml_error = [_yaml_unmarshal_errors(yaml_duplicates)] if yaml_duplicates else []
            prefix = cannot_handle(self.kind.kind, self.kind.version)
            raise errors.bad_request(prefix + _strict_decoding_error(yaml_error + found))

    def _typed(self, obj: JSON) -> JSON:
        obj["apiVersion"] = self.kind.api_version
        obj["kind"] = self.kind.kind
        return self._with_type(obj)

    def _decode_patched(
        self, patcher: Patcher, result: JSON, options: WriteOptions, warnings: Strings
    ) -> JSON:
        """A patch's result decoded as upstream's patch handler decodes it: what does not decode is
        a 422 on the field `patch` quoting the result, and so, under Strict, is every strict error
        (the patch's own first, then the result's); under Warn each is a warning."""
        try:
            if not patcher.unstructured:
                check_type_meta(result, self.kind.api_version, self.kind.kind)
            decoded = self.kind.decode(result, unstructured=patcher.unstructured)
        except DecodeError as exc:
            raise invalid_patch(patcher.quoted(result), exc.detail) from None
        if options.field_validation != FIELD_VALIDATION_IGNORE:
            found = patcher.strict_errors + decoded.strict_errors
            if found and options.field_validation == FIELD_VALIDATION_STRICT:
                raise invalid_patch(patcher.quoted(result), _strict_decoding_error(found))
            warnings.extend(found)
        return self._typed(decoded.obj)

    # ----------------------------------------------------------------- reads

    async def get(self, namespace: str, name: str) -> JSON:
        kv = await self.storage.get(self.key(namespace, name))
        if kv is None:
            raise errors.not_found_error(self.gr, name)
        return self._from_kv(kv)

    async def list(self, namespace: str | None, opts: ListOptions) -> JSON:
        """A list object (kind <Kind>List) honouring selectors, limit/continue and resourceVersion."""
        prefix = self.prefix(namespace)
        revision, start = await self._list_position(prefix, opts)
        items: Objects = []
        limit = opts.limit if opts.limit > 0 else 0
        more = False
        remaining = 0
        next_start: str | None = None
        cursor = start
        list_revision = revision
        # With selectors a page may match fewer than `limit` items; keep reading (as upstream's
        # etcd3 store does) until the page is full or the range is exhausted.
        while True:
            want = limit - len(items) if limit else 0
            page_size = max(want, 1) if limit else 0
            if limit and opts.has_selectors:
                page_size = max(want * 2, 50)
            try:
                page = await self.storage.list(prefix, start=cursor, limit=page_size, revision=list_revision)
            except CompactedError as exc:
                raise self._compacted_list_error(opts, prefix, start) from exc
            except FutureRevisionError as exc:
                raise _too_large_rv(exc.requested, exc.current) from exc
            list_revision = page.revision
            for index, kv in enumerate(page.items):
                obj = self._from_kv(kv)
                if not self._matches(obj, opts):
                    continue
                items.append(self._with_type(obj))
                if limit and len(items) >= limit:
                    rest = page.items[index + 1 :]
                    if rest or page.more:
                        more = True
                        next_start = kv.key + "\x00"
                        remaining = len(rest) + page.remaining
                    break
            else:
                if page.more and page.items:
                    cursor = page.items[-1].key + "\x00"
                    continue
            break
        min_rv = self._min_revision(opts)
        if min_rv and list_revision < min_rv:
            raise _too_large_rv(min_rv, list_revision)
        list_meta: JSON = {"resourceVersion": str(list_revision)}
        if more and next_start is not None:
            list_meta["continue"] = continue_token.encode(next_start, prefix, list_revision)
            if not opts.has_selectors:
                list_meta["remainingItemCount"] = remaining
        return {
            "kind": self.kind.list_kind,
            "apiVersion": self.kind.api_version,
            "metadata": list_meta,
            "items": items,
        }

    async def _list_position(self, prefix: str, opts: ListOptions) -> tuple[int, str | None]:
        """The revision to read at (0 = latest) and the key to start from."""
        if opts.continue_token:
            try:
                token = continue_token.decode(opts.continue_token, prefix)
            except continue_token.InvalidContinueError as exc:
                raise errors.bad_request(f"invalid continue token: {exc}") from exc
            if opts.resource_version not in ("", "0"):
                raise errors.bad_request("specifying resource version is not allowed when using continue")
            return (token.revision if token.revision > 0 else 0), token.start_key
        if not opts.resource_version:
            return 0, None
        requested = _parse_revision(opts.resource_version)
        match = opts.resource_version_match
        if match == MATCH_EXACT or (not match and opts.limit > 0 and requested > 0):
            return requested, None
        return 0, None

    @staticmethod
    def _min_revision(opts: ListOptions) -> int:
        if opts.continue_token or not opts.resource_version:
            return 0
        if opts.resource_version_match in ("", MATCH_NOT_OLDER_THAN):
            return _parse_revision(opts.resource_version)
        return 0

    def _compacted_list_error(self, opts: ListOptions, prefix: str, start: str | None) -> StatusError:
        if not opts.continue_token or start is None:
            return errors.expired(EXPIRED_LIST)
        err = errors.expired(INCONSISTENT_CONTINUE)
        err.list_meta = {"continue": continue_token.encode(start, prefix, -1)}
        return err

    def _matches(self, obj: JSON, opts: ListOptions) -> bool:
        if opts.label_selector is not None and not opts.label_selector.empty:
            labels = objectmeta.metadata(obj).get("labels") or {}
            if not opts.label_selector.matches(labels):
                return False
        if opts.field_selector is not None and not opts.field_selector.empty:
            return opts.field_selector.matches(self.kind.selectable_fields(obj))
        return True

    # ----------------------------------------------------------------- create

    async def create(
        self, namespace: str, raw: Any, opts: WriteOptions, yaml_duplicates: Sequence[str] = ()
    ) -> WriteResult:
        warnings: Strings = []
        obj = self.decode_body(raw, opts, warnings, yaml_duplicates)
        meta = objectmeta.metadata(obj)
        self._check_namespace(meta, namespace)
        if meta.get("resourceVersion"):
            raise errors.bad_request("resourceVersion should not be set on objects to be created")
        obj = self.field_manager.update(
            self.field_manager.empty_object(), obj, _manager(opts), reset=managedfields.requests_reset(raw)
        )
        if self.admission is not None:
            await self.admission(opts.user, namespace, obj, None)
        generate = not meta.get("name") and bool(meta.get("generateName"))
        for _attempt in range(MAX_GENERATE_NAME_ATTEMPTS if generate else 1):
            candidate = copy.deepcopy(obj)
            cmeta = objectmeta.metadata(candidate)
            if generate:
                cmeta["name"] = objectmeta.generate_name(str(meta["generateName"]))
            self._prepare_create(candidate)
            self._validate(candidate, self.kind.validate(candidate))
            key = self.key(namespace, str(cmeta["name"]))
            if opts.dry_run:
                # A dry run still fails where the real create would: on a name already taken.
                if await self.storage.get(key) is not None:
                    raise errors.already_exists_error(self.gr, str(cmeta["name"]))
                return WriteResult(candidate, created=True, warnings=warnings)
            try:
                kv = await self.storage.create(key, self._encode_for_storage(candidate), ttl=self.ttl_seconds)
            except KeyExistsError:
                if generate:
                    continue
                raise errors.already_exists_error(self.gr, str(cmeta["name"])) from None
            return WriteResult(self._from_kv(kv), created=True, warnings=warnings)
        raise errors.already_exists_error(self.gr, str(objectmeta.metadata(obj).get("name", "")))

    def _prepare_create(self, obj: JSON) -> None:
        meta = objectmeta.metadata(obj)
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = objectmeta.format_time(objectmeta.now())
        meta.pop("deletionTimestamp", None)
        meta.pop("deletionGracePeriodSeconds", None)
        meta.pop("selfLink", None)
        # No generation of the server's: upstream leaves it to the kind's strategy, and neither
        # kind's sets one, so the field stays absent unless the request itself carries it.
        self.kind.prepare_for_create(obj)

    def _check_namespace(self, meta: JSON, namespace: str) -> None:
        body_namespace = meta.get("namespace")
        if body_namespace and body_namespace != namespace:
            raise errors.bad_request(
                "the namespace of the provided object does not match the namespace sent on the request"
            )
        meta["namespace"] = namespace

    def _validate(self, obj: JSON, errs: FieldErrors) -> None:
        if errs:
            name = str(objectmeta.metadata(obj).get("name") or "")
            raise errors.invalid_error(self.kind.group, self.kind.kind, name, errs)

    # ----------------------------------------------------------------- update and patch

    async def update(
        self, namespace: str, name: str, raw: Any, opts: WriteOptions, yaml_duplicates: Sequence[str] = ()
    ) -> WriteResult:
        """PUT: replaces the object; creates it when absent (both kinds allow create-on-update)."""
        warnings: Strings = []
        obj = self.decode_body(raw, opts, warnings, yaml_duplicates)
        meta = objectmeta.metadata(obj)
        self._check_namespace(meta, namespace)
        body_name = meta.get("name")
        if body_name != name:
            raise _name_mismatch(str(body_name or ""), name)
        precondition = str(meta.get("resourceVersion") or "")
        reset = managedfields.requests_reset(raw)

        def replace(current: JSON) -> JSON:
            return self.field_manager.update(current, copy.deepcopy(obj), _manager(opts), reset=reset)

        return await self._update_loop(
            namespace,
            name,
            replace,
            opts,
            warnings,
            precondition=precondition,
            uid_precondition=str(meta.get("uid") or ""),
            allow_create=True,
        )

    async def patch(self, namespace: str, name: str, patcher: Patcher, opts: WriteOptions) -> WriteResult:
        """Applies `patcher` to the current object (retried on conflict) and stores the result."""
        warnings: Strings = []

        def patched(current: JSON) -> JSON:
            # Upstream patches the stored object's versioned JSON: its fields in the struct's order.
            result = patcher.apply(self.kind.decode(current).obj)
            obj = self._decode_patched(patcher, result, opts, warnings)
            meta = objectmeta.metadata(obj)
            if meta.get("name") != name:
                raise _name_mismatch(str(meta.get("name") or ""), name)
            self._check_namespace(meta, namespace)
            return self.field_manager.update(
                current, obj, _manager(opts), reset=managedfields.requests_reset(result)
            )

        return await self._update_loop(namespace, name, patched, opts, warnings, precondition=None)

    async def apply(
        self, namespace: str, name: str, config: Any, opts: WriteOptions, yaml_duplicates: Sequence[str] = ()
    ) -> WriteResult:
        """Server-side apply of `config` (the decoded apply patch) by `opts.field_manager`, forced
        with `opts.force`; creates the object when it does not exist. `yaml_duplicates`: the
        configuration's repeated keys (codec.ParsedBody), refused or warned of per fieldValidation."""
        if not isinstance(config, dict):
            if config is not None:
                raise errors.bad_request(
                    "error decoding YAML: error unmarshaling JSON: while decoding JSON: json: cannot "
                    f"unmarshal {_json_kind(config)} into Go value of type map[string]interface {{}}"
                )
            config = {}
        # The merged object holds no field the configuration could not (it is checked against the
        # schema first), so decoding it again warns of nothing.
        canonical = dataclasses.replace(opts, field_validation=FIELD_VALIDATION_IGNORE)
        warnings: Strings = []

        def applied(current: JSON) -> JSON:
            creating = not current["metadata"].get("uid")
            merged = self.field_manager.apply(current, config, opts.field_manager, force=opts.force)
            # Upstream decodes the configuration strictly once the field manager has applied it.
            _check_apply_duplicates(yaml_duplicates, opts, warnings)
            uid = objectmeta.metadata(merged).get("uid")
            if creating and uid:
                raise errors.conflict_error(
                    self.gr,
                    name,
                    f"uid mismatch: the provided object specified uid {uid}, "
                    "and no existing object was found",
                )
            obj = self.decode_body(merged, canonical, [])
            meta = objectmeta.metadata(obj)
            self._check_namespace(meta, namespace)
            if meta.get("name") and meta.get("name") != name:
                raise _name_mismatch(str(meta.get("name")), name)
            return obj

        return await self._update_loop(
            namespace, name, applied, opts, warnings, precondition=None, allow_create=True
        )

    async def _update_loop(
        self,
        namespace: str,
        name: str,
        make_new: Callable[[JSON], JSON],
        opts: WriteOptions,
        warnings: Strings,
        *,
        precondition: str | None,
        uid_precondition: str = "",
        allow_create: bool = False,
    ) -> WriteResult:
        """Reads, transforms with `make_new` and writes until the compare-and-swap holds. With
        `allow_create`, an absent object is made from the kind's empty object."""
        key = self.key(namespace, name)
        kv = await self.storage.get(key)
        uid = uid_precondition
        for _attempt in range(MAX_UPDATE_ATTEMPTS):
            if uid:
                # A PUT naming a uid only applies to that very object, as upstream makes it a
                # storage precondition.
                current_uid = (
                    self._decode_stored(kv.value, kv.mod_revision)["metadata"].get("uid") if kv else None
                )
                if current_uid != uid:
                    raise errors.conflict_error(
                        self.gr,
                        name,
                        f"Precondition failed: UID in precondition: {uid}, "
                        f"UID in object meta: {current_uid or ''}",
                    )
            if kv is None:
                if not allow_create:
                    raise errors.not_found_error(self.gr, name)
                body = make_new(self.field_manager.empty_object())
                objectmeta.metadata(body).pop("resourceVersion", None)
                created = await self._create_on_update(namespace, body, opts, warnings)
                if created is not None:
                    return created
                kv = await self.storage.get(key)
                continue
            old = self._from_kv(kv)
            new = make_new(old)
            new_meta = objectmeta.metadata(new)
            # A PUT's resourceVersion is a precondition: a lost compare-and-swap is a 409. A patch
            # carries the current resourceVersion unless it names one itself; a named stale one is a
            # 409 now, and a lost compare-and-swap re-applies the patch to the fresh object.
            requested = (
                precondition if precondition is not None else str(new_meta.get("resourceVersion") or "")
            )
            if requested and requested != old["metadata"]["resourceVersion"]:
                raise errors.modified_conflict_error(self.gr, name)
            strict = bool(precondition)
            self._prepare_update(new, old)
            if self.admission is not None:
                await self.admission(opts.user, namespace, new, old)
            self._validate(new, self._update_errors(new, old))
            managedfields.restore_unchanged_times(new, old)
            if self._same_content(new, old):
                return WriteResult(old, warnings=warnings)
            if new["metadata"].get("deletionTimestamp") and not new["metadata"].get("finalizers"):
                # The last finalizer is gone from an object being deleted: it goes now.
                if opts.dry_run:
                    return WriteResult(new, warnings=warnings)
                try:
                    gone = await self.storage.delete(key, expected_revision=kv.mod_revision)
                except RevisionConflictError as exc:
                    if strict:
                        raise errors.modified_conflict_error(self.gr, name) from exc
                    kv = exc.current
                    continue
                except KeyNotFoundError:
                    kv = None
                    continue
                new["metadata"]["resourceVersion"] = str(gone.mod_revision)
                return WriteResult(new, warnings=warnings)
            if opts.dry_run:
                return WriteResult(new, warnings=warnings)
            try:
                stored = await self.storage.update(
                    key,
                    self._encode_for_storage(new),
                    expected_revision=kv.mod_revision,
                    ttl=self.ttl_seconds,
                )
            except RevisionConflictError as exc:
                if strict:
                    raise errors.modified_conflict_error(self.gr, name) from exc
                kv = exc.current
                continue
            except KeyNotFoundError:
                kv = None
                continue
            return WriteResult(self._from_kv(stored), warnings=warnings)
        raise errors.conflict_error(self.gr, name, "too many concurrent updates; please try again")

    async def _create_on_update(
        self, namespace: str, obj: JSON, opts: WriteOptions, warnings: Strings
    ) -> WriteResult | None:
        """PUT of an absent object creates it; None when someone else created it meanwhile."""
        if self.admission is not None:
            await self.admission(opts.user, namespace, obj, None)
        self._prepare_create(obj)
        self._validate(obj, self.kind.validate(obj))
        if opts.dry_run:
            return WriteResult(obj, created=True, warnings=warnings)
        key = self.key(namespace, str(obj["metadata"]["name"]))
        try:
            kv = await self.storage.create(key, self._encode_for_storage(obj), ttl=self.ttl_seconds)
        except KeyExistsError:
            return None
        return WriteResult(self._from_kv(kv), created=True, warnings=warnings)

    def _prepare_update(self, new: JSON, old: JSON) -> None:
        meta = objectmeta.metadata(new)
        old_meta = old["metadata"]
        if not meta.get("uid"):
            meta["uid"] = old_meta.get("uid")
        for system_field in ("creationTimestamp", "deletionTimestamp"):
            if old_meta.get(system_field):
                meta[system_field] = old_meta[system_field]
            else:
                meta.pop(system_field, None)
        if "deletionGracePeriodSeconds" in old_meta and "deletionGracePeriodSeconds" not in meta:
            meta["deletionGracePeriodSeconds"] = old_meta["deletionGracePeriodSeconds"]
        meta["resourceVersion"] = old_meta["resourceVersion"]
        meta.pop("selfLink", None)
        # A request cannot set generation (rest.BeforeUpdate keeps the stored one) and neither
        # kind's strategy moves it on a change.
        if old_meta.get("generation"):
            meta["generation"] = old_meta["generation"]
        else:
            meta.pop("generation", None)
        self.kind.prepare_for_update(new, old)

    def _update_errors(self, new: JSON, old: JSON) -> FieldErrors:
        """rest.BeforeUpdate's checks of any kind's metadata, then the kind's own: kube-apiserver
        reports an error of both in each (twice in the causes, once in the message), in that order."""
        common = validate_common_object_meta_update(
            new["metadata"], old["metadata"], namespaced=self.kind.namespaced
        )
        return common + self.kind.validate_update(new, old)

    @staticmethod
    def _same_content(new: JSON, old: JSON) -> bool:
        return new == old

    # ----------------------------------------------------------------- delete

    async def delete(self, namespace: str, name: str, opts: DeleteOptions) -> DeleteResult:
        opts.validate()
        key = self.key(namespace, name)
        kv = await self.storage.get(key)
        for _attempt in range(MAX_UPDATE_ATTEMPTS):
            if kv is None:
                raise errors.not_found_error(self.gr, name)
            obj = self._from_kv(kv)
            self._check_preconditions(opts, obj["metadata"], name)
            marked = deletion.mark_for_deletion(obj, opts, garbage_collected=self.kind.garbage_collected)
            try:
                if marked is None:
                    return await self._remove(key, kv, obj, opts.dry_run)
                return await self._mark(key, kv, obj, marked, opts.dry_run)
            except RevisionConflictError as exc:
                kv = exc.current
            except KeyNotFoundError:
                kv = None
        raise errors.conflict_error(self.gr, name, "too many concurrent updates; please try again")

    async def _mark(self, key: str, kv: KeyValue, obj: JSON, marked: JSON, dry_run: bool) -> DeleteResult:
        """Stores the object as held by its finalizers; a delete that changes nothing (the object
        is already marked) writes nothing, as upstream's no-op update."""
        if dry_run or marked == obj:
            return DeleteResult(marked, deleted=False)
        stored = await self.storage.update(
            key, self._encode_for_storage(marked), expected_revision=kv.mod_revision, ttl=self.ttl_seconds
        )
        return DeleteResult(self._from_kv(stored), deleted=False)

    async def _remove(self, key: str, kv: KeyValue, obj: JSON, dry_run: bool) -> DeleteResult:
        if dry_run:
            return DeleteResult(obj, deleted=True)
        gone = await self.storage.delete(key, expected_revision=kv.mod_revision)
        return DeleteResult(self._from_kv(gone), deleted=True)

    def _check_preconditions(self, opts: DeleteOptions, meta: JSON, name: str) -> None:
        """DeleteOptions.preconditions, worded as upstream's rest.BeforeDelete words them."""
        pre = opts.preconditions
        qualified = GroupResource(self.kind.group, self.kind.kind)
        if pre.uid is not None and pre.uid != meta.get("uid"):
            raise errors.conflict_error(
                qualified,
                name,
                f"the UID in the precondition ({pre.uid}) does not match the UID in record "
                f"({meta.get('uid', '')}). The object might have been deleted and then recreated",
            )
        if pre.resource_version is not None and pre.resource_version != meta.get("resourceVersion"):
            raise errors.conflict_error(
                qualified,
                name,
                f"the ResourceVersion in the precondition ({pre.resource_version}) does not match the "
                f"ResourceVersion in record ({meta.get('resourceVersion')}). "
                "The object might have been modified",
            )

    async def delete_collection(
        self, namespace: str | None, list_opts: ListOptions, delete_opts: DeleteOptions
    ) -> JSON:
        """Deletes every object the list options select; answers the list of what was deleted."""
        delete_opts.validate()
        listed = await self.list(namespace, list_opts)
        for item in listed["items"]:
            meta = item["metadata"]
            try:
                await self.delete(str(meta["namespace"]), str(meta["name"]), delete_opts)
            except StatusError as exc:
                if exc.code != 404:
                    raise
        # As upstream: the list as it was read (with its continue token when limited).
        return listed

    # ----------------------------------------------------------------- watch

    async def watch(self, namespace: str | None, opts: ListOptions) -> AsyncIterator[WatchEventOut]:
        """Watch events for the namespace (or all), filtered by the selectors.

        Errors that kube-apiserver reports inside the stream (a start that was compacted) come as
        an ERROR event followed by the end of the stream.
        """
        prefix = self.prefix(namespace)
        rv = opts.resource_version
        if opts.send_initial_events is False and rv in ("", "0"):
            # No initial events asked for, and no revision: changes from now on.
            return self._stream(prefix, opts, await self.storage.current_revision(), [], False)
        initial = opts.send_initial_events if opts.send_initial_events is not None else rv in ("", "0")
        if initial:
            # sendInitialEvents with NotOlderThan N: a snapshot at least as new as N, i.e. now.
            if rv not in ("", "0"):
                requested = _parse_revision(rv)
                current = await self.storage.current_revision()
                if requested > current:
                    raise _too_large_rv(requested, current)
            snapshot = await self.list(
                namespace, ListOptions(label_selector=opts.label_selector, field_selector=opts.field_selector)
            )
            after = int(snapshot["metadata"]["resourceVersion"])
            return self._stream(prefix, opts, after, snapshot["items"], bool(opts.send_initial_events))
        return self._stream(prefix, opts, _parse_revision(rv), [], False)

    async def _stream(
        self,
        prefix: str,
        opts: ListOptions,
        after: int,
        initial_items: Objects,
        initial_end_bookmark: bool,
    ) -> AsyncIterator[WatchEventOut]:
        for item in initial_items:
            yield WatchEventOut("ADDED", item)
        if initial_end_bookmark:
            yield WatchEventOut("BOOKMARK", self._bookmark(after, initial_events_end=True))
        last_sent = after
        bookmarks = opts.allow_watch_bookmarks
        loop = asyncio.get_running_loop()
        last_bookmark = loop.time()
        events = self.storage.watch(prefix, after_revision=after, progress=bookmarks)
        try:
            async for event in events:
                if event.type is EventType.PROGRESS:
                    if bookmarks and loop.time() - last_bookmark >= self.bookmark_interval:
                        last_sent = max(last_sent, event.revision)
                        last_bookmark = loop.time()
                        yield WatchEventOut("BOOKMARK", self._bookmark(last_sent))
                    continue
                out = self._convert(event.type, event.value, event.prev_value, event.revision, opts)
                last_sent = event.revision
                if out is not None:
                    yield out
        except CompactedError as exc:
            yield WatchEventOut(
                "ERROR", errors.expired(f"too old resource version: {exc.requested} ({exc.compacted})").status
            )
        except WatchOverflowError:
            # The watcher fell too far behind: end it with 410 so the client relists, as it does
            # when kube-apiserver's watch cache drops a slow watcher.
            yield WatchEventOut(
                "ERROR", errors.expired(f"watch fell behind; too old resource version: {last_sent}").status
            )
        except StorageUnavailableError as exc:
            yield WatchEventOut("ERROR", errors.storage_unavailable(exc).status)
        finally:
            await events.aclose()  # type: ignore[attr-defined]

    def _bookmark(self, revision: int, *, initial_events_end: bool = False) -> JSON:
        meta: JSON = {"resourceVersion": str(revision)}
        if initial_events_end:
            meta["annotations"] = {INITIAL_EVENTS_END_ANNOTATION: "true"}
        return {"kind": self.kind.kind, "apiVersion": self.kind.api_version, "metadata": meta}

    def _convert(
        self,
        type_: EventType,
        value: bytes | None,
        prev_value: bytes | None,
        revision: int,
        opts: ListOptions,
    ) -> WatchEventOut | None:
        current = self._decode_stored(value, revision) if value is not None else None
        previous = self._decode_stored(prev_value, revision) if prev_value is not None else None
        current_passes = current is not None and self._matches(current, opts)
        previous_passes = previous is not None and self._matches(previous, opts)
        if current_passes and current is not None:
            return WatchEventOut("MODIFIED" if previous_passes else "ADDED", self._with_type(current))
        if previous_passes and previous is not None:
            # Gone, or no longer selected: DELETED with the last state at this event's revision.
            return WatchEventOut("DELETED", self._with_type(previous))
        return None
