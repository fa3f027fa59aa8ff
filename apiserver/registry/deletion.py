"""Delete of one object, as k8s.io/apiserver's generic Store does it for kinds without graceful
deletion (both served kinds), over the storage's one guaranteed-update loop.

A delete first sets the garbage collector's finalizers as its options ask (`orphan` for
propagationPolicy=Orphan or orphanDependents=true, `foregroundDeletion` for Foreground) on a kind
that takes part in garbage collection. If any finalizer is left, the object is only marked
(deletionTimestamp, deletionGracePeriodSeconds 0) and lives on until the last one is removed;
otherwise it goes at once. DeleteOptions.preconditions are checked against the object each attempt.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

from apiserver.admission.chain import AdmissionChain
from apiserver.admission.request import for_delete
from apiserver.machinery import errors, objectmeta
from apiserver.machinery.errors import GroupResource
from apiserver.machinery.metav1 import FINALIZER_DELETE_DEPENDENTS, FINALIZER_ORPHAN_DEPENDENTS
from apiserver.machinery.options import IGNORE_STORE_READ_ERROR, DeleteOptions
from apiserver.machinery.types import JSON
from apiserver.registry.storage_errors import status_error
from apiserver.registry.stored import CorruptObjectError, StoredObjects
from apiserver.resources.base import ResourceKind
from apiserver.storage.interface import KeyNotFoundError, KeyValue, StorageError
from apiserver.storage.update import DELETE, Decision, guaranteed_update

GC_FINALIZERS = (FINALIZER_ORPHAN_DEPENDENTS, FINALIZER_DELETE_DEPENDENTS)
_FINALIZER_OF_POLICY = {"Orphan": FINALIZER_ORPHAN_DEPENDENTS, "Foreground": FINALIZER_DELETE_DEPENDENTS}


def wanted_gc_finalizer(finalizers: list[str], opts: DeleteOptions) -> str | None:
    """The garbage collector's finalizer the object should carry: the deprecated orphanDependents
    decides first, then propagationPolicy, then one the object already has (the first found)."""
    if opts.orphan_dependents is not None:
        return FINALIZER_ORPHAN_DEPENDENTS if opts.orphan_dependents else None
    if opts.propagation_policy is not None:
        return _FINALIZER_OF_POLICY.get(opts.propagation_policy)
    return next((name for name in finalizers if name in GC_FINALIZERS), None)


def deletion_finalizers(finalizers: list[str], opts: DeleteOptions, *, garbage_collected: bool) -> list[str]:
    """The finalizers after a delete with `opts`. A kind outside garbage collection (upstream's
    Unsupported policy) loses both collector finalizers; an unchanged set keeps its order."""
    wanted = wanted_gc_finalizer(finalizers, opts) if garbage_collected else None
    updated = [name for name in finalizers if name not in GC_FINALIZERS] + ([wanted] if wanted else [])
    return finalizers if set(updated) == set(finalizers) else updated


def mark_for_deletion(obj: JSON, opts: DeleteOptions, *, garbage_collected: bool) -> JSON | None:
    """The object as a delete leaves it when finalizers hold it, or None when nothing holds it and
    it is to be removed now. `obj` is not changed."""
    current = list(obj["metadata"].get("finalizers") or [])
    finalizers = deletion_finalizers(current, opts, garbage_collected=garbage_collected)
    if not finalizers:
        return None
    marked = copy.deepcopy(obj)
    meta = marked["metadata"]
    meta["finalizers"] = finalizers
    if not meta.get("deletionTimestamp"):
        # Only the first marking counts as a change of intent. Neither kind keeps a generation of
        # its own, but one a client set at creation moves on, as upstream's markAsDeleting does.
        generation = meta.get("generation")
        if isinstance(generation, int) and generation > 0:
            meta["generation"] = generation + 1
        meta["deletionTimestamp"] = objectmeta.now_text()
    meta["deletionGracePeriodSeconds"] = 0
    return marked


def check_preconditions(kind: ResourceKind, opts: DeleteOptions, meta: JSON, name: str) -> None:
    """DeleteOptions.preconditions, worded as upstream's rest.BeforeDelete words them."""
    pre = opts.preconditions
    qualified = GroupResource(kind.group, kind.kind)
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


@dataclass
class DeleteResult:
    obj: JSON
    # False when finalizers hold the object: it now carries deletionTimestamp and lives on.
    deleted: bool


class ObjectDeletion:
    """The decisions of one delete of the object `name` in `namespace`, and its answer."""

    def __init__(
        self,
        objects: StoredObjects,
        namespace: str,
        name: str,
        opts: DeleteOptions,
        admission: AdmissionChain | None = None,
    ) -> None:
        self.objects = objects
        self.admission = admission
        self.kind = objects.kind
        self.namespace = namespace
        self.name = name
        self.opts = opts
        # The answer when the storage's state is not it (nothing written).
        self.answer: JSON | None = None
        self.deleted = False

    async def run(self) -> DeleteResult:
        try:
            kv = await self.objects.guaranteed_update(self.namespace, self.name, self._decide)
        except StorageError as exc:
            raise status_error(exc, GroupResource(self.kind.group, self.kind.plural), self.name) from exc
        obj = self.answer
        if obj is None:
            assert kv is not None
            obj = self.objects.from_kv(kv)
        return DeleteResult(obj, deleted=self.deleted)

    async def _decide(self, current: KeyValue | None) -> Decision:
        assert current is not None  # an absent object is not found before any decision
        obj = self.objects.from_kv(current)
        check_preconditions(self.kind, self.opts, obj["metadata"], self.name)
        if self.admission is not None:
            # Upstream's deleteValidation: the object being deleted is the request's oldObject, seen
            # by the mutating plugins (webhooks may refuse a delete) and then the validating ones.
            request = for_delete(self.kind, self.namespace, self.name, obj, self.opts)
            await self.admission.admit(request)
            await self.admission.validate(request)
        marked = mark_for_deletion(obj, self.opts, garbage_collected=self.kind.garbage_collected)
        self.deleted = marked is None
        if marked is None:
            # Nothing holds it: it goes (answered with its last state, at the deletion's revision).
            self.answer = obj if self.opts.dry_run else None
            return None if self.opts.dry_run else DELETE
        if self.opts.dry_run or marked == obj:
            # Held by finalizers; a delete that changes nothing writes nothing (upstream's no-op update).
            self.answer = marked
            return None
        self.answer = None
        return self.objects.encode(marked)


def _is_corrupt(objects: StoredObjects, kv: KeyValue | None) -> bool:
    if kv is None:
        return False
    try:
        objects.from_kv(kv)
    except CorruptObjectError:
        return True
    return False


async def delete_corrupt(objects: StoredObjects, namespace: str, name: str) -> bool:
    """The unsafe delete of an object that no longer decodes (DeleteOptions
    ignoreStoreReadErrorWithClusterBreakingPotential), as upstream's corrupt object deleter: the
    key is removed without reading the object, so no precondition, finalizer or admission applies.
    Refused (422) for an object that decodes or does not exist. False when it was gone already."""
    gr = GroupResource(objects.kind.group, objects.kind.plural)
    key = objects.key(namespace, name)
    try:
        kv = await objects.storage.get(key)
        if not _is_corrupt(objects, kv):
            refusal = errors.invalid(
                IGNORE_STORE_READ_ERROR,
                True,
                "is exclusively used to delete corrupt object(s), try again by removing this option",
            )
            raise errors.invalid_error(gr.group, gr.resource, name, [refusal])
        await guaranteed_update(objects.storage, key, lambda _current: DELETE, current=kv)
    except KeyNotFoundError:
        return False
    except StorageError as exc:
        raise status_error(exc, gr, name) from exc
    return True
