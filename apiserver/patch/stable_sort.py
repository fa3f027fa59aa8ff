"""Go's sort.SliceStable, step for step: the order of a strategic merge patch's lists depends on it.

Upstream sorts list items with a comparator that is not a strict order (an item absent from the
order it sorts by is "less" than anything), so only the very same algorithm puts them where upstream
does: insertion sort of blocks of 20, then SymMerge (Kim & Kutzner) of ever larger runs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

BLOCK_SIZE = 20
"""How many items Go's stable sort insertion-sorts at once before merging."""


def go_stable_sort(items: list[Any], less: Callable[[int, int], bool]) -> list[int]:
    """The permutation Go's sort.SliceStable produces for `less` over positions 0..len(items)-1."""
    sorter = _StableSort(len(items), less)
    sorter.sort()
    return sorter.data


class _StableSort:
    """The positions being sorted (`data`), compared through `less` on the original positions."""

    def __init__(self, size: int, less: Callable[[int, int], bool]) -> None:
        self.data = list(range(size))
        self.less = less

    def sort(self) -> None:
        size = len(self.data)
        start, end = 0, BLOCK_SIZE
        while end <= size:
            self._insertion_sort(start, end)
            start, end = end, end + BLOCK_SIZE
        self._insertion_sort(start, size)
        block = BLOCK_SIZE
        while block < size:
            self._merge_runs(block)
            block *= 2

    def _lt(self, i: int, j: int) -> bool:
        return self.less(self.data[i], self.data[j])

    def _swap(self, i: int, j: int) -> None:
        self.data[i], self.data[j] = self.data[j], self.data[i]

    def _insertion_sort(self, a: int, b: int) -> None:
        for i in range(a + 1, b):
            j = i
            while j > a and self._lt(j, j - 1):
                self._swap(j, j - 1)
                j -= 1

    def _merge_runs(self, block: int) -> None:
        """Merges each pair of neighbouring sorted runs of `block` items (the last may be shorter)."""
        size = len(self.data)
        a, b = 0, 2 * block
        while b <= size:
            self._sym_merge(a, a + block, b)
            a, b = b, b + 2 * block
        if a + block < size:
            self._sym_merge(a, a + block, size)

    def _sym_merge(self, a: int, m: int, b: int) -> None:
        """Merges the sorted runs [a, m) and [m, b) in place."""
        if m - a == 1:
            self._insert_first(a, m, b)
            return
        if b - m == 1:
            self._insert_last(a, m, b)
            return
        mid = (a + b) // 2
        n = mid + m
        start = self._split_point(n - b, mid, n) if m > mid else self._split_point(a, m, n)
        end = n - start
        if start < m < end:
            self._rotate(start, m, end)
        if a < start < mid:
            self._sym_merge(a, start, mid)
        if mid < end < b:
            self._sym_merge(mid, end, b)

    def _split_point(self, start: int, r: int, n: int) -> int:
        """SymMerge's binary search for where the two runs cross over."""
        p = n - 1
        while start < r:
            c = (start + r) // 2
            if not self._lt(p - c, c):
                start = c + 1
            else:
                r = c
        return start

    def _insert_first(self, a: int, m: int, b: int) -> None:
        """A left run of one item: moved after the right run's items not greater than it."""
        i, j = m, b
        while i < j:
            h = (i + j) // 2
            if self._lt(h, a):
                i = h + 1
            else:
                j = h
        for k in range(a, i - 1):
            self._swap(k, k + 1)

    def _insert_last(self, a: int, m: int, b: int) -> None:
        """A right run of one item: moved before the left run's items greater than it."""
        i, j = a, m
        while i < j:
            h = (i + j) // 2
            if not self._lt(m, h):
                i = h + 1
            else:
                j = h
        for k in range(m, i, -1):
            self._swap(k, k - 1)

    def _swap_range(self, a: int, b: int, n: int) -> None:
        for i in range(n):
            self._swap(a + i, b + i)

    def _rotate(self, a: int, m: int, b: int) -> None:
        """Swaps the blocks [a, m) and [m, b) by repeated block swaps, as Go does."""
        i, j = m - a, b - m
        while i != j:
            if i > j:
                self._swap_range(m - i, m, j)
                i -= j
            else:
                self._swap_range(m - i, m + j - i, i)
                j -= i
        self._swap_range(m - i, m, i)
