"""The CEL layer's interface: compile once, evaluate many times, plain values out, cel-go's words."""

from __future__ import annotations

from typing import Any

import pytest

from apiserver.cel import Bindings, CompileError, EvaluationError, Program, compile_expression

VARIABLES = ("object", "oldObject", "request", "params", "namespaceObject", "variables")
BINDING: dict[str, Any] = {
    "kind": "RB",
    "metadata": {"name": "readers", "namespace": "team", "labels": {"tier": "gold"}},
    "roleRef": {"apiGroup": "rbac.authorization.core.io", "kind": "ClusterRole", "name": "view"},
    "subjects": [{"kind": "User", "name": "alice"}, {"kind": "Group", "name": "devs"}],
}


def evaluate(source: str, **activation: Any) -> Any:
    values = {"object": BINDING, "oldObject": None, "params": None, **activation}
    return compile_expression(source, VARIABLES).evaluate(values)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("object.metadata.name", "readers"),
        ("object.subjects.size()", 2),
        ("object.subjects.map(s, s.name)", ["alice", "devs"]),
        ("object.subjects.filter(s, s.kind == 'Group')", [{"kind": "Group", "name": "devs"}]),
        ("object.roleRef", BINDING["roleRef"]),
        ("oldObject == null", True),
        ("has(object.metadata.annotations)", False),
        ("object.?metadata.annotations.orValue({})", {}),
        ("1.5 * 2.0", 3.0),
        ("b'ab'", b"ab"),
        ("null", None),
        ("object.metadata.labels.tier.upperAscii()", "GOLD"),
        ("'a,b'.split(',')", ["a", "b"]),
        ("['a', 'b'].join('-')", "a-b"),
        ("strings.quote('x\"y')", '"x\\"y"'),
        ("'%s has %d'.format(['x', 2])", "x has 2"),
        ("dyn(1) < 1.5", True),
        ("object.subjects.exists_one(s, s.kind == 'User')", True),
        # Errors are absorbed by the logical operators, as CEL's commutative && and || do.
        ("object.spec.x == 1 || true", True),
        ("false && object.spec.x == 1", False),
    ],
)
def test_values(source: str, expected: Any) -> None:
    assert evaluate(source) == expected


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("object.spec", "no such key: spec"),
        ("object.metadata['uid']", "no such key: uid"),
        ("1 / (size(object.subjects) - 2)", "division by zero"),
        ("1 % (size(object.subjects) - 2)", "modulus by zero"),
        ("9223372036854775807 + size(object.subjects)", "integer overflow"),
        ("object.subjects[5]", "index out of bounds: 5"),
        ("object.metadata.name + 1", "no such overload"),
        ("int('ten')", "type conversion error from 'string' to 'int'"),
        ("int(1e300)", "integer overflow"),
        ("uint(-1)", "unsigned integer overflow"),
        ("string(b'\\xff')", "invalid UTF-8 in bytes, cannot convert to string"),
        ("timestamp('yesterday')", "type conversion error from 'string' to 'google.protobuf.Timestamp'"),
        (
            "object.metadata.name.matches(object.kind + '[')",
            "error parsing regexp: missing closing ]: `[`",
        ),
        (
            "object.kind.matches('(' + object.kind)",
            "error parsing regexp: missing closing ): `(RB`",
        ),
        (
            "object.kind.matches(object.kind + '**')",
            "error parsing regexp: invalid nested repetition operator: `**`",
        ),
    ],
)
def test_evaluation_errors_are_worded_as_cel_go(source: str, message: str) -> None:
    with pytest.raises(EvaluationError) as failure:
        evaluate(source)
    assert str(failure.value) == message


def test_a_variable_missing_from_the_activation() -> None:
    program = compile_expression("params.x", ["params"])
    with pytest.raises(EvaluationError, match=r"^no such attribute\(s\): params$"):
        program.evaluate({})


@pytest.mark.parametrize(
    ("source", "message"),
    [
        (
            "1 + 'a'",
            "ERROR: <input>:1:3: found no matching overload for '_+_' applied to '(int, string)'\n"
            " | 1 + 'a'\n | ..^",
        ),
        ("object.", "ERROR: <input>:1:8: Syntax error"),
        # cel-go names `nobody` at 1:1; the C++ checker names the whole select.
        ("nobody.name", "ERROR: <input>:1:7: undeclared reference to 'nobody.name' (in container '')"),
    ],
)
def test_compile_errors_read_as_the_checker_reports_them(source: str, message: str) -> None:
    with pytest.raises(CompileError) as failure:
        compile_expression(source, VARIABLES)
    assert str(failure.value).startswith(message)
    assert "INVALID_ARGUMENT" not in str(failure.value)


def test_a_program_is_compiled_once_and_evaluated_many_times() -> None:
    program = compile_expression("object.n * 2", ["object"])
    assert isinstance(program, Program)
    assert program.source == "object.n * 2"
    assert [program.evaluate({"object": {"n": n}}) for n in range(5)] == [0, 2, 4, 6, 8]
    with pytest.raises(EvaluationError):
        program.evaluate({"object": {}})
    assert program.evaluate({"object": {"n": 21}}) == 42


def test_the_same_variables_share_one_environment_and_others_get_theirs() -> None:
    assert compile_expression("a + b", ["a", "b"]).evaluate({"a": 1, "b": 2}) == 3
    with pytest.raises(CompileError, match="undeclared reference to 'b'"):
        compile_expression("a + b", ["a"])


def test_bindings_serve_several_programs_as_a_mapping_would() -> None:
    data = {"object": {"subjects": [{"name": f"u{i}"} for i in range(3)]}, "params": None}
    bindings = Bindings(("object", "params"), data)
    programs = [
        compile_expression(source, ("object", "params"))
        for source in ("object.subjects.map(s, s.name)", "params == null", "object.subjects.size()")
    ]
    assert [p.evaluate(bindings) for p in programs] == [p.evaluate(data) for p in programs]
    assert programs[0].evaluate(bindings) == ["u0", "u1", "u2"]
