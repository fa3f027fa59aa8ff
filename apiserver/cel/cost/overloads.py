"""The overload id cel-go's planner hands the cost tracker for a call, where the cost depends on it.

cel-go passes the overload id only when its checker resolved the call to exactly one overload;
with dynamically typed operands it passes "" and the call costs 1. cel-expr-python's checker names
overloads its own way and keeps other candidates, so the id is worked out here from the operands'
checked types, for the functions whose cost reads it (tracker.py); for the others it is "".
"""

from __future__ import annotations

from collections.abc import Sequence

from apiserver.cel.checked import TypeRef

_FIXED = {
    "startsWith": "starts_with_string",
    "endsWith": "ends_with_string",
    "contains": "contains_string",
    "strings.quote": "strings_quote",
    "format": "string_format",
}
_ORDERINGS = {
    "_<_": "less",
    "_<=_": "less_equals",
    "_>_": "greater",
    "_>=_": "greater_equals",
}


def _sequence_kind(kinds: Sequence[str]) -> str | None:
    """`string` or `bytes` when one operand has that type and the other is that or dyn."""
    for kind in ("string", "bytes"):
        if kind in kinds and all(k in (kind, "dyn") for k in kinds):
            return kind
    return None


def _by_operand(function: str, kinds: Sequence[str]) -> str:
    if function in _ORDERINGS or function == "_+_":
        sequence = _sequence_kind(kinds)
        if sequence is None:
            return ""
        return f"{_ORDERINGS[function]}_{sequence}" if function in _ORDERINGS else f"add_{sequence}"
    if function == "@in" and len(kinds) == 2:
        return {"list": "in_list", "map": "in_map"}.get(kinds[1], "")
    if function == "bytes" and kinds == ["string"]:
        return "string_to_bytes"
    if function == "string" and kinds == ["bytes"]:
        return "bytes_to_string"
    if function in ("containsIP", "containsCIDR") and len(kinds) == 2:
        other = {"string": "string", "net.IP": "ip", "net.CIDR": "cidr"}.get(kinds[1])
        stem = "cidr_contains_ip" if function == "containsIP" else "cidr_contains_cidr"
        return f"{stem}_{other}" if other else ""
    return ""


def go_overload(function: str, member: bool, types: Sequence[TypeRef]) -> str:
    """The overload id upstream plans `function` with, for the functions whose cost reads it."""
    if function in _FIXED:
        return _FIXED[function]
    if function == "matches":
        return "matches_string" if member else "matches"
    if function == "ip":
        return "cidr_ip" if member else "string_to_ip"
    return _by_operand(function, [str(t.kind) for t in types])
