"""A phase's cost budget: charged per expression, spent exactly where upstream's is."""

from __future__ import annotations

import pytest

from apiserver.admission.budget import OUT_OF_BUDGET, Budget, OutOfBudget
from apiserver.cel import Costed, EvaluationError


def exact(cost: int) -> Costed:
    return Costed(True, None, cost, True)


def bounded(bound: int, actual: int, priced: list[int] | None = None) -> Costed:
    def pricing() -> int:
        if priced is not None:
            priced.append(actual)
        return actual

    return Costed(True, None, bound, False, pricing)


def test_spending_the_whole_budget_is_allowed_and_one_more_unit_is_not() -> None:
    budget = Budget(100)
    budget.charge(exact(60))
    budget.charge(exact(40))
    assert budget.remaining == 0
    with pytest.raises(OutOfBudget, match=f"^{OUT_OF_BUDGET}$"):
        budget.charge(exact(1))


def test_bounds_are_charged_without_pricing_while_they_fit() -> None:
    priced: list[int] = []
    budget = Budget(100)
    budget.charge(bounded(50, 10, priced))
    budget.charge(bounded(50, 10, priced))
    assert budget.remaining == 0 and priced == []


def test_bounds_that_overrun_are_priced_exactly_before_the_budget_is_judged() -> None:
    priced: list[int] = []
    budget = Budget(100)
    budget.charge(bounded(70, 20, priced))
    budget.charge(bounded(70, 30, priced))  # 140 in bounds, 50 in fact
    assert sorted(priced) == [20, 30] and budget.remaining == 50
    budget.charge(exact(50))
    with pytest.raises(OutOfBudget):
        budget.charge(bounded(5, 1))


def test_an_expression_that_failed_is_charged_too() -> None:
    budget = Budget(10)
    budget.charge(Costed(None, EvaluationError("no such key: x", 8), 8, True))
    assert budget.remaining == 2
