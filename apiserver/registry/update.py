"""Update, patch and apply of one object, as upstream's generic Store.Update does them, over the
storage's one guaranteed-update loop (`apiserver.storage.update`).

Each attempt reads the object, transforms it (the request's body, patch or apply configuration),
checks preconditions, runs admission, validation and the strategy, and decides: write, leave as is
(unchanged, or dry run), create (create-on-update) or delete (the last finalizer of an object being
deleted was removed). A lost compare-and-swap decides again from the fresh object; a PUT naming a
resourceVersion then fails its precondition (409), a patch or unconditional update is re-applied.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from apiserver.admission import request as admission
from apiserver.admission.chain import AdmissionChain
from apiserver.admission.request import CREATE, UPDATE
from apiserver.apply import fieldmanager as managedfields
from apiserver.machinery import errors, objectmeta, offload
from apiserver.machinery.errors import GroupResource
from apiserver.machinery.options import WriteOptions
from apiserver.machinery.types import JSON
from apiserver.registry import strategy
from apiserver.registry.storage_errors import status_error
from apiserver.registry.stored import StoredObjects
from apiserver.storage.interface import KeyNotFoundError, KeyValue, StorageError
from apiserver.storage.update import DELETE, Decision

# The object to store, given the current one (the kind's empty object when there is none).
Transform = Callable[[JSON], JSON]


@dataclass
class WriteResult:
    obj: JSON
    created: bool = False
    warnings: list[str] = field(default_factory=list)
    # Whether the write stored a new version of the object (not a dry run, not unchanged, not a
    # deletion by the removal of its last finalizer).
    stored: bool = False


@dataclass
class Update:
    """What one update, patch or apply asks."""

    transform: Transform
    opts: WriteOptions
    warnings: list[str]
    # A PUT's resourceVersion ("": unconditional); None: the one the transformed object carries.
    precondition: str | None = None
    # A PUT's uid: the update applies to that very object only.
    uid: str = ""
    # Whether an absent object is created (from the kind's empty object).
    allow_create: bool = False


class ObjectUpdate:
    """The decisions of one update of the object `name` in `namespace`, and its answer."""

    def __init__(
        self,
        objects: StoredObjects,
        namespace: str,
        name: str,
        update: Update,
        *,
        admission: AdmissionChain | None,
        blank: Callable[[], JSON],
    ) -> None:
        self.objects = objects
        self.kind = objects.kind
        self.gr = GroupResource(self.kind.group, self.kind.plural)
        self.namespace = namespace
        self.name = name
        self.update = update
        self.admission = admission
        self.blank = blank
        # The answer when the storage's state is not it (nothing written, or the object deleted).
        self.answer: JSON | None = None
        self.created = False
        self.deleting = False

    async def run(self) -> WriteResult:
        try:
            kv = await self.objects.guaranteed_update(
                self.namespace, self.name, self._decide, create_if_missing=self.update.allow_create
            )
        except KeyNotFoundError as exc:
            if not self.deleting:
                raise status_error(exc, self.gr, self.name) from exc
            # Another request deleted it first: upstream answers as if this one had.
            kv = None
        except StorageError as exc:
            raise status_error(exc, self.gr, self.name) from exc
        stored = self.answer is None  # the storage's state is the answer: a version was stored
        obj = self.answer
        if obj is None:
            assert kv is not None
            obj = self.objects.from_kv(kv)
        return WriteResult(obj, created=self.created, warnings=self.update.warnings, stored=stored)

    async def _decide(self, current: KeyValue | None) -> Decision:
        self.answer, self.deleting = None, False
        old = self.objects.from_kv(current) if current is not None else None
        self._check_uid(old)
        if old is None:
            return await self._create()
        self.created = False
        new = await offload.run(lambda: self.update.transform(old))
        self._check_resource_version(new, old)
        subresource = self.update.opts.subresource
        strategy.prepare_update(self.kind, new, old, subresource)
        if self.admission is not None:
            admitted = await self.admission.admit(self._request(UPDATE, new, old))
            new = admitted if admitted is not None else new
            # Upstream's strategy runs after mutating admission: no webhook changes more either.
            self.kind.keep_to_subresource(new, old, subresource)
        await offload.run(lambda: strategy.validate_update(self.kind, new, old, subresource))
        if self.admission is not None:
            await self.admission.validate(self._request(UPDATE, new, old))
        managedfields.restore_unchanged_times(new, old)
        if new == old:
            self.answer = old
            return None
        dry_run = self.update.opts.dry_run
        if new["metadata"].get("deletionTimestamp") and not new["metadata"].get("finalizers"):
            # The last finalizer is gone from an object being deleted: it goes now. The answer is
            # the object as updated, with the resourceVersion it was last stored at (upstream's
            # deleteWithoutFinalizers answers the update's object, not the deletion).
            self.deleting = True
            self.answer = new
            return None if dry_run else DELETE
        if dry_run:
            self.answer = new
            return None
        return self.objects.encode(new)

    async def _create(self) -> Decision:
        """Create-on-update: the transformed empty object is created as a POST would create it."""
        self.created = True
        obj = await offload.run(lambda: self.update.transform(self.blank()))
        objectmeta.metadata(obj).pop("resourceVersion", None)
        if self.admission is not None:
            admitted = await self.admission.admit(self._request(CREATE, obj, None))
            obj = admitted if admitted is not None else obj
        await offload.run(lambda: strategy.prepare_and_validate_create(self.kind, obj))
        if self.admission is not None:
            await self.admission.validate(self._request(CREATE, obj, None))
        if self.update.opts.dry_run:
            self.answer = obj
            return None
        return self.objects.encode(obj)

    def _request(self, operation: str, obj: JSON, old: JSON | None) -> admission.AdmissionRequest:
        return admission.for_write(self.kind, operation, self.namespace, obj, old, self.update.opts)

    def _check_uid(self, current: JSON | None) -> None:
        """A PUT naming a uid only applies to that very object, as upstream makes it a storage
        precondition."""
        uid = self.update.uid
        current_uid = current["metadata"].get("uid") if current is not None else None
        if uid and current_uid != uid:
            raise errors.conflict_error(
                self.gr,
                self.name,
                f"Precondition failed: UID in precondition: {uid}, UID in object meta: {current_uid or ''}",
            )

    def _check_resource_version(self, new: JSON, old: JSON) -> None:
        """A PUT's resourceVersion is a precondition: a lost compare-and-swap is a 409 (the retry
        finds another one). A patch carries the current resourceVersion unless it names one itself;
        a named stale one is a 409, and a lost compare-and-swap re-applies the patch."""
        precondition = self.update.precondition
        requested = (
            precondition if precondition is not None else str(new["metadata"].get("resourceVersion") or "")
        )
        if requested and requested != old["metadata"]["resourceVersion"]:
            raise errors.modified_conflict_error(self.gr, self.name)
