"""A compiled expression's checked tree, from what cel-expr-python serializes (a CheckedExpr in an
Any)."""

from __future__ import annotations

from typing import Any

from google.protobuf import any_pb2

from apiserver.cel.checked.schema import CheckedExpr
from apiserver.cel.checked.tree import (
    DYN,
    Call,
    Checked,
    Comprehension,
    Const,
    CreateList,
    CreateStruct,
    Entry,
    Ident,
    Node,
    Reference,
    Select,
    TypeRef,
)

_CONSTANT_KINDS = {
    "null_value": "null",
    "bool_value": "bool",
    "int64_value": "int",
    "uint64_value": "uint",
    "double_value": "double",
    "string_value": "string",
    "bytes_value": "bytes",
}
_PRIMITIVES = {1: "bool", 2: "int", 3: "uint", 4: "double", 5: "string", 6: "bytes"}
_WELL_KNOWN = {1: "any", 2: "google.protobuf.Timestamp", 3: "google.protobuf.Duration"}


def checked_tree(expression: Any) -> Checked:
    """The checked tree of `expression` (a cel-expr-python Expression)."""
    envelope = any_pb2.Any()
    envelope.ParseFromString(expression.serialize())
    checked = CheckedExpr()
    checked.ParseFromString(envelope.value)
    return Checked(
        expr=_node(checked.expr),
        references={key: _reference(value) for key, value in checked.reference_map.items()},
        types={key: _type(value) for key, value in checked.type_map.items()},
    )


def _constant(node_id: int, constant: Any) -> Const:
    case = constant.WhichOneof("constant_kind")
    if case is None or case == "null_value":
        return Const(node_id, "null", None)
    if case not in _CONSTANT_KINDS:
        raise ValueError(f"unsupported constant {case}")
    return Const(node_id, _CONSTANT_KINDS[case], getattr(constant, case))


def _node(expr: Any) -> Node:
    case = expr.WhichOneof("expr_kind")
    node_id = expr.id
    if case == "const_expr":
        return _constant(node_id, expr.const_expr)
    if case == "ident_expr":
        return Ident(node_id, expr.ident_expr.name)
    if case == "select_expr":
        select = expr.select_expr
        return Select(node_id, _node(select.operand), select.field, select.test_only)
    if case == "call_expr":
        call = expr.call_expr
        target = _node(call.target) if call.HasField("target") else None
        return Call(node_id, call.function, target, tuple(_node(arg) for arg in call.args))
    if case == "list_expr":
        created = expr.list_expr
        return CreateList(node_id, tuple(_node(e) for e in created.elements), tuple(created.optional_indices))
    if case == "struct_expr":
        return _struct(node_id, expr.struct_expr)
    if case == "comprehension_expr":
        return _comprehension(node_id, expr.comprehension_expr)
    raise ValueError(f"expression {node_id} has no kind")


def _struct(node_id: int, created: Any) -> CreateStruct:
    entries = []
    for entry in created.entries:
        key: Node | str = (
            entry.field_key if entry.WhichOneof("key_kind") == "field_key" else _node(entry.map_key)
        )
        entries.append(Entry(entry.id, key, _node(entry.value), entry.optional_entry))
    return CreateStruct(node_id, created.message_name, tuple(entries))


def _comprehension(node_id: int, loop: Any) -> Comprehension:
    return Comprehension(
        id=node_id,
        iter_var=loop.iter_var,
        iter_range=_node(loop.iter_range),
        accu_var=loop.accu_var,
        accu_init=_node(loop.accu_init),
        loop_condition=_node(loop.loop_condition),
        loop_step=_node(loop.loop_step),
        result=_node(loop.result),
        iter_var2=loop.iter_var2,
    )


def _reference(reference: Any) -> Reference:
    value = _constant(0, reference.value) if reference.HasField("value") else None
    return Reference(reference.name, tuple(reference.overload_id), value)


def _type(described: Any) -> TypeRef:
    case = described.WhichOneof("type_kind")
    simple = {"dyn": DYN, "null": TypeRef("null_type"), "error": TypeRef("*error*")}
    if case is None or case in simple:
        return simple.get(case or "dyn", DYN)
    if case == "primitive":
        return TypeRef(_PRIMITIVES.get(described.primitive, "dyn"))
    if case == "wrapper":
        return TypeRef("wrapper", (TypeRef(_PRIMITIVES.get(described.wrapper, "dyn")),))
    if case == "well_known":
        return TypeRef(_WELL_KNOWN.get(described.well_known, "dyn"))
    if case == "list_type":
        return TypeRef("list", (_type(described.list_type.elem_type),))
    if case == "map_type":
        return TypeRef("map", (_type(described.map_type.key_type), _type(described.map_type.value_type)))
    if case == "type":
        return TypeRef("type", (_type(described.type),))
    if case == "abstract_type":
        abstract = described.abstract_type
        return TypeRef(abstract.name, tuple(_type(param) for param in abstract.parameter_types))
    if case == "function":
        function = described.function
        return TypeRef("function", (_type(function.result_type), *(_type(arg) for arg in function.arg_types)))
    return TypeRef(str(getattr(described, case)))
