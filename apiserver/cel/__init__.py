"""CEL for admission: ValidatingAdmissionPolicy expressions and webhook matchConditions.

Expressions are compiled once (`compile_expression`, over dynamically typed variables) and the
`Program` evaluated per request over plain JSON-like values. The environment is Kubernetes' base
environment as cel-expr-python (Google's C++ CEL) can hold it: the strings and optional extensions
and Kubernetes' libraries. Failures are `CompileError` and `EvaluationError`, worded as cel-go's.

The engine, its libraries and the cost model load on first use (about 50 ms of a server's start,
which a cluster without policies or matchConditions never needs): the names below are looked up
on demand, and the admission modules import them where they first run.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from apiserver.cel.errors import CompileError, EvaluationError
    from apiserver.cel.program import Bindings, Costed, Program, compile_expression

__all__ = ["Bindings", "CompileError", "Costed", "EvaluationError", "Program", "compile_expression"]

_MODULES = {
    "CompileError": "apiserver.cel.errors",
    "EvaluationError": "apiserver.cel.errors",
    "Bindings": "apiserver.cel.program",
    "Costed": "apiserver.cel.program",
    "Program": "apiserver.cel.program",
    "compile_expression": "apiserver.cel.program",
}


def __getattr__(name: str) -> Any:
    module = _MODULES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
