"""The patch schema: the `patchStrategy`/`patchMergeKey` struct tags a strategic merge patch follows,
by field path, and ObjectMeta's, on which every kind's schema is built."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Literal


class PatchStrategy:
    """The `patchStrategy`/`patchMergeKey` tags of one field.

    `merge` on a list of objects merges elements by `merge_key`; `merge` without a key makes a
    list of scalars a set (union, `$deleteFromPrimitiveList`); `replace` replaces the field whole.
    A list with no strategy is replaced whole (atomic) and an object with none is merged.
    """

    __slots__ = ("merge_key", "strategy")

    def __init__(self, strategy: Literal["merge", "replace"], merge_key: str = "") -> None:
        self.strategy = strategy
        self.merge_key = merge_key

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PatchStrategy):
            return NotImplemented
        return (self.strategy, self.merge_key) == (other.strategy, other.merge_key)

    def __hash__(self) -> int:
        return hash((self.strategy, self.merge_key))

    def __repr__(self) -> str:
        key = f", merge_key={self.merge_key!r}" if self.merge_key else ""
        return f"PatchStrategy({self.strategy!r}{key})"


class PatchSchema:
    """Patch strategies by field path: dotted JSON field names from the object's root, with list
    elements transparent (`metadata.ownerReferences`, `spec.containers.ports`)."""

    __slots__ = ("_fields",)

    def __init__(self, fields: Mapping[str, PatchStrategy] | None = None) -> None:
        self._fields: dict[str, PatchStrategy] = dict(fields or {})

    @property
    def fields(self) -> Mapping[str, PatchStrategy]:
        return dict(self._fields)

    def strategy(self, path: Iterable[str]) -> PatchStrategy | None:
        return self._fields.get(".".join(path))

    def extend(self, fields: Mapping[str, PatchStrategy]) -> PatchSchema:
        """A schema with these fields added (or overridden), e.g. a kind's on top of ObjectMeta's."""
        return PatchSchema({**self._fields, **fields})

    def __repr__(self) -> str:
        return f"PatchSchema({self._fields!r})"


OBJECT_META_PATCH_SCHEMA = PatchSchema(
    {
        # metav1.ObjectMeta: `patchStrategy:"merge" patchMergeKey:"uid"`.
        "metadata.ownerReferences": PatchStrategy("merge", "uid"),
        # metav1.ObjectMeta: `patchStrategy:"merge"`, a set of strings.
        "metadata.finalizers": PatchStrategy("merge"),
        # metadata.managedFields has no strategy: replaced whole.
    }
)
"""The strategies of the list fields of ObjectMeta, shared by every kind."""
