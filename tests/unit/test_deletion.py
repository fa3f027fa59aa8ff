"""What a delete does to finalizers and metadata (apiserver.registry.deletion), case by case as upstream's
generic Store decides it (shouldOrphanDependents, shouldDeleteDependents, markAsDeleting)."""

from __future__ import annotations

from typing import Any

import pytest

from apiserver.machinery.options import DeleteOptions
from apiserver.registry.deletion import deletion_finalizers, mark_for_deletion, wanted_gc_finalizer

ORPHAN = "orphan"
FOREGROUND = "foregroundDeletion"


def opts(**kwargs: Any) -> DeleteOptions:
    return DeleteOptions(**kwargs)


@pytest.mark.parametrize(
    ("finalizers", "options", "wanted"),
    [
        ([], opts(), None),
        ([], opts(propagation_policy="Background"), None),
        ([], opts(propagation_policy="Orphan"), ORPHAN),
        ([], opts(propagation_policy="Foreground"), FOREGROUND),
        ([], opts(orphan_dependents=True), ORPHAN),
        ([], opts(orphan_dependents=False), None),
        # The options win over a finalizer the object has...
        ([FOREGROUND], opts(orphan_dependents=True), ORPHAN),
        ([ORPHAN], opts(propagation_policy="Background"), None),
        # ...without options the first collector finalizer it has stays.
        (["a/b", ORPHAN], opts(), ORPHAN),
        ([FOREGROUND, ORPHAN], opts(), FOREGROUND),
    ],
)
def test_wanted_gc_finalizer(finalizers: list[str], options: DeleteOptions, wanted: str | None) -> None:
    assert wanted_gc_finalizer(finalizers, options) == wanted


def test_an_unchanged_set_keeps_its_order() -> None:
    finalizers = [ORPHAN, "a/b"]
    assert deletion_finalizers(finalizers, opts(), garbage_collected=True) == [ORPHAN, "a/b"]


def test_a_changed_set_puts_the_collectors_finalizer_last() -> None:
    changed = deletion_finalizers(
        [ORPHAN, "a/b"], opts(propagation_policy="Foreground"), garbage_collected=True
    )
    assert changed == ["a/b", FOREGROUND]


def test_a_kind_outside_garbage_collection_drops_the_collectors_finalizers() -> None:
    finalizers = [FOREGROUND, "a/b"]
    assert deletion_finalizers(finalizers, opts(propagation_policy="Orphan"), garbage_collected=False) == [
        "a/b"
    ]
    assert deletion_finalizers(["a/b"], opts(), garbage_collected=False) == ["a/b"]


def _obj(**meta: Any) -> dict[str, Any]:
    return {"kind": "RoleBinding", "metadata": {"name": "x", "resourceVersion": "7", **meta}}


def test_nothing_holds_an_object_without_finalizers() -> None:
    assert mark_for_deletion(_obj(), opts(), garbage_collected=True) is None
    assert (
        mark_for_deletion(_obj(finalizers=[ORPHAN]), opts(orphan_dependents=False), garbage_collected=True)
        is None
    )


def test_marking_sets_the_deletion_fields_and_no_generation() -> None:
    obj = _obj(finalizers=["a/b"])
    marked = mark_for_deletion(obj, opts(), garbage_collected=True)
    assert marked is not None
    meta = marked["metadata"]
    assert meta["deletionTimestamp"].endswith("Z") and meta["deletionGracePeriodSeconds"] == 0
    assert meta["finalizers"] == ["a/b"] and "generation" not in meta
    assert "deletionTimestamp" not in obj["metadata"]


def test_only_the_first_marking_moves_a_generation() -> None:
    marked = mark_for_deletion(_obj(finalizers=["a/b"], generation=5), opts(), garbage_collected=True)
    assert marked is not None and marked["metadata"]["generation"] == 6
    again = mark_for_deletion(marked, opts(), garbage_collected=True)
    assert again == marked


def test_an_object_being_deleted_still_takes_the_finalizer_a_delete_asks_for() -> None:
    deleting = _obj(
        finalizers=["a/b"], deletionTimestamp="2026-11-22T02:16:41Z", deletionGracePeriodSeconds=0
    )
    marked = mark_for_deletion(deleting, opts(propagation_policy="Orphan"), garbage_collected=True)
    assert marked is not None
    assert marked["metadata"]["finalizers"] == ["a/b", ORPHAN]
    assert marked["metadata"]["deletionTimestamp"] == "2026-11-22T02:16:41Z"
