"""The checked tree read back from a compiled expression: nodes, the checker's overloads and types."""

from __future__ import annotations

from apiserver.cel.checked import (
    Call,
    Comprehension,
    Const,
    CreateList,
    CreateStruct,
    Ident,
    Select,
    checked_tree,
)
from apiserver.cel.environment import checker


def test_a_call_names_the_overload_the_checker_chose() -> None:
    checked = checked_tree(checker(("object",)).compile("object.name + 'x'"))
    assert isinstance(checked.expr, Call) and checked.expr.function == "_+_"
    assert checked.overloads(checked.expr) == ("add_string",)
    assert str(checked.type_of(checked.expr)) == "string"
    operand = checked.expr.args[0]
    assert isinstance(operand, Select) and operand.field == "name" and not operand.test_only
    assert operand.operand == Ident(operand.operand.id, "object")


def test_dyn_operands_leave_every_candidate_overload() -> None:
    checked = checked_tree(checker(("object",)).compile("object.a + object.b"))
    assert {"add_int64", "add_string", "add_list"} <= set(checked.overloads(checked.expr))


def test_constants_keep_their_kind() -> None:
    checked = checked_tree(checker(("object",)).compile("[1, 2u, 3.5, 'a', b'b', null, true]"))
    assert isinstance(checked.expr, CreateList)
    kinds = [(e.kind, e.value) for e in checked.expr.elements if isinstance(e, Const)]
    assert kinds == [
        ("int", 1),
        ("uint", 2),
        ("double", 3.5),
        ("string", "a"),
        ("bytes", b"b"),
        ("null", None),
        ("bool", True),
    ]
    assert str(checked.type_of(checked.expr)) == "list(dyn)"


def test_macros_arrive_expanded_as_comprehensions() -> None:
    checked = checked_tree(checker(("object",)).compile("object.items.all(i, i > 0)"))
    loop = checked.expr
    assert isinstance(loop, Comprehension)
    assert loop.iter_var == "i" and loop.accu_var == "@result"
    assert isinstance(loop.iter_range, Select) and loop.iter_range.field == "items"


def test_map_literals_optional_elements_and_has() -> None:
    checked = checked_tree(checker(("object",)).compile("{'a': 1, ?'b': optional.none()}.size() > 0"))
    size = checked.expr.args[0] if isinstance(checked.expr, Call) else None
    assert isinstance(size, Call) and isinstance(size.target, CreateStruct)
    assert [entry.optional for entry in size.target.entries] == [False, True]
    assert str(checked.type_of(size.target)) == "map(string, int)"
    tested = checked_tree(checker(("object",)).compile("has(object.spec)")).expr
    assert isinstance(tested, Select) and tested.test_only
