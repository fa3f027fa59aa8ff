"""The CEL cost evaluator's rules, without the oracle.

Every cost written here was confirmed against upstream (the oracle of tests/support/celcost_build.py,
cel-go v0.23.2 in Kubernetes 1.33's admission environment); tests/integration/test_cel_cost.py
compares the whole corpus with it on every run.
"""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from apiserver.cel import compile_expression
from apiserver.cel.checked import checked_tree
from apiserver.cel.cost import Unsupported, evaluate_with_cost
from apiserver.cel.cost.tracker import call_cost, traversal
from apiserver.cel.environment import checker
from apiserver.cel.errors import COST_LIMIT_EXCEEDED, EvaluationError

OBJECT: dict[str, Any] = {
    "a": 1,
    "b": "xyz",
    "s": "hello",
    "l": [1, 2, 3],
    "m": {"k": "v"},
    "n": {"x": {"y": 2}},
    "thirty": "a" * 30,
    "ts": "2024-05-01T10:00:00Z",
}


def run(source: str, obj: Any = None, limit: int = 1_000_000) -> tuple[Any, int]:
    checked = checked_tree(checker(("object",)).compile(source))
    return evaluate_with_cost(checked, {"object": OBJECT if obj is None else obj}, limit)


@pytest.mark.parametrize(
    ("source", "value", "cost"),
    [
        # Constants are free; a variable costs 1, each field or index 1 more.
        ("1", 1, 0),
        ("object.a", 1, 2),
        ("object.n.x.y", 2, 4),
        ("object.l[0]", 1, 3),
        ("object.l[object.a]", 2, 4),  # the index's variable itself is free
        ("object.l[1+1]", 3, 4),  # the index's call costs 1
        ("[object.a, object.a][0]", 1, 16),  # a list 10, and an attribute over it 1
        # has() costs its fields but not the attribute (PresenceTestHasCost(false)).
        ("has(object.a)", True, 1),
        ("has(object.n.x.y)", True, 3),
        # The conditional is free, and so is a branch's variable.
        ("true ? object.a : object.b", 1, 1),
        ("object.a > 0 ? object.a : object.b", 1, 4),
        # Literals of constants are built once; others cost 10 (list) or 30 (map).
        ("[1, 2, 3]", [1, 2, 3], 0),
        ("{'a': object.a}", {"a": 1}, 32),
        ("int('5')", 5, 0),  # a conversion of a constant, folded
        # `in` a constant list is a set lookup; `in` a list costs 1 when the checker could not
        # tell it is a list, its length when it could.
        ("object.a in [1, 2]", True, 2),
        ("object.a in object.l", True, 5),
        # Operands of dynamic type leave the overload open: the call costs 1.
        ("object.b + object.b", "xyzxyz", 5),
        ("object.thirty + 'x'", "a" * 30 + "x", 6),  # add_string: ceil(31 * 0.1)
        ("object.thirty == object.thirty", True, 7),  # equality: ceil(min size * 0.1)
        ("object.thirty.contains(object.thirty)", True, 13),  # 3 * 3
        ("object.thirty.matches('a+')", True, 6),  # ceil(3.1) * ceil(2 * 0.25)
        ("object.thirty.lowerAscii()", "a" * 30, 5),
        ("object.thirty.split('a').size()", 31, 9),  # split: 2 * ceil(30 * 0.1)
        ("object.?n.x.orValue(0)", {"y": 2}, 3),  # orValue is free
        ("optional.none().orValue(2)", 2, 1),
    ],
)
def test_costs_as_upstream_counts_them(source: str, value: Any, cost: int) -> None:
    assert run(source) == (value, cost)


@pytest.mark.parametrize(
    ("source", "cost"),
    [
        ("object.l.all(x, x > 0)", 18),  # range 2; per element: condition 2, step 3; result 1
        ("object.l.exists(x, x > 2)", 21),  # condition 3 (with its `!`), step 3
        ("object.l.exists_one(x, x > 2)", 12),
        ("object.l.map(x, x * 2)", 45),  # each element: accumulator 1, list 10, `+` 1, `*` 1
        ("object.l.filter(x, x > 1)", 35),
    ],
)
def test_macros_cost_as_cel_go_expands_them(source: str, cost: int) -> None:
    assert run(source)[1] == cost


def test_the_value_is_program_evaluate_s() -> None:
    for source in ("object.l.map(x, x * 2)", "timestamp(object.ts)", "duration('1h30m')", "b'ab'", "1u"):
        expected = compile_expression(source, ["object"]).evaluate({"object": OBJECT})
        assert run(source)[0] == expected
    assert run("timestamp(object.ts)")[0] == datetime.datetime(2024, 5, 1, 10, tzinfo=datetime.UTC)


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("object.zz", "no such key: zz"),
        ("object.l[5]", "index out of bounds: 5"),
        ("object.l['x']", "unsupported index type 'string' in list"),
        ("object.a / 0", "division by zero"),
        ("object.a % 0", "modulus by zero"),
        ("9223372036854775807 + object.a", "integer overflow"),
        ("object.b + object.a", "no such overload"),
        ("object.a.all(x, x)", "got 'types.Int', expected iterable type"),
        ("int(object.b)", "type conversion error from 'string' to 'int'"),
    ],
)
def test_errors_in_cel_go_s_words(source: str, message: str) -> None:
    with pytest.raises(EvaluationError, match="^" + message.replace("(", r"\(").replace(")", r"\)") + "$"):
        run(source)


def test_errors_absorbed_by_logic_still_cost() -> None:
    assert run("object.zz == 1 || true") == (True, 3)
    assert run("object.l.exists(x, x.y == 1 || x == 3)") == (True, 30)


def test_the_limit_stops_at_the_first_cost_over_it() -> None:
    # 5 per element plus 2: 199,999 elements cost 999,997, one more goes over.
    items = list(range(1, 200_000))
    assert run("object.all(x, x > 0)", items) == (True, 999_997)
    with pytest.raises(EvaluationError, match=COST_LIMIT_EXCEEDED):
        run("object.all(x, x > 0)", [*items, 1])


def test_growing_strings_are_stopped_by_their_cost() -> None:
    assert run("object.map(i, 'x' + string(i) + 'y').size()", list(range(100))) == (100, 1603)
    with pytest.raises(EvaluationError, match=COST_LIMIT_EXCEEDED):
        run("object.map(i, 'x' + string(i) + 'y').size()", list(range(100)), limit=500)


def test_what_is_not_implemented_is_unsupported() -> None:
    for source in ("'%s'.format(['x'])", "optional.of(object.a)"):
        with pytest.raises(Unsupported):
            run(source)


def test_tracker_rules() -> None:
    assert call_cost("startsWith", "starts_with_string", ["a" * 95, "a"], True) == 10
    assert call_cost("_+_", "", ["a" * 95, "b" * 95], "") == 1  # no overload: nominal
    assert call_cost("join", "list_join_string", [["a"] * 10], "a" * 19) == 4  # ceil(19 * 2 * 0.1)
    assert call_cost("indexOf", "", ["é" * 10], 0) == 2  # bytes, floored: 20 * 0.1
    assert call_cost("check", "", [], None) == 350_000
    assert call_cost("ip", "cidr_ip", ["10.0.0.0/8"], None) == 1
    assert traversal({"k": ["ab", 1]}) == 1  # 'k' 0, 'ab' 0, 1 one


def test_authorization_checks_cost_upstreams_350000_each_and_ask_the_authorizer() -> None:
    """Two checks in a loop fit the per-call limit; the third cancels the evaluation, as upstream."""
    from apiserver.cel.library import authz

    asked: list[str] = []

    def allow_none(user: dict[str, Any], attributes: dict[str, Any]) -> tuple[str, str, str]:
        asked.append(user["username"])
        return "NoOpinion", "", ""

    source = (
        "object.all(n, !authorizer.serviceAccount('ns', n).group('').resource('pods').check('get').allowed())"
    )
    checked = checked_tree(checker(("authorizer", "object")).compile(source))
    variables: dict[str, Any] = {"authorizer": authz.authorizer_for({"username": "alice"})}
    with authz.checking(allow_none):
        assert evaluate_with_cost(checked, {**variables, "object": ["a", "b"]}, 1_000_000) == (True, 700_022)
        with pytest.raises(EvaluationError, match=COST_LIMIT_EXCEEDED):
            evaluate_with_cost(checked, {**variables, "object": ["a", "b", "c"]}, 1_000_000)
    assert asked[:2] == ["system:serviceaccount:ns:a", "system:serviceaccount:ns:b"]
