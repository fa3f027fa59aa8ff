"""matchConditions, as upstream's matcher reads them for policies and webhooks alike: a condition
that is false decides (the request is not for this policy or webhook), whatever errors others met;
otherwise the errors met are what failurePolicy judges. Every condition is evaluated, within one
cost budget; running out of it is the one error then."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from apiserver.admission.budget import MATCH_CONDITIONS_BUDGET, Budget, OutOfBudget
from apiserver.admission.policy.compiled import Expression, ExpressionError


def conditions_hold(
    conditions: Iterable[tuple[str, Expression]], run: Callable[[Expression, Budget], Any]
) -> tuple[bool, list[str]]:
    """(False, []) when a condition is false; else (True, the errors of those that failed)."""
    budget = Budget(MATCH_CONDITIONS_BUDGET)
    failures: list[str] = []
    false = False
    for _name, expression in conditions:
        try:
            value = run(expression, budget)
        except OutOfBudget as exc:
            return True, [str(exc)]
        except ExpressionError as exc:
            failures.append(str(exc))
            continue
        false = false or value is False
    return (False, []) if false else (True, failures)
