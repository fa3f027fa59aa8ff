"""The running cost of one evaluation, and the signature of every compiled step."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class CostLimitExceeded(Exception):
    """The running cost went over the limit: evaluation stops at once, as cel-go's panics."""


class Meter:
    __slots__ = ("cost", "limit")

    def __init__(self, limit: int) -> None:
        self.cost = 0
        self.limit = limit

    def check(self) -> None:
        """Stop when over the limit. Cost only grows, so checking at the points where work can grow
        (calls, loop iterations) and once at the end finds every evaluation that goes over."""
        if self.cost > self.limit:
            raise CostLimitExceeded


# A compiled step: the value of a node under an activation (variables by name), counting its cost.
Step = Callable[[dict[str, Any], Meter], Any]
