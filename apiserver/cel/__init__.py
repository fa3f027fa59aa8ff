"""CEL for admission: ValidatingAdmissionPolicy expressions and webhook matchConditions.

Expressions are compiled once (`compile_expression`, over dynamically typed variables) and the
`Program` evaluated per request over plain JSON-like values. The environment is Kubernetes' base
environment as cel-expr-python (Google's C++ CEL) can hold it: the strings and optional extensions
and Kubernetes' libraries. Failures are `CompileError` and `EvaluationError`, worded as cel-go's.
"""

from apiserver.cel.errors import CompileError, EvaluationError
from apiserver.cel.program import Bindings, Costed, Program, compile_expression

__all__ = ["Bindings", "CompileError", "Costed", "EvaluationError", "Program", "compile_expression"]
