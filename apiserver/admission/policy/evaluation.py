"""One policy's decisions for one request and one param: upstream's validator (matchConditions,
variables, validations with their messages, audit annotations), failurePolicy applied to errors."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from apiserver.admission.conditions import conditions_hold
from apiserver.admission.policy.compiled import (
    FAIL,
    VARIABLES,
    AuditAnnotation,
    CompiledPolicy,
    Expression,
    ExpressionError,
    Validation,
)
from apiserver.cel import Bindings
from apiserver.machinery.errors import aggregate_message

ADMIT = "Admit"
DENY = "Deny"
REASON_INVALID = "Invalid"
# Upstream's bound on a message from messageExpression (celconfig.MaxEvaluatedMessageExpressionSizeBytes).
MAX_MESSAGE_BYTES = 5 * 1024
_NO_SUCH_KEY = re.compile(r"no such key: (\S+)")


@dataclass(frozen=True)
class Decision:
    action: str
    message: str = ""
    reason: str = ""
    error: bool = False


@dataclass(frozen=True)
class Annotation:
    """An audit annotation's outcome: published (value), left out (neither), or an error."""

    key: str
    value: str = ""
    error: str = ""


@dataclass
class Result:
    decisions: list[Decision] = field(default_factory=list)
    annotations: list[Annotation] = field(default_factory=list)


class Evaluation:
    """The policy's expressions over one activation, its variables composited in order."""

    def __init__(self, policy: CompiledPolicy, activation: Mapping[str, Any]) -> None:
        self.policy = policy
        self.failed_variables: dict[str, str] = {}
        variables: dict[str, Any] = {}
        # Each variable sees those before it; the rest of the policy sees them all.
        for name, expression in policy.variables:
            self.bindings = Bindings(VARIABLES, {**activation, "variables": dict(variables)})
            try:
                variables[name] = self.run(expression)
            except ExpressionError as exc:
                self.failed_variables[name] = exc.detail
        self.bindings = Bindings(VARIABLES, {**activation, "variables": variables})

    def run(self, expression: Expression) -> Any:
        """As Expression.run; an expression that reads a variable which failed fails as upstream's
        lazily composited variable makes it fail."""
        try:
            return expression.run(self.bindings)
        except ExpressionError as exc:
            missing = _NO_SUCH_KEY.search(exc.detail)
            if missing and missing.group(1) in self.failed_variables:
                name = missing.group(1)
                detail = f'composited variable "{name}" fails to evaluate: {self.failed_variables[name]}'
                message = f"expression '{expression.source}' resulted in error: {detail}"
                raise ExpressionError(message, detail) from None
            raise

    def _error_decision(self, message: str) -> Decision:
        if self.policy.failure_policy == FAIL:
            return Decision(DENY, message, error=True)
        return Decision(ADMIT, error=True)

    def matches(self) -> Decision | None:
        """None when every matchCondition holds; an admit decision (not applicable) when one is
        false; an error decision (per failurePolicy) when some failed and none was false."""
        holds, failures = conditions_hold(self.policy.match_conditions, self.run)
        if not holds:
            return Decision(ADMIT)
        if failures:
            return self._error_decision(aggregate_message(failures))
        return None

    def validate(self, validation: Validation) -> Decision:
        try:
            value = self.run(validation.expression)
        except ExpressionError as exc:
            return self._error_decision(str(exc))
        if value is True:
            return Decision(ADMIT)
        return Decision(DENY, self._message(validation), validation.reason or REASON_INVALID)

    def _message(self, validation: Validation) -> str:
        """messageExpression's string if usable, else message, else the expression named."""
        message = ""
        if validation.message_expression is not None:
            try:
                value = self.run(validation.message_expression)
            except ExpressionError:
                value = None
            if isinstance(value, str):
                message = value.strip()
                if len(message.encode()) > MAX_MESSAGE_BYTES or "\n" in message:
                    message = ""
        if not message and validation.message:
            message = validation.message.strip()
        return message or f"failed expression: {validation.expression.source.strip()}"

    def annotate(self, annotation: AuditAnnotation) -> Annotation | None:
        """The annotation to publish, an error, or None (left out)."""
        try:
            value = self.run(annotation.value)
        except ExpressionError as exc:
            return Annotation(annotation.key, error=str(exc)) if self.policy.failure_policy == FAIL else None
        if value is None:
            return None
        if isinstance(value, str):
            value = value.strip()
            return Annotation(annotation.key, value) if value else None
        unsupported = (
            f"valueExpression '{annotation.value.source}' resulted in unsupported return type: "
            f"{_cel_type(value)}. Return type must be either string or null."
        )
        return Annotation(annotation.key, error=unsupported)


def _cel_type(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "double"
    if isinstance(value, bytes):
        return "bytes"
    if isinstance(value, list):
        return "list"
    if isinstance(value, dict):
        return "map"
    return type(value).__name__


def evaluate(policy: CompiledPolicy, activation: Mapping[str, Any]) -> Result:
    """The policy's decisions (one per validation) and audit annotations for one activation."""
    evaluation = Evaluation(policy, activation)
    matched = evaluation.matches()
    if matched is not None:
        return Result([matched] if matched.action == DENY else [])
    result = Result([evaluation.validate(validation) for validation in policy.validations])
    for annotation in policy.audit_annotations:
        outcome = evaluation.annotate(annotation)
        if outcome is not None:
            result.annotations.append(outcome)
    return result
