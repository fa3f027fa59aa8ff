"""What a delete does to an object that finalizers may hold, as k8s.io/apiserver's generic Store does
it for kinds without graceful deletion (both served kinds).

A delete first sets the garbage collector's finalizers as its options ask (`orphan` for
propagationPolicy=Orphan or orphanDependents=true, `foregroundDeletion` for Foreground) on a kind
that takes part in garbage collection. If any finalizer is left, the object is only marked
(deletionTimestamp, deletionGracePeriodSeconds 0) and lives on until the last one is removed;
otherwise it goes at once.
"""

from __future__ import annotations

import copy

from apiserver.machinery import objectmeta
from apiserver.machinery.metav1 import FINALIZER_DELETE_DEPENDENTS, FINALIZER_ORPHAN_DEPENDENTS
from apiserver.machinery.options import DeleteOptions
from apiserver.machinery.types import JSON

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
        meta["deletionTimestamp"] = objectmeta.format_time(objectmeta.now())
    meta["deletionGracePeriodSeconds"] = 0
    return marked
