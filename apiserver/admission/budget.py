"""Upstream's runtime CEL cost budgets for admission (k8s.io/apiserver's celconfig): what all the
expressions of one phase may spend together, each of them also held to its own per-call limit.

An expression's cost is known exactly when the cost-tracking evaluator ran it, and only bounded
from above when the fast engine did (the bound is what made running it there safe). A budget
charges the bound and asks for exact costs only when the bounds alone would overrun it, so that
it runs out exactly where upstream's does while the common case costs nothing more.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from apiserver.cel import Costed

# celconfig.RuntimeCELCostBudget: a policy's validations, messages and variables together, and
# separately its audit annotations.
RUNTIME_BUDGET = 10_000_000
# celconfig.RuntimeCELCostBudgetMatchConditions: the matchConditions of one policy or webhook.
MATCH_CONDITIONS_BUDGET = 2_500_000
OUT_OF_BUDGET = "validation failed due to running out of cost budget, no further validation rules will be run"


class OutOfBudget(Exception):
    """The phase spent more than its budget: no further expression of it runs."""

    def __init__(self) -> None:
        super().__init__(OUT_OF_BUDGET)


class Budget:
    """What a phase has left to spend."""

    def __init__(self, total: int) -> None:
        self.remaining = total
        self._bounded: list[Costed] = []

    def charge(self, costed: Costed) -> None:
        """Spend `costed`'s cost; OutOfBudget when the phase has overrun its budget (upstream's
        `cost > remaining`), judged on exact costs."""
        self.remaining -= costed.cost
        if not costed.exact:
            self._bounded.append(costed)
        if self.remaining >= 0:
            return
        for bounded in self._bounded:
            self.remaining += bounded.cost - bounded.exact_cost()
        self._bounded.clear()
        if self.remaining < 0:
            raise OutOfBudget
