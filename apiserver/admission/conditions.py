"""matchConditions, as upstream's matcher reads them for policies and webhooks alike: a condition
that is false decides (the request is not for this policy or webhook), whatever errors others met;
otherwise the errors met are what failurePolicy judges."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from apiserver.admission.policy.compiled import Expression, ExpressionError


def conditions_hold(
    conditions: Iterable[tuple[str, Expression]], run: Callable[[Expression], Any]
) -> tuple[bool, list[str]]:
    """(False, []) when a condition is false; else (True, the errors of those that failed)."""
    failures: list[str] = []
    for _name, expression in conditions:
        try:
            value = run(expression)
        except ExpressionError as exc:
            failures.append(str(exc))
            continue
        if value is False:
            return False, []
    return True, failures
