"""cel.expr's CheckedExpr, Expr, Constant, Reference and Type as protobuf messages (the parts a
checked tree is read from; SourceInfo is left out and skipped when parsed). Declared here field
by field, with the numbers of cel-spec's checked.proto and syntax.proto, because no package on
PyPI ships cel.expr's generated Python classes."""

from __future__ import annotations

from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, empty_pb2, message_factory, struct_pb2

_Field = descriptor_pb2.FieldDescriptorProto
_OPTIONAL, _REPEATED = _Field.LABEL_OPTIONAL, _Field.LABEL_REPEATED
_SCALARS = {
    "string": _Field.TYPE_STRING,
    "bool": _Field.TYPE_BOOL,
    "int64": _Field.TYPE_INT64,
    "uint64": _Field.TYPE_UINT64,
    "int32": _Field.TYPE_INT32,
    "double": _Field.TYPE_DOUBLE,
    "bytes": _Field.TYPE_BYTES,
}
_ENUMS = {".cel.expr.Type.PrimitiveType", ".cel.expr.Type.WellKnownType", ".google.protobuf.NullValue"}

# (name, number, type, repeated, oneof) per field; a type starting with "." is a message or enum.
FieldSpec = tuple[str, int, str, bool, str | None]

_EXPR: dict[str, list[FieldSpec]] = {
    "Ident": [("name", 1, "string", False, None)],
    "Select": [
        ("operand", 1, ".cel.expr.Expr", False, None),
        ("field", 2, "string", False, None),
        ("test_only", 3, "bool", False, None),
    ],
    "Call": [
        ("target", 1, ".cel.expr.Expr", False, None),
        ("function", 2, "string", False, None),
        ("args", 3, ".cel.expr.Expr", True, None),
    ],
    "CreateList": [
        ("elements", 1, ".cel.expr.Expr", True, None),
        ("optional_indices", 2, "int32", True, None),
    ],
    "Comprehension": [
        ("iter_var", 1, "string", False, None),
        ("iter_range", 2, ".cel.expr.Expr", False, None),
        ("accu_var", 3, "string", False, None),
        ("accu_init", 4, ".cel.expr.Expr", False, None),
        ("loop_condition", 5, ".cel.expr.Expr", False, None),
        ("loop_step", 6, ".cel.expr.Expr", False, None),
        ("result", 7, ".cel.expr.Expr", False, None),
        ("iter_var2", 8, "string", False, None),
    ],
}
_ENTRY: list[FieldSpec] = [
    ("id", 1, "int64", False, None),
    ("field_key", 2, "string", False, "key_kind"),
    ("map_key", 3, ".cel.expr.Expr", False, "key_kind"),
    ("value", 4, ".cel.expr.Expr", False, None),
    ("optional_entry", 5, "bool", False, None),
]
_EXPR_FIELDS: list[FieldSpec] = [
    ("id", 2, "int64", False, None),
    ("const_expr", 3, ".cel.expr.Constant", False, "expr_kind"),
    ("ident_expr", 4, ".cel.expr.Expr.Ident", False, "expr_kind"),
    ("select_expr", 5, ".cel.expr.Expr.Select", False, "expr_kind"),
    ("call_expr", 6, ".cel.expr.Expr.Call", False, "expr_kind"),
    ("list_expr", 7, ".cel.expr.Expr.CreateList", False, "expr_kind"),
    ("struct_expr", 8, ".cel.expr.Expr.CreateStruct", False, "expr_kind"),
    ("comprehension_expr", 9, ".cel.expr.Expr.Comprehension", False, "expr_kind"),
]
_CONSTANT: list[FieldSpec] = [
    ("null_value", 1, ".google.protobuf.NullValue", False, "constant_kind"),
    ("bool_value", 2, "bool", False, "constant_kind"),
    ("int64_value", 3, "int64", False, "constant_kind"),
    ("uint64_value", 4, "uint64", False, "constant_kind"),
    ("double_value", 5, "double", False, "constant_kind"),
    ("string_value", 6, "string", False, "constant_kind"),
    ("bytes_value", 7, "bytes", False, "constant_kind"),
]
_TYPE: list[FieldSpec] = [
    ("dyn", 1, ".google.protobuf.Empty", False, "type_kind"),
    ("null", 2, ".google.protobuf.NullValue", False, "type_kind"),
    ("primitive", 3, ".cel.expr.Type.PrimitiveType", False, "type_kind"),
    ("wrapper", 4, ".cel.expr.Type.PrimitiveType", False, "type_kind"),
    ("well_known", 5, ".cel.expr.Type.WellKnownType", False, "type_kind"),
    ("list_type", 6, ".cel.expr.Type.ListType", False, "type_kind"),
    ("map_type", 7, ".cel.expr.Type.MapType", False, "type_kind"),
    ("function", 8, ".cel.expr.Type.FunctionType", False, "type_kind"),
    ("message_type", 9, "string", False, "type_kind"),
    ("type_param", 10, "string", False, "type_kind"),
    ("type", 11, ".cel.expr.Type", False, "type_kind"),
    ("error", 12, ".google.protobuf.Empty", False, "type_kind"),
    ("abstract_type", 14, ".cel.expr.Type.AbstractType", False, "type_kind"),
]
_TYPE_NESTED: dict[str, list[FieldSpec]] = {
    "ListType": [("elem_type", 1, ".cel.expr.Type", False, None)],
    "MapType": [
        ("key_type", 1, ".cel.expr.Type", False, None),
        ("value_type", 2, ".cel.expr.Type", False, None),
    ],
    "FunctionType": [
        ("result_type", 1, ".cel.expr.Type", False, None),
        ("arg_types", 2, ".cel.expr.Type", True, None),
    ],
    "AbstractType": [
        ("name", 1, "string", False, None),
        ("parameter_types", 2, ".cel.expr.Type", True, None),
    ],
}
_REFERENCE: list[FieldSpec] = [
    ("name", 1, "string", False, None),
    ("overload_id", 3, "string", True, None),
    ("value", 4, ".cel.expr.Constant", False, None),
]
_PRIMITIVES = ("PRIMITIVE_TYPE_UNSPECIFIED", "BOOL", "INT64", "UINT64", "DOUBLE", "STRING", "BYTES")
_WELL_KNOWN = ("WELL_KNOWN_TYPE_UNSPECIFIED", "ANY", "TIMESTAMP", "DURATION")


def _message(name: str, fields: list[FieldSpec]) -> descriptor_pb2.DescriptorProto:
    message = descriptor_pb2.DescriptorProto(name=name)
    oneofs: list[str] = []
    for field_name, number, kind, repeated, oneof in fields:
        added = message.field.add(name=field_name, number=number, label=_REPEATED if repeated else _OPTIONAL)
        if kind in _SCALARS:
            added.type = _SCALARS[kind]
        else:
            added.type = _Field.TYPE_ENUM if kind in _ENUMS else _Field.TYPE_MESSAGE
            added.type_name = kind
        if oneof is not None:
            if oneof not in oneofs:
                oneofs.append(oneof)
                message.oneof_decl.add(name=oneof)
            added.oneof_index = oneofs.index(oneof)
    return message


def _map_entry(name: str, value_type: str) -> descriptor_pb2.DescriptorProto:
    entry = _message(name, [("key", 1, "int64", False, None), ("value", 2, value_type, False, None)])
    entry.options.map_entry = True
    return entry


def _enum(name: str, values: tuple[str, ...]) -> descriptor_pb2.EnumDescriptorProto:
    described = descriptor_pb2.EnumDescriptorProto(name=name)
    for number, value in enumerate(values):
        described.value.add(name=value, number=number)
    return described


def _file() -> descriptor_pb2.FileDescriptorProto:
    described = descriptor_pb2.FileDescriptorProto(
        name="coreio/cel/expr/checked.proto",
        package="cel.expr",
        syntax="proto3",
        dependency=["google/protobuf/empty.proto", "google/protobuf/struct.proto"],
    )
    expr = _message("Expr", _EXPR_FIELDS)
    expr.nested_type.extend(_message(name, fields) for name, fields in _EXPR.items())
    create_struct = _message(
        "CreateStruct",
        [
            ("message_name", 1, "string", False, None),
            ("entries", 2, ".cel.expr.Expr.CreateStruct.Entry", True, None),
        ],
    )
    create_struct.nested_type.append(_message("Entry", _ENTRY))
    expr.nested_type.append(create_struct)
    type_message = _message("Type", _TYPE)
    type_message.nested_type.extend(_message(name, fields) for name, fields in _TYPE_NESTED.items())
    type_message.enum_type.extend([_enum("PrimitiveType", _PRIMITIVES), _enum("WellKnownType", _WELL_KNOWN)])
    checked = _message(
        "CheckedExpr",
        [
            ("reference_map", 2, ".cel.expr.CheckedExpr.ReferenceMapEntry", True, None),
            ("type_map", 3, ".cel.expr.CheckedExpr.TypeMapEntry", True, None),
            ("expr", 4, ".cel.expr.Expr", False, None),
            ("expr_version", 6, "string", False, None),
        ],
    )
    checked.nested_type.extend(
        [_map_entry("ReferenceMapEntry", ".cel.expr.Reference"), _map_entry("TypeMapEntry", ".cel.expr.Type")]
    )
    described.message_type.extend(
        [expr, _message("Constant", _CONSTANT), type_message, _message("Reference", _REFERENCE), checked]
    )
    return described


def _pool() -> descriptor_pool.DescriptorPool:
    pool = descriptor_pool.DescriptorPool()
    for module in (empty_pb2, struct_pb2):
        dependency = descriptor_pb2.FileDescriptorProto()
        module.DESCRIPTOR.CopyToProto(dependency)
        pool.Add(dependency)
    pool.Add(_file())
    return pool


_POOL = _pool()
CheckedExpr: Any = message_factory.GetMessageClass(_POOL.FindMessageTypeByName("cel.expr.CheckedExpr"))
