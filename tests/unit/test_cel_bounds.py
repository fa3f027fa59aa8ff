"""An expression that would work too much fails fast with cel-go's cost-limit message."""

from __future__ import annotations

import time
from typing import Any

import pytest

from apiserver.cel import EvaluationError, compile_expression
from apiserver.cel.bounds import MAX_MAPPED_LIST

COST = "^operation cancelled: actual cost limit exceeded$"


def evaluate(source: str, obj: Any) -> Any:
    return compile_expression(source, ["object"]).evaluate({"object": obj})


def test_nested_comprehensions_stop_at_the_iteration_budget() -> None:
    began = time.perf_counter()
    with pytest.raises(EvaluationError, match=COST):
        evaluate("object.l.all(x, object.l.all(y, x + y >= 0))", {"l": list(range(1000))})
    assert time.perf_counter() - began < 0.5


def test_the_budget_counts_iterations_of_the_whole_evaluation() -> None:
    # About 10,000 in all: one pass over 9,000 elements fits, two do not.
    assert evaluate("object.l.all(x, x >= 0)", {"l": list(range(9000))}) is True
    with pytest.raises(EvaluationError, match=COST):
        evaluate("object.l.all(x, x >= 0) && object.l.all(x, x >= 0)", {"l": list(range(9000))})


def test_comprehensions_over_a_split_string_are_bounded_too() -> None:
    with pytest.raises(EvaluationError, match=COST):
        evaluate("object.s.split(',').all(x, x == 'a')", {"s": ",".join(["a"] * 20_000)})


def test_map_and_filter_refuse_lists_longer_than_the_bound() -> None:
    fits = {"l": list(range(MAX_MAPPED_LIST))}
    assert evaluate("object.l.map(x, x).size()", fits) == MAX_MAPPED_LIST
    too_long = {"m": {"l": list(range(MAX_MAPPED_LIST + 1))}}
    for source in ("object.m.l.map(x, x).size()", "object.m.l.filter(x, x > 0).size() > 0"):
        with pytest.raises(EvaluationError, match=COST):
            evaluate(source, too_long)
    # Without map or filter, a long list costs one step an element.
    assert evaluate("object.m.l.exists(x, x < 0)", too_long) is False


def test_a_one_megabyte_object_is_evaluated_in_milliseconds() -> None:
    subjects = [
        {"kind": "User", "name": f"user-{n:06}", "apiGroup": "rbac.authorization.core.io"}
        for n in range(9000)
    ]
    obj = {"metadata": {"name": "big", "annotations": {"note": "x" * 400_000}}, "subjects": subjects}
    program = compile_expression(
        "object.subjects.all(s, s.name.startsWith('user-')) && size(object.metadata.annotations.note) > 0",
        ["object"],
    )
    began = time.perf_counter()
    assert program.evaluate({"object": obj}) is True
    assert time.perf_counter() - began < 0.2
