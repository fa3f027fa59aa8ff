"""The limits one evaluation is held to: upstream's, and those of cel-expr-python's engine.

Upstream stops an evaluation whose cost, as cel-go's tracker counts it, passes PER_CALL_LIMIT.
cel-expr-python counts no cost: it stops after ENGINE_ITERATIONS comprehension iterations in all,
and its `map` and `filter` (and the transforms) copy what they build at every step, so a list of n
elements costs n*n/2 copies (8,000 elements: 1.5 s and 1 GB at the peak). An evaluation the engine
cannot finish within those goes to the cost-tracking evaluator instead.
"""

from __future__ import annotations

import re
from typing import Any

# celconfig.PerCallLimit.
PER_CALL_LIMIT = 1_000_000
# cel-expr-python's comprehension budget ("Iteration budget exceeded" past it).
ENGINE_ITERATIONS = 10_000
# A map or filter over this many elements takes the engine about 60 ms and 70 MB at its peak.
MAX_MAPPED_LIST = 2_000

# Over-approximates: a `.map(` inside a string literal also counts, which only costs the walk.
_MAPS_OR_FILTERS = re.compile(r"\.\s*(?:map|filter|transformList|transformMap|transformMapEntry)\s*\(")


def maps_lists(source: str) -> bool:
    """Whether the expression may build a list with `map` or `filter` (or a list or map with the
    two-variable comprehensions' transforms, which copy the same way)."""
    return _MAPS_OR_FILTERS.search(source) is not None


def longest_list(value: Any) -> int:
    """The length of the longest list anywhere in `value`."""
    longest = 0
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, dict):
            pending.extend(item.values())
        elif isinstance(item, list):
            longest = max(longest, len(item))
            pending.extend(item)
    return longest
