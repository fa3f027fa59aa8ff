"""The checked syntax tree of a compiled expression: what the checker resolved each node to (the
overload of every call, the type of every node), decoded from cel-expr-python's serialized
CheckedExpr. What reads an expression node by node (its cost) starts here."""

from apiserver.cel.checked.decode import checked_tree
from apiserver.cel.checked.tree import (
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
    walk,
)

__all__ = [
    "Call",
    "Checked",
    "Comprehension",
    "Const",
    "CreateList",
    "CreateStruct",
    "Entry",
    "Ident",
    "Node",
    "Reference",
    "Select",
    "TypeRef",
    "checked_tree",
    "walk",
]
