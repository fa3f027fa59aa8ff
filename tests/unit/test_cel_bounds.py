"""An evaluation is held to upstream's per-call cost limit, whichever evaluator runs it: what
upstream finishes finishes here (however many iterations the fast engine could take), and what
upstream cancels fails fast with cel-go's message. The costs quoted were upstream's own, asked of
tests/support/celcost_build.py's oracle."""

from __future__ import annotations

import time
from typing import Any

import pytest

from apiserver.cel import EvaluationError, compile_expression
from apiserver.cel.bounds import ENGINE_ITERATIONS, MAX_MAPPED_LIST

COST = "^operation cancelled: actual cost limit exceeded$"


def evaluate(source: str, obj: Any) -> Any:
    return compile_expression(source, ["object"]).evaluate({"object": obj})


def test_nested_comprehensions_stop_at_the_cost_limit() -> None:
    began = time.perf_counter()
    with pytest.raises(EvaluationError, match=COST):
        evaluate("object.l.all(x, object.l.all(y, x + y >= 0))", {"l": list(range(1000))})
    assert time.perf_counter() - began < 2.0


def test_more_iterations_than_the_engine_takes_finish_within_the_cost_limit() -> None:
    # Upstream: 90,006 for two passes over 9,000 elements; 850,003 for one over 170,000.
    assert evaluate("object.l.all(x, x >= 0) && object.l.all(x, x >= 0)", {"l": list(range(9000))})
    assert evaluate("object.l.all(x, x >= 0)", {"l": list(range(170_000))}) is True
    assert evaluate("object.s.split(',').all(x, x == 'a')", {"s": ",".join(["a"] * 20_000)}) is True


def test_one_pass_over_too_many_elements_is_cancelled() -> None:
    # 6 a step for a plain `all`: 200,000 elements cost about 1,200,000.
    with pytest.raises(EvaluationError, match=COST):
        evaluate("object.l.all(x, x >= 0)", {"l": list(range(200_000))})


def test_map_and_filter_over_long_lists_answer_as_upstream() -> None:
    longer = {"m": {"l": list(range(MAX_MAPPED_LIST + 1))}}
    assert evaluate("object.m.l.map(x, x).size()", longer) == MAX_MAPPED_LIST + 1
    assert evaluate("object.m.l.filter(x, x > 0).size()", longer) == MAX_MAPPED_LIST
    began = time.perf_counter()
    with pytest.raises(EvaluationError, match=COST):
        evaluate("object.l.map(x, x).size()", {"l": list(range(100_000))})
    assert time.perf_counter() - began < 1.0


def test_a_one_megabyte_object_is_evaluated_in_milliseconds() -> None:
    subjects = [
        {"kind": "User", "name": f"user-{n:06}", "apiGroup": "rbac.authorization.core.io"}
        for n in range(ENGINE_ITERATIONS - 1000)
    ]
    obj = {"metadata": {"name": "big", "annotations": {"note": "x" * 400_000}}, "subjects": subjects}
    program = compile_expression(
        "object.subjects.all(s, s.name.startsWith('user-')) && size(object.metadata.annotations.note) > 0",
        ["object"],
    )
    began = time.perf_counter()
    assert program.evaluate({"object": obj}) is True
    assert time.perf_counter() - began < 0.2
