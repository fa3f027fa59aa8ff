"""The generic store of one kind: create, get, update, patch, apply, delete, list and watch.

It plays the part of k8s.io/apiserver's `registry/generic/registry.Store` and knows nothing of HTTP.
It owns system metadata (uid, creationTimestamp, deletionTimestamp; generation is kept, never
moved), preconditions, optimistic concurrency, dry-run, finalizers, field validation, managedFields
and server-side apply (through `apply.fieldmanager.FieldManager`). Objects are plain dicts;
`metadata.resourceVersion` is the storage revision, set on every read and never stored.

The pieces, one module each: `stored` (keys, the stored form), `decode` (request bodies),
`strategy` (before create and update), `update` and `deletion` (the read-modify-writes, over the
storage's one guaranteed-update loop), `watch` (list and watch) and `storage_errors` (Status errors
of the storage's).
"""

from __future__ import annotations

import builtins
import dataclasses
from collections.abc import AsyncIterator, Sequence
from typing import Any

from apiserver.admission import request as admission
from apiserver.admission.chain import AdmissionChain
from apiserver.admission.request import CREATE
from apiserver.apply import fieldmanager as managedfields
from apiserver.apply.fieldmanager import FieldManager
from apiserver.machinery import errors, fastjson, objectmeta, offload
from apiserver.machinery.errors import StatusError
from apiserver.machinery.options import (
    FIELD_VALIDATION_IGNORE,
    IGNORE_STORE_READ_ERROR,
    DeleteOptions,
    ListOptions,
    WriteOptions,
)
from apiserver.machinery.types import JSON
from apiserver.patch import Patcher
from apiserver.registry import decode, strategy
from apiserver.registry.decoded import ObjectList
from apiserver.registry.deletion import DeleteResult, ObjectDeletion, delete_corrupt
from apiserver.registry.shared_events import WatchEventOut
from apiserver.registry.storage_errors import interpreted
from apiserver.registry.stored import StoredObjects
from apiserver.registry.update import ObjectUpdate, Update, WriteResult
from apiserver.registry.watch import INITIAL_EVENTS_END_ANNOTATION, ListWatch
from apiserver.resources.base import ResourceKind
from apiserver.storage.interface import KeyExistsError, Storage

# What the HTTP layer and the RBAC index use, from one place.
__all__ = [
    "INITIAL_EVENTS_END_ANNOTATION",
    "AdmissionChain",
    "DeleteResult",
    "ResourceStore",
    "WatchEventOut",
    "WriteResult",
]

# upstream: generateName collisions are retried this many times (RetryGenerateName).
MAX_GENERATE_NAME_ATTEMPTS = 8


def _manager(opts: WriteOptions) -> str:
    """Who a create, update or non-apply patch is tracked under."""
    return managedfields.manager_or_user_agent(opts.field_manager, opts.user_agent)


class ResourceStore:
    """Create, read, update, delete, list and watch one kind in one storage."""

    def __init__(
        self,
        kind: ResourceKind,
        storage: Storage,
        *,
        ttl_seconds: int = 0,
        bookmark_interval: float = 60.0,
        admission: AdmissionChain | None = None,
    ) -> None:
        self.kind = kind
        self.storage = storage
        self.objects = StoredObjects(kind, storage, ttl_seconds)
        self.reads = ListWatch(self.objects, bookmark_interval)
        # What writes pass besides validation (namespace lifecycle, the escalation guard, the
        # cluster's policies and webhooks).
        self.admission = admission
        self.gr = self.reads.gr
        self.field_manager = FieldManager(kind)

    def key(self, namespace: str, name: str) -> str:
        return self.objects.key(namespace, name)

    def prefix(self, namespace: str | None) -> str:
        return self.objects.prefix(namespace)

    # ----------------------------------------------------------------- reads

    async def get(self, namespace: str, name: str) -> JSON:
        with interpreted(self.gr, name):
            kv = await self.storage.get(self.key(namespace, name))
            if kv is None:
                raise errors.not_found_error(self.gr, name)
            return self.objects.from_kv(kv)

    async def list(self, namespace: str | None, opts: ListOptions) -> ObjectList:
        """A list object (kind <Kind>List) honouring selectors, limit/continue and resourceVersion."""
        return await self.reads.list(namespace, opts)

    async def watch(self, namespace: str | None, opts: ListOptions) -> AsyncIterator[WatchEventOut]:
        """Watch events for the namespace (or all), filtered by the selectors; errors met once the
        stream has begun come as an ERROR event that ends it."""
        return await self.reads.watch(namespace, opts)

    # ----------------------------------------------------------------- create

    async def create(
        self, namespace: str, raw: Any, opts: WriteOptions, yaml_duplicates: Sequence[str] = ()
    ) -> WriteResult:
        warnings: list[str] = []
        obj = await offload.run(lambda: self._decode_create(namespace, raw, opts, warnings, yaml_duplicates))
        if self.admission is not None:
            request = admission.for_write(self.kind, CREATE, namespace, obj, None, opts)
            admitted = await self.admission.admit(request)
            obj = admitted if admitted is not None else obj
        meta = objectmeta.metadata(obj)
        generate = not meta.get("name") and bool(meta.get("generateName"))
        for _attempt in range(MAX_GENERATE_NAME_ATTEMPTS if generate else 1):
            # Each generated name is tried on a fresh copy; a named create is tried once, on the
            # object itself (decoded for this request alone).
            candidate = fastjson.copied(obj) if generate else obj
            if generate:
                objectmeta.metadata(candidate)["name"] = objectmeta.generate_name(str(meta["generateName"]))
            created = await self._create_one(namespace, candidate, opts, retry_taken=generate, requested=meta)
            if created is not None:
                return WriteResult(created, created=True, warnings=warnings, stored=not opts.dry_run)
        raise errors.already_exists_error(self.gr, str(objectmeta.metadata(obj).get("name", "")))

    def _decode_create(
        self,
        namespace: str,
        raw: Any,
        opts: WriteOptions,
        warnings: builtins.list[str],  # `list` is a method here
        yaml_duplicates: Sequence[str],
    ) -> JSON:
        """The object a create stores, decoded and with its managed fields."""
        obj = decode.decode_body(self.kind, raw, opts, warnings, yaml_duplicates)
        meta = objectmeta.metadata(obj)
        strategy.check_namespace(meta, namespace)
        if meta.get("resourceVersion"):
            raise errors.bad_request("resourceVersion should not be set on objects to be created")
        self.kind.keep_status(obj, None)
        return self.field_manager.create(obj, _manager(opts), reset=managedfields.requests_reset(raw))

    async def _create_one(
        self, namespace: str, obj: JSON, opts: WriteOptions, *, retry_taken: bool, requested: JSON
    ) -> JSON | None:
        """Stores `obj` as new; None when its name is taken and `retry_taken` (a generated name).
        `requested`: the metadata as the request gave it (admission is asked under its name, or,
        when it gave none, under the name generated: upstream's AdmissionToValidateObjectFunc)."""
        await offload.run(lambda: strategy.prepare_and_validate_create(self.kind, obj))
        if self.admission is not None:
            name = str(requested.get("name") or "") or None
            request = admission.for_write(self.kind, CREATE, namespace, obj, None, opts, name=name)
            await self.admission.validate(request)
        name = str(obj["metadata"]["name"])
        key = self.key(namespace, name)
        with interpreted(self.gr, name):
            if opts.dry_run:
                # A dry run still fails where the real create would: on a name already taken.
                if await self.storage.get(key) is not None:
                    raise errors.already_exists_error(self.gr, name)
                return obj
            try:
                kv = await self.storage.create(key, self.objects.encode(obj), ttl=self.objects.ttl_seconds)
            except KeyExistsError:
                if retry_taken:
                    return None
                raise
        return self.objects.from_kv(kv)

    # ----------------------------------------------------------------- update, patch, apply

    async def _update(self, namespace: str, name: str, update: Update) -> WriteResult:
        attempt = ObjectUpdate(
            self.objects,
            namespace,
            name,
            update,
            admission=self.admission,
            blank=self.field_manager.empty_object,
        )
        return await attempt.run()

    async def update(
        self, namespace: str, name: str, raw: Any, opts: WriteOptions, yaml_duplicates: Sequence[str] = ()
    ) -> WriteResult:
        """PUT: replaces the object; creates it when absent (both kinds allow create-on-update)."""
        warnings: list[str] = []
        obj = decode.decode_body(self.kind, raw, opts, warnings, yaml_duplicates)
        meta = objectmeta.metadata(obj)
        strategy.check_namespace(meta, namespace)
        body_name = meta.get("name")
        if body_name != name:
            raise strategy.name_mismatch(str(body_name or ""), name)
        reset = managedfields.requests_reset(raw)

        def replace(current: JSON) -> JSON:
            return self._tracked(current, fastjson.copied(obj), opts, reset)

        update = Update(
            replace,
            opts,
            warnings,
            precondition=str(meta.get("resourceVersion") or ""),
            uid=str(meta.get("uid") or ""),
            allow_create=not opts.subresource,
        )
        return await self._update(namespace, name, update)

    def _tracked(self, current: JSON, obj: JSON, opts: WriteOptions, reset: bool) -> JSON:
        """`obj` (the caller's to give up) with its managed fields, as written over `current`:
        only what its subresource may change is taken (through /status the status, else all but
        the status) before the fields are tracked (upstream's reset fields), so that the manager
        owns what it could change."""
        self.kind.keep_to_subresource(obj, current, opts.subresource)
        return self.field_manager.update(
            current, obj, _manager(opts), reset=reset, subresource=opts.subresource
        )

    async def patch(self, namespace: str, name: str, patcher: Patcher, opts: WriteOptions) -> WriteResult:
        """Applies `patcher` to the current object (again on conflict) and stores the result."""
        warnings: list[str] = []

        def patched(current: JSON) -> JSON:
            # Upstream patches the stored object's versioned JSON: its fields in the struct's order.
            result = patcher.apply(self.kind.decode(current).obj)
            obj = decode.decode_patched(self.kind, patcher, result, opts, warnings)
            meta = objectmeta.metadata(obj)
            if meta.get("name") != name:
                raise strategy.name_mismatch(str(meta.get("name") or ""), name)
            strategy.check_namespace(meta, namespace)
            return self._tracked(current, obj, opts, managedfields.requests_reset(result))

        return await self._update(namespace, name, Update(patched, opts, warnings))

    async def apply(
        self, namespace: str, name: str, config: Any, opts: WriteOptions, yaml_duplicates: Sequence[str] = ()
    ) -> WriteResult:
        """Server-side apply of `config` (the decoded apply patch) by `opts.field_manager`, forced
        with `opts.force`; creates the object when it does not exist. `yaml_duplicates`: the
        configuration's repeated keys (codec.ParsedBody), refused or warned of per fieldValidation."""
        configuration = decode.apply_configuration(config)
        # The merged object holds no field the configuration could not (it is checked against the
        # schema first), so decoding it again warns of nothing.
        canonical = dataclasses.replace(opts, field_validation=FIELD_VALIDATION_IGNORE)
        warnings: list[str] = []

        if self.kind.status_subresource and isinstance(configuration, dict):
            if opts.subresource:
                self.field_manager.check_configuration(configuration)  # all of it, as upstream
            _keep_applicable(configuration, opts.subresource)

        def applied(current: JSON) -> JSON:
            creating = not current["metadata"].get("uid")
            merged = self.field_manager.apply(
                current, configuration, opts.field_manager, force=opts.force, subresource=opts.subresource
            )
            # Upstream decodes the configuration strictly once the field manager has applied it.
            decode.check_apply_duplicates(yaml_duplicates, opts, warnings)
            uid = objectmeta.metadata(merged).get("uid")
            if creating and uid:
                raise errors.conflict_error(
                    self.gr,
                    name,
                    f"uid mismatch: the provided object specified uid {uid}, "
                    "and no existing object was found",
                )
            obj = decode.decode_body(self.kind, merged, canonical, [])
            meta = objectmeta.metadata(obj)
            strategy.check_namespace(meta, namespace)
            if meta.get("name") and meta.get("name") != name:
                raise strategy.name_mismatch(str(meta.get("name")), name)
            return obj

        allowed = not opts.subresource  # an apply to /status creates nothing, as its other writes
        return await self._update(namespace, name, Update(applied, opts, warnings, allow_create=allowed))

    # ----------------------------------------------------------------- delete

    async def delete(self, namespace: str, name: str, opts: DeleteOptions) -> DeleteResult:
        opts.validate()
        return await ObjectDeletion(self.objects, namespace, name, opts, self.admission).run()

    async def delete_corrupt(self, namespace: str, name: str, opts: DeleteOptions) -> bool:
        """Removes an object that no longer decodes without reading it (the caller has checked the
        unsafe delete is allowed); False when it was gone already."""
        opts.validate()
        return await delete_corrupt(self.objects, namespace, name)

    async def delete_collection(
        self, namespace: str | None, list_opts: ListOptions, delete_opts: DeleteOptions
    ) -> ObjectList:
        """Deletes every object the list options select; answers the list of what was deleted."""
        delete_opts.validate()
        if delete_opts.ignore_store_read_error:
            refusal = errors.invalid(
                IGNORE_STORE_READ_ERROR,
                True,
                "is not allowed with DELETECOLLECTION, try again after removing the option",
            )
            raise errors.invalid_error("meta.k8s.io", "DeleteOptions", "", [refusal])
        listed = await self.list(namespace, list_opts)
        for shared in listed.shared():
            meta = shared.obj["metadata"]
            try:
                await self.delete(str(meta["namespace"]), str(meta["name"]), delete_opts)
            except StatusError as exc:
                if exc.code != 404:
                    raise
        # As upstream: the list as it was read (with its continue token when limited).
        return listed


def _keep_applicable(configuration: JSON, subresource: str) -> None:
    """An apply configuration kept to what its write may change, so that its manager owns nothing
    else and meets no conflict elsewhere (the reset fields upstream's field manager ignores): through
    /status the status and what names the object; else all but the status."""
    if subresource != "status":
        configuration.pop("status", None)
        return
    meta = configuration.get("metadata")
    named = (
        {k: v for k, v in meta.items() if k in ("name", "namespace", "uid", "resourceVersion")}
        if isinstance(meta, dict)
        else {}
    )
    kept = {k: configuration[k] for k in ("apiVersion", "kind", "status") if k in configuration}
    configuration.clear()
    configuration.update(kept | {"metadata": named})
