"""The cost bound's rules, fast: what it charges, what it measures of the input, where it gives up.

The costs written here as numbers are upstream's own, as its tracker counted them through the cost
oracle (tests/support/celcost_build.py) over OBJECT; for those expressions the bound is exact.
tests/integration/test_cel_cost_bound.py holds the bound to the oracle over a whole corpus.
"""

from __future__ import annotations

from typing import Any

import pytest

from apiserver.cel.checked import Call, Checked, checked_tree
from apiserver.cel.cost.bound import Bound, cost_bound
from apiserver.cel.cost.charges import walk_cost
from apiserver.cel.cost.sizes import UNBOUNDED, Observed, SizeSummary, traversal
from apiserver.cel.environment import checker

OBJECT = {
    "subjects": [{"kind": "User", "name": "x" * 20}] * 3,
    "a": {"b": {"c": 1}},
    "s": "hello world",
    "l": [1, 2, 3],
    "m": {"k": "v"},
}


def bound(source: str, variables: dict[str, Any] | None = None) -> Bound:
    variables = {"object": OBJECT} if variables is None else variables
    checked = checked_tree(checker(tuple(sorted(variables))).compile(source))
    return cost_bound(checked, variables)


# Upstream's actual cost of each, over OBJECT.
EXACT = [
    ("object.a.b.c == 1", 5),
    ("has(object.m.k)", 2),
    ("[object.a][0]", 14),
    ("{'a': object.a}", 32),
    ("[1, 2]", 0),
    ("object.l[size(object.l) - 1]", 7),
    ("object.s + 'x'", 4),
    ("object.s.startsWith('h')", 4),
    ("object.s.matches('h')", 4),
    ("object.s.contains('wor')", 4),
    ("object.subjects.all(s, s.name.startsWith('x'))", 24),
    ("object.subjects.exists(s, s.kind == 'U')", 24),
    ("object.subjects.exists_one(s, s.kind == 'User')", 19),
    ("object.subjects.map(s, s.name)", 45),
    ("object.subjects.filter(s, s.kind == 'User')", 51),
    ("object.subjects.map(s, s.name).exists(n, n.endsWith('y'))", 67),
    ("object.?a.optMap(x, x.b)", 9),
]


@pytest.mark.parametrize(("source", "upstream"), EXACT)
def test_the_bound_is_upstreams_cost_where_nothing_short_circuits(source: str, upstream: int) -> None:
    assert bound(source).cost == upstream


def test_string_walks_cost_a_tenth_of_their_length_rounded_up() -> None:
    assert (walk_cost(0), walk_cost(30), walk_cost(31)) == (0, 3, 4)
    assert bound("object.s.startsWith('a')", {"object": {"s": "x" * 31}}).cost == 2 + 4


def test_a_comprehension_is_charged_by_the_length_of_its_range() -> None:
    small = bound("object.l.all(x, x > 0)", {"object": {"l": [1] * 10}})
    large = bound("object.l.all(x, x > 0)", {"object": {"l": [1] * 1000}})
    # Per iteration: @not_strictly_false(@result) 2, @result && x > 0 is 1 + 2.
    assert (large.cost - small.cost) == 990 * 5
    assert (small.iterations, large.iterations) == (10, 1000)


def test_nested_comprehensions_multiply() -> None:
    source = "object.l.all(x, object.l.exists(y, y == x))"
    assert bound(source, {"object": {"l": list(range(100))}}).iterations == 100 + 100 * 100


def test_an_iteration_variable_is_sized_by_the_longest_element_it_takes() -> None:
    names = [{"name": "a" * 5}, {"name": "b" * 95}]
    per_element = walk_cost(95)  # startsWith walks its target
    result = bound("object.l.all(s, s.name.startsWith('a'))", {"object": {"l": names}})
    # Upstream counts 24: 1 for the short name's walk, 10 for the long one's; the bound 10 for each.
    assert result.cost == 2 + 2 * (2 + 1 + 2 + per_element) + 1 == 24 + 9


def test_iterations_past_the_engines_budget_show() -> None:
    result = bound("object.l.exists(x, x == 0)", {"object": {"l": [1] * 20_000}})
    assert result.iterations == 20_000 and result.bounded


def test_what_cannot_be_sized_is_unbounded() -> None:
    # Iterating a variable the activation lacks, or a string of unknown length.
    absent = checked_tree(checker(("object",)).compile("object.l.all(x, x > 0)"))
    assert not cost_bound(absent, {}).bounded
    assert not bound("'%s'.format([object.s]).startsWith('a')").bounded


def test_an_unmodelled_function_is_unbounded() -> None:
    checked = Checked(expr=Call(1, "mystery", None, ()))
    assert cost_bound(checked, {}).cost == UNBOUNDED


def test_sizes_count_characters_and_traversals_count_utf8_bytes() -> None:
    shape = Observed(("é" * 10,))
    assert shape.size() == 10
    assert traversal("é" * 10) == 2 and traversal(["ab", 1, {"k": "v"}]) == 0 + 1 + 0
    assert Observed(({"a": 1}, {"b": 1})).field("a").size() == 1  # missing in one: an error, size 1


def test_ip_and_cidr_are_sized_in_bytes() -> None:
    # Kubernetes sizes a CIDR by its prefix's bytes (16 for an IPv6 one): upstream counts 6.
    assert bound("cidr('::1/128').containsIP('1.1.1.1')", {"object": None}).cost == 6


def test_a_summary_measures_each_path_once_for_every_expression() -> None:
    summary = SizeSummary.of({"object": {"l": [{"n": "a"}, {"n": "bb"}]}})
    first = summary.variable("object").field("l").items().field("n")
    for source in ("object.l.all(x, x.n != '')", "object.l.exists(x, x.n.startsWith('b'))"):
        cost_bound(checked_tree(checker(("object",)).compile(source)), summary)
    assert summary.variable("object").field("l").items().field("n") is first
    assert first.size() == 2


def test_an_extent_bounds_every_list_string_and_traversal_of_the_activation() -> None:
    from apiserver.cel.cost.sizes import Extent

    activation = {"object": {"subjects": [{"name": "a" * 40}, {"name": "é"}], "l": [1, 2, 3]}}
    extent = Extent.of(activation, 1 << 20)
    assert extent is not None
    # Lists of 3 at most, strings of 40: the size class 64 (at least 40 either way); the JSON's
    # length bounds the traversal.
    assert extent.bucket[0] == 64 and extent.bucket[1] >= 4
    assert extent.longest_list >= 3


def test_an_escaped_quote_makes_the_whole_json_the_longest_string() -> None:
    """A run between two quotes would undercount a string holding one: the JSON's length holds."""
    from apiserver.cel.cost.sizes import Extent

    tricky = {"object": {"s": 'x"' * 40}}
    extent = Extent.of(tricky, 1 << 20)
    assert extent is not None and extent.bucket[0] >= 80


def test_large_or_unserializable_activations_have_no_extent() -> None:
    from apiserver.cel.cost.sizes import Extent

    assert Extent.of({"object": {"s": "x" * 1000}}, 100) is None
    assert Extent.of({"object": {"n": 1 << 70}}, 1 << 20) is None
    assert Extent.of({"object": object()}, 1 << 20) is None


def test_a_small_activation_is_bounded_by_its_size_class_once() -> None:
    """Two activations of one size class share one bound (no walk of the second), and it is at
    least the exact cost of each."""
    from apiserver.cel import compile_expression
    from apiserver.cel.program import Bindings

    program = compile_expression("object.subjects.all(s, s.kind != 'Group')", ["object"])
    first = program.run(Bindings(["object"], {"object": {"subjects": [{"kind": "User"}]}}))
    second = program.run(Bindings(["object"], {"object": {"subjects": [{"kind": "Group"}] * 2}}))
    assert (first.value, second.value) == (True, False)
    assert first.cost == second.cost >= max(first.exact_cost(), second.exact_cost())
