"""Compiling an expression once, evaluating it many times."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from apiserver.cel.bounds import check_mapped_lists, maps_lists
from apiserver.cel.environment import environment
from apiserver.cel.errors import CompileError, EvaluationError, compile_message, evaluation_message
from apiserver.cel.values import plain


class Bindings:
    """Values bound to the variables once, to evaluate several programs over: each variable is
    converted for the engine when first read, once, where evaluating over a plain mapping converts
    all of it for every program (measured: 3 µs instead of 420 µs an evaluation over a RoleBinding
    of 1,000 subjects). The values must not change once bound, and the programs run in the thread
    that bound them (the engine keeps what it converted in that thread's arena)."""

    __slots__ = ("data", "native")

    def __init__(self, variables: Sequence[str], data: Mapping[str, Any]) -> None:
        self.data = data
        self.native = environment(tuple(variables)).Activation(dict(data))


class Program:
    """One compiled expression; reusable, and safe to evaluate from any number of requests."""

    __slots__ = ("_compiled", "_maps_lists", "source")

    def __init__(self, source: str, compiled: Any) -> None:
        self.source = source
        self._compiled = compiled
        self._maps_lists = maps_lists(source)

    def evaluate(self, activation: Mapping[str, Any] | Bindings) -> Any:
        """The expression's value over `activation` (JSON-like values by variable name; None for an
        absent object; or Bindings of the same variables), as plain Python values."""
        data = activation.data if isinstance(activation, Bindings) else activation
        if self._maps_lists:
            check_mapped_lists(data)
        try:
            if isinstance(activation, Bindings):
                value = self._compiled.eval(activation.native)
            else:
                value = self._compiled.eval(data=activation)
        except (RuntimeError, TypeError, ValueError) as exc:
            raise EvaluationError(evaluation_message(str(exc))) from None
        if value.type().name() == "ERROR":
            raise EvaluationError(evaluation_message(str(value.plain_value())))
        return plain(value.plain_value())

    @property
    def output_type(self) -> str:
        """The type the checker gives the expression, named as cel-go names it (`bool`, `dyn`,
        `list(int)`, `null_type`)."""
        return go_type_name(self._compiled.return_type().name())

    def __repr__(self) -> str:
        return f"Program({self.source!r})"


_GO_NAMES = {
    "NULL": "null_type",
    "DURATION": "google.protobuf.Duration",
    "TIMESTAMP": "google.protobuf.Timestamp",
}


def go_type_name(name: str) -> str:
    """cel-expr-python's type name (`LIST<INT>`, `MAP<STRING, DYN>`) as cel-go's (`list(int)`)."""
    if name in _GO_NAMES:
        return _GO_NAMES[name]
    for kind in ("LIST", "MAP"):
        if name.startswith(f"{kind}<") and name.endswith(">"):
            inner = name[len(kind) + 1 : -1]
            parts = _split_params(inner)
            return f"{kind.lower()}({', '.join(go_type_name(part) for part in parts)})"
    return name.lower() if name.isupper() else name


def _split_params(text: str) -> list[str]:
    """`STRING, MAP<STRING, INT>` as its two top-level parameters."""
    parts, depth, start = [], 0, 0
    for index, char in enumerate(text):
        depth += {"<": 1, ">": -1}.get(char, 0)
        if char == "," and depth == 0:
            parts.append(text[start:index].strip())
            start = index + 1
    parts.append(text[start:].strip())
    return parts


def compile_expression(source: str, variables: Sequence[str]) -> Program:
    """`source` compiled and type-checked over `variables` (each of them dynamically typed)."""
    try:
        compiled = environment(tuple(variables)).compile(source)
    except RuntimeError as exc:
        raise CompileError(compile_message(str(exc))) from None
    return Program(source, compiled)
