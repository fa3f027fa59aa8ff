"""A ValidatingAdmissionPolicy's expressions, compiled once per revision of the configuration."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from apiserver.admission.budget import Budget
from apiserver.cel.errors import CompileError, EvaluationError
from apiserver.machinery.types import JSON

if TYPE_CHECKING:
    from apiserver.cel import Bindings, Costed, Program

# What every expression of a policy may name (upstream's admission CEL environment). Upstream
# declares `authorizer` for validations, variables and matchConditions only; here messages and
# audit annotations may read it too (one environment serves all), which no valid policy notices.
VARIABLES = (
    "object",
    "oldObject",
    "request",
    "params",
    "namespaceObject",
    "variables",
    "authorizer",
    "authorizer.requestResource",
)
FAIL = "Fail"
# The types each kind of expression may evaluate to (upstream's ReturnTypes).
BOOL = ("bool",)
STRING = ("string",)
STRING_OR_NULL = ("string", "null_type")
IGNORE = "Ignore"


class ExpressionError(Exception):
    """An expression that failed to compile or evaluate, in upstream's words; `detail` is the
    evaluator's own message."""

    def __init__(self, message: str, detail: str) -> None:
        super().__init__(message)
        self.detail = detail


@dataclass(frozen=True)
class Expression:
    source: str
    program: Program | None
    compile_error: str = ""

    @classmethod
    def compile(cls, source: str, returns: tuple[str, ...] = ()) -> Expression:
        """`returns`: the types the expression may have (dyn always may), as upstream checks."""
        # The engine loads with the first expression compiled (apiserver/cel/__init__.py).
        from apiserver.cel.program import compile_expression

        try:
            program = compile_expression(source, VARIABLES)
        except CompileError as exc:
            return cls(source, None, f"compilation failed: {exc}")
        found = program.output_type
        if returns and found != "dyn" and found not in returns:
            if len(returns) == 1:
                return cls(source, None, f"must evaluate to {returns[0]} but got {found}")
            return cls(source, None, f"must evaluate to one of [{' '.join(returns)}] but got {found}")
        return cls(source, program)

    def run(self, activation: Mapping[str, Any] | Bindings, budget: Budget | None = None) -> Any:
        """The expression's value; raises ExpressionError with upstream's wording, and OutOfBudget
        when its cost overruns `budget` (charged whether it failed or not, as upstream does)."""
        costed = self.evaluate(activation)
        if budget is not None:
            budget.charge(costed)
        return self.value(costed)

    def evaluate(self, activation: Mapping[str, Any] | Bindings) -> Costed:
        """The evaluation with its cost; ExpressionError when the expression did not compile."""
        if self.program is None:
            raise ExpressionError(f"compilation error: {self.compile_error}", self.compile_error)
        return self.program.run(activation)

    def value(self, costed: Costed) -> Any:
        """`costed`'s value, or its error as ExpressionError."""
        try:
            return costed.result()
        except EvaluationError as exc:
            detail = str(exc)
            raise ExpressionError(f"expression '{self.source}' resulted in error: {detail}", detail) from None

    @property
    def variables_read(self) -> tuple[str, ...]:
        """The composited variables the expression names (`variables.<name>`)."""
        return self.program.variables_read if self.program is not None else ()


@dataclass(frozen=True)
class Validation:
    expression: Expression
    message: str
    message_expression: Expression | None
    reason: str


@dataclass(frozen=True)
class AuditAnnotation:
    key: str
    value: Expression


@dataclass(frozen=True)
class CompiledPolicy:
    name: str
    spec: JSON
    failure_policy: str
    match_conditions: tuple[tuple[str, Expression], ...]
    variables: tuple[tuple[str, Expression], ...]
    validations: tuple[Validation, ...]
    audit_annotations: tuple[AuditAnnotation, ...]

    @property
    def uses_authorizer(self) -> bool:
        """Whether an expression reads `authorizer` (its checks may have to ask the cluster)."""
        expressions = [e for _, e in self.match_conditions] + [e for _, e in self.variables]
        expressions += [v.expression for v in self.validations]
        return any("authorizer" in expression.source for expression in expressions)

    @property
    def param_kind(self) -> JSON | None:
        kind = self.spec.get("paramKind")
        return kind if isinstance(kind, dict) else None


def _validation(item: JSON) -> Validation:
    message_expression = item.get("messageExpression")
    return Validation(
        Expression.compile(str(item.get("expression") or ""), BOOL),
        str(item.get("message") or ""),
        Expression.compile(str(message_expression), STRING) if message_expression else None,
        str(item.get("reason") or ""),
    )


def compile_policy(policy: JSON) -> CompiledPolicy:
    spec = policy.get("spec") or {}
    name = str((policy.get("metadata") or {}).get("name") or "")
    return CompiledPolicy(
        name=name,
        spec=spec,
        failure_policy=str(spec.get("failurePolicy") or FAIL),
        match_conditions=tuple(
            (str(c.get("name") or ""), Expression.compile(str(c.get("expression") or ""), BOOL))
            for c in spec.get("matchConditions") or []
        ),
        variables=tuple(
            (str(v.get("name") or ""), Expression.compile(str(v.get("expression") or "")))
            for v in spec.get("variables") or []
        ),
        validations=tuple(_validation(item) for item in spec.get("validations") or []),
        audit_annotations=tuple(
            AuditAnnotation(
                str(a.get("key") or ""),
                Expression.compile(str(a.get("valueExpression") or ""), STRING_OR_NULL),
            )
            for a in spec.get("auditAnnotations") or []
        ),
    )
