"""The rest of Kubernetes 1.33's CEL environment: the sets extension, the two-variable
comprehensions, the lists library's indexOf and lastIndexOf, and the format library. Each value was
answered alike by cel-go in Kubernetes' admission environment (tests/integration/test_cel_cost.py
asks it the same expressions)."""

from __future__ import annotations

from typing import Any

import pytest

from apiserver.cel import CompileError, EvaluationError, compile_expression
from apiserver.cel.checked.rewrite import Replacement, rewrite
from apiserver.cel.environment import checker
from apiserver.cel.library import formats

OBJECT = {
    "metadata": {"name": "Readers", "labels": {"team": "a", "tier": "gold"}},
    "subjects": [{"kind": "User", "name": "alice"}, {"kind": "Group", "name": "devs"}],
}

DNS_LABEL = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start "
    "and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)


def evaluate(source: str) -> Any:
    return compile_expression(source, ["object"]).evaluate({"object": OBJECT})


VALUES = [
    # sets
    ("sets.contains([1, 2, 3], [2])", True),
    ("sets.contains([1], [1, 2])", False),
    ("sets.equivalent([1, 2], [2, 1, 1])", True),
    ("sets.equivalent([1, 2.0, 3u], [1.0, 2u, 3])", True),
    ("sets.intersects(object.subjects.map(s, s.kind), ['Group'])", True),
    ("sets.intersects([1], [2])", False),
    # two-variable comprehensions
    ("[1, 2].all(i, v, v > i)", True),
    ("object.subjects.exists(i, s, i == 1 && s.kind == 'Group')", True),
    ("object.subjects.existsOne(i, s, s.kind == 'Group')", True),
    ("object.metadata.labels.all(k, v, k.size() >= v.size())", True),
    ("object.subjects.transformList(i, s, s.name)", ["alice", "devs"]),
    ("object.subjects.transformList(i, s, i > 0, s.name + '!')", ["devs!"]),
    ("object.subjects.transformMap(i, s, s.kind)", {0: "User", 1: "Group"}),
    ("object.metadata.labels.transformMap(k, v, v + k)", {"team": "ateam", "tier": "goldtier"}),
    ("object.metadata.labels.transformMap(k, v, k != 'team', v)", {"tier": "gold"}),
    ("object.metadata.labels.transformMapEntry(k, v, {v: k})", {"a": "team", "gold": "tier"}),
    # lists: indexOf and lastIndexOf over lists, beside the strings extension's over strings
    ("[1, 2, 3].indexOf(2)", 1),
    ("['a', 'b', 'a'].lastIndexOf('a')", 2),
    ("['a'].indexOf('z')", -1),
    ("object.subjects.map(s, s.name).indexOf('devs')", 1),
    ("object.subjects.lastIndexOf(object.subjects[0])", 0),
    ("object.metadata.name.indexOf('e')", 1),
    # formats
    ("format.dns1123Label().validate('readers').hasValue()", False),
    ("format.dns1123Label().validate(object.metadata.name).value()", [DNS_LABEL]),
    ("format.dns1123Label().validate('a.b').value()", ["must not contain dots"]),
    ("format.dns1035Label().validate('1abc').hasValue()", True),
    ("format.dns1123SubdomainPrefix().validate('abc-').hasValue()", False),
    ("format.qualifiedName().validate('example.com/Name').hasValue()", False),
    ("format.labelValue().validate(object.metadata.name + '/').hasValue()", True),
    ("format.named('uri').value().validate('foo').value()", ['parse "foo": invalid URI for request']),
    ("format.named('nope').hasValue()", False),
    ("format.uuid().validate('x').value()", ["does not match the UUID format"]),
    ("format.uuid().validate('0F8FAD5B-D9CB-469F-A165-70867728950E').hasValue()", False),
    ("format.byte().validate('YWJj').hasValue()", False),
    ("format.byte().validate('YWJ').value()", ["invalid base64"]),
    ("format.date().validate('2024-02-29').hasValue()", False),
    ("format.date().validate('2023-02-29').value()", ["invalid date"]),
    ("format.datetime().validate('2024-02-03T10:00:00Z').hasValue()", False),
    ("format.datetime().validate('2024-02-03T25:00:00Z').value()", ["invalid datetime"]),
    ("format.dns1123Label() == format.dns1123Label()", True),
    ("type(format.uuid()) == kubernetes.NamedFormat", True),
    ("format.labelValue().validate(object.metadata.name).orValue([]).size()", 0),
]


@pytest.mark.parametrize(("source", "expected"), VALUES)
def test_values(source: str, expected: Any) -> None:
    assert evaluate(source) == expected


def test_a_map_built_twice_at_one_key_is_an_error() -> None:
    with pytest.raises(EvaluationError, match="insert failed: key a already exists"):
        evaluate("{'x': 'a', 'y': 'a'}.transformMapEntry(k, v, {v: k})")


@pytest.mark.parametrize(
    "source",
    ["'a'.validate('b')", "format.named(1)", "sets.contains([1], 1)"],
)
def test_wrong_arguments_are_refused_by_the_checker(source: str) -> None:
    with pytest.raises(CompileError, match="found no matching overload"):
        compile_expression(source, ["object"])


def test_every_format_upstream_names_is_known() -> None:
    assert sorted(formats.FORMATS) == sorted(
        [
            "dns1123Label",
            "dns1123Subdomain",
            "dns1035Label",
            "qualifiedName",
            "dns1123LabelPrefix",
            "dns1123SubdomainPrefix",
            "dns1035LabelPrefix",
            "labelValue",
            "uri",
            "uuid",
            "byte",
            "date",
            "datetime",
        ]
    )


def test_a_tree_without_the_rewritten_overloads_is_left_as_it_is() -> None:
    serialized = checker(("object",)).compile("object.metadata.name == 'x'").serialize()
    assert rewrite(serialized, {"format-validate": Replacement("f", "f_id")}) is serialized


def test_nested_optional_calls_are_all_rewritten() -> None:
    """format.named(...).value().validate(...): the inner call is rewritten before the outer copies
    it, so the engine finds no call it cannot run."""
    assert evaluate("format.named('dns1123Label').value().validate('A').value().size()") == 1
