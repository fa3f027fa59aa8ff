"""What keeps one evaluation small, beside cel-expr-python's own iteration budget.

cel-expr-python stops an evaluation after about 10,000 comprehension iterations in all (where
upstream counts a cost of 1,000,000 per call). Within that budget one thing still grows badly: its
`map` and `filter` copy the list they build at every step, so a list of n elements costs n*n/2
copies (8,000 elements: 1.5 s and 1 GB at the peak). An expression that maps or filters is
therefore refused, as upstream refuses a call over its cost limit, when its input holds a list
longer than MAX_MAPPED_LIST.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from apiserver.cel.errors import COST_LIMIT_EXCEEDED, EvaluationError

# A map or filter over this many elements takes about 60 ms and 70 MB at its peak.
MAX_MAPPED_LIST = 2_000

# Over-approximates: a `.map(` inside a string literal also counts, which only costs the walk.
_MAPS_OR_FILTERS = re.compile(r"\.\s*(?:map|filter)\s*\(")


def maps_lists(source: str) -> bool:
    """Whether the expression may build a list with `map` or `filter`."""
    return _MAPS_OR_FILTERS.search(source) is not None


def _longest_list(value: Any) -> int:
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


def check_mapped_lists(activation: Mapping[str, Any]) -> None:
    """Refuse the evaluation when any list in the activation is too long to map or filter."""
    if _longest_list(list(activation.values())) > MAX_MAPPED_LIST:
        raise EvaluationError(COST_LIMIT_EXCEEDED)
