"""Evaluating a checked expression with upstream's runtime cost accounting."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from apiserver.cel.checked import Checked
from apiserver.cel.cost.meter import CostLimitExceeded, Meter, Step
from apiserver.cel.cost.plan import plan
from apiserver.cel.cost.values import Err, plain
from apiserver.cel.errors import COST_LIMIT_EXCEEDED, EvaluationError

# Compiled plans kept by the identity of their checked tree (which holds dicts, so is not hashable).
_PLANS: OrderedDict[int, tuple[Checked, Step]] = OrderedDict()
_KEPT = 512


def compiled(checked: Checked) -> Step:
    """The plan of `checked`, compiled once."""
    found = _PLANS.get(id(checked))
    if found is not None and found[0] is checked:
        _PLANS.move_to_end(id(checked))
        return found[1]
    step = plan(checked)
    _PLANS[id(checked)] = (checked, step)
    if len(_PLANS) > _KEPT:
        _PLANS.popitem(last=False)
    return step


def evaluate_with_cost(checked: Checked, activation: Mapping[str, Any], limit: int) -> tuple[Any, int]:
    """The value of `checked` over `activation` (JSON-like values by variable name), as
    Program.evaluate returns it, and the cost cel-go's tracker counts for it. Raises
    EvaluationError (cel-go's words), COST_LIMIT_EXCEEDED as soon as the cost is over `limit`, and
    Unsupported for what this evaluator does not implement."""
    step = compiled(checked)
    meter = Meter(limit)
    try:
        value = step(dict(activation), meter)
        meter.check()
    except CostLimitExceeded:
        raise EvaluationError(COST_LIMIT_EXCEEDED, meter.cost) from None
    if type(value) is Err:
        raise EvaluationError(value.message, meter.cost)
    return plain(value), meter.cost
