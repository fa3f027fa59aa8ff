"""coreio's CEL cost evaluator against upstream itself: for every expression of the corpus (the
unit tests' tables and the hand-written ones in tests/support/celcost_corpus.py) over RoleBinding-
and Event-like objects, small and large, the value and the cost equal what cel-go's cost tracker
answers in Kubernetes' admission environment (the oracle, built from Go modules), and so do the
errors, the cost limit's among them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from apiserver.cel.checked import checked_tree
from apiserver.cel.cost import Unsupported, evaluate_with_cost
from apiserver.cel.environment import checker
from apiserver.cel.errors import COST_LIMIT_EXCEEDED, EvaluationError
from tests.support import gobuild
from tests.support.celcost_build import Oracle, ensure_oracle
from tests.support.celcost_corpus import (
    EVENT,
    EXPRESSIONS,
    ROLE_BINDING,
    VARIABLES,
    activation,
    same_value,
    unit_test_expressions,
)

LIMIT = 1_000_000  # celconfig.PerCallLimit
CORPUS = tuple(dict.fromkeys((*unit_test_expressions(), *EXPRESSIONS)))


@pytest.fixture(scope="module")
def oracle() -> Iterator[Oracle]:
    try:
        build = ensure_oracle()
    except gobuild.GoUnavailable as exc:
        pytest.skip(str(exc))
    process = Oracle(build.path)
    try:
        yield process
    finally:
        process.close()


def mine(source: str, variables: dict[str, Any], limit: int = LIMIT) -> dict[str, Any]:
    """This evaluator's answer, shaped as the oracle's (`compile` where cel-expr-python refuses)."""
    try:
        checked = checked_tree(checker(tuple(sorted(variables))).compile(source))
    except RuntimeError as exc:
        return {"compile": str(exc)}
    try:
        value, cost = evaluate_with_cost(checked, variables, limit)
    except EvaluationError as exc:
        return {"error": str(exc)}
    return {"value": value, "cost": cost}


def agree(source: str, variables: dict[str, Any], oracle: Oracle) -> str | None:
    """None when this evaluator answers as upstream; else what differs."""
    theirs = oracle.ask(source, variables)
    if "compile" in theirs:
        return None  # upstream refuses it before evaluating: nothing to compare
    try:
        ours = mine(source, variables)
    except Unsupported:
        return None
    if "compile" in ours:
        return None
    if "error" in theirs or "error" in ours:
        same = ours.get("error") == theirs.get("error")
        return None if same else f"{source}: ours {ours}, upstream {theirs}"
    if ours["cost"] == theirs["cost"] and same_value(ours["value"], theirs):
        return None
    return f"{source}: ours {ours}, upstream {theirs}"


@pytest.mark.parametrize("source", CORPUS)
def test_corpus_matches_upstream(source: str, oracle: Oracle) -> None:
    differences = [agree(source, activation(obj), oracle) for obj in (ROLE_BINDING, EVENT)]
    assert [d for d in differences if d] == []


def test_the_corpus_is_mostly_evaluated_here(oracle: Oracle) -> None:
    """Most of the corpus is compared, not skipped as unsupported or refused by either checker."""
    compared = 0
    for source in CORPUS:
        theirs = oracle.ask(source, activation(ROLE_BINDING))
        try:
            ours = mine(source, activation(ROLE_BINDING))
        except Unsupported:
            continue
        compared += "compile" not in theirs and "compile" not in ours
    assert compared >= 300


def _subjects(count: int) -> dict[str, Any]:
    return {"subjects": [{"kind": "Group" if n % 2 else "User", "name": f"user-{n}"} for n in range(count)]}


LARGE = [
    ("object.subjects.all(s, s.kind != 'Group' || s.name != 'system:masters')", _subjects(1_000)),
    ("object.subjects.all(s, s.kind != 'Group' || s.name != 'system:masters')", _subjects(50_000)),
    ("object.subjects.exists(s, s.name == 'user-999')", _subjects(1_000)),
    ("object.subjects.map(s, s.name).size()", _subjects(20_000)),
    ("object.subjects.filter(s, s.kind == 'Group').size()", _subjects(20_000)),
    ("object.subjects.exists_one(s, s.name.startsWith('user-1234'))", _subjects(20_000)),
    ("object.subjects.map(s, s.name).join(',').size()", _subjects(10_000)),
    ("object.text.split(',').size()", {"text": ",".join(["word"] * 50_000)}),
    ("object.text.lowerAscii().contains('WORD')", {"text": "Word " * 50_000}),
    ("object.text.matches('^(a|b)+$')", {"text": "ab" * 50_000}),
    ("object.text + object.text == object.text", {"text": "a" * 100_000}),
    ("[object.text, object.text].map(t, t + t).all(t, t.size() > 0)", {"text": "a" * 100_000}),
]


@pytest.mark.parametrize(("source", "obj"), LARGE, ids=[f"{s[:40]}-{len(str(o))}" for s, o in LARGE])
def test_large_inputs_match_upstream(source: str, obj: dict[str, Any], oracle: Oracle) -> None:
    assert agree(source, {"object": obj}, oracle) is None


# Each string of 9,950 characters costs 1,000 in `all` (its startsWith 995, the rest 5), and the
# range and result 3 more: 999 strings cost 999,003 upstream, 1,000 go over (cel-go stops at
# 1,000,001). Few and long, because upstream's tracker is quadratic in the number of iterations.
@pytest.mark.parametrize(("count", "over"), [(999, False), (1_000, True)])
def test_the_cost_limit_falls_where_upstream_puts_it(count: int, over: bool, oracle: Oracle) -> None:
    variables = {"object": {"items": ["a" * 9_950] * count}}
    source = "object.items.all(s, !s.startsWith('x'))"
    theirs = oracle.ask(source, variables)
    ours = mine(source, variables)
    assert (theirs.get("error") == COST_LIMIT_EXCEEDED) is over
    assert ours == ({"error": COST_LIMIT_EXCEEDED} if over else {"value": True, "cost": theirs["cost"]})


def test_growing_strings_stop_at_the_limit(oracle: Oracle) -> None:
    """Doubling a string in a loop is stopped by its cost long before it fills memory."""
    source = "object.items.map(i, object.text + 'a' + object.text + 'b').size()"
    variables = {"object": {"items": list(range(5_000)), "text": "x" * 10_000}}
    assert oracle.ask(source, variables).get("error") == COST_LIMIT_EXCEEDED
    assert mine(source, variables) == {"error": COST_LIMIT_EXCEEDED}


def test_a_variable_list_of_the_corpus_names() -> None:
    assert set(activation(ROLE_BINDING)) == set(VARIABLES)


AUTHORIZER_EXPRESSIONS = [
    "authorizer.group('').resource('pods').namespace('ns').name('n').check('get').allowed()",
    "authorizer.group('apps').resource('deployments').subresource('scale').check('update').reason()",
    "authorizer.path('/healthz').check('get').errored()",
    "authorizer.group('').resource('pods').labelSelector('a=b,c=d').check('list').allowed()",
    "authorizer.group('').resource('pods').fieldSelector('spec.nodeName=n').check('list').error()",
    "object.all(n, !authorizer.serviceAccount('ns', n).group('').resource('pods').check('get').allowed())",
]


@pytest.mark.parametrize("subjects", [2, 3])
@pytest.mark.parametrize("source", AUTHORIZER_EXPRESSIONS)
def test_authorization_checks_cost_as_upstreams(source: str, subjects: int, oracle: Oracle) -> None:
    """The authorizer's functions, each check 350,000: the same value, cost and cancellation as
    upstream's with an authorizer that grants nothing."""
    from apiserver.cel.library import authz

    names = [f"account-{n}" for n in range(subjects)]
    theirs = oracle.ask(source, {"authorizer": "alice", "object": names})
    checked = checked_tree(checker(("authorizer", "object")).compile(source))
    variables = {"authorizer": authz.authorizer_for({"username": "alice"}), "object": names}
    with authz.checking(lambda user, attributes: ("NoOpinion", "", "")):
        try:
            value, cost = evaluate_with_cost(checked, variables, LIMIT)
            ours: dict[str, Any] = {"value": value, "cost": cost}
        except EvaluationError as exc:
            ours = {"error": str(exc)}
    expected = (
        {"error": theirs["error"]}
        if "error" in theirs
        else {"value": theirs["value"], "cost": theirs["cost"]}
    )
    assert ours == expected
