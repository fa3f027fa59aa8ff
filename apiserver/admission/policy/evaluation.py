"""One policy's decisions for one request and one param: upstream's validator (matchConditions,
variables, validations with their messages, audit annotations), failurePolicy applied to errors."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from apiserver.admission.budget import RUNTIME_BUDGET, Budget, OutOfBudget
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
from apiserver.machinery.errors import aggregate_message

if TYPE_CHECKING:
    from apiserver.cel import Costed

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
    """The policy's expressions over one activation, its variables composited in order.

    Costs are upstream's: matchConditions spend from a budget of their own; validations, the
    variables they read (charged to the first expression that names them) and then the
    messageExpressions spend from another; audit annotations from a third."""

    def __init__(self, policy: CompiledPolicy, activation: Mapping[str, Any]) -> None:
        from apiserver.cel.program import Bindings  # loaded with the first expression compiled

        self.policy = policy
        self.failed_variables: dict[str, str] = {}
        self._variable_costs: dict[str, Costed] = {}
        self._charged: set[str] = set()
        self._definitions = dict(policy.variables)
        variables: dict[str, Any] = {}
        # Each variable sees those before it; the rest of the policy sees them all.
        for name, expression in policy.variables:
            self.bindings = Bindings(VARIABLES, {**activation, "variables": dict(variables)})
            try:
                costed = expression.evaluate(self.bindings)
                self._variable_costs[name] = costed
                variables[name] = expression.value(costed)
            except ExpressionError as exc:
                self.failed_variables[name] = exc.detail
        self.bindings = Bindings(VARIABLES, {**activation, "variables": variables})

    def run(self, expression: Expression, budget: Budget) -> Any:
        """As Expression.run; an expression that reads a variable which failed fails as upstream's
        lazily composited variable makes it fail."""
        self._charge_variables(expression, budget)
        try:
            return expression.run(self.bindings, budget)
        except ExpressionError as exc:
            missing = _NO_SUCH_KEY.search(exc.detail)
            if missing and missing.group(1) in self.failed_variables:
                name = missing.group(1)
                detail = f'composited variable "{name}" fails to evaluate: {self.failed_variables[name]}'
                message = f"expression '{expression.source}' resulted in error: {detail}"
                raise ExpressionError(message, detail) from None
            raise

    def _charge_variables(self, expression: Expression, budget: Budget) -> None:
        """What the variables `expression` names cost, the first time one is named."""
        for name in expression.variables_read:
            if name in self._charged or name not in self._definitions:
                continue
            self._charged.add(name)
            self._charge_variables(self._definitions[name], budget)
            if name in self._variable_costs:
                budget.charge(self._variable_costs[name])

    def error_decision(self, message: str) -> Decision:
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
            return self.error_decision(aggregate_message(failures))
        return None

    def outcome(self, validation: Validation, budget: Budget) -> Any:
        """The validation's value, or its ExpressionError; OutOfBudget raised."""
        try:
            return self.run(validation.expression, budget)
        except ExpressionError as exc:
            return exc

    def messages(self, budget: Budget) -> tuple[list[Any], str]:
        """Every validation's messageExpression value (None without one or when it failed), as
        upstream evaluates them all; and the error that stopped them (running out of budget)."""
        values: list[Any] = []
        for validation in self.policy.validations:
            if validation.message_expression is None:
                values.append(None)
                continue
            try:
                values.append(self.run(validation.message_expression, budget))
            except ExpressionError:
                values.append(None)
            except OutOfBudget as exc:
                return values, str(exc)
        return values, ""

    def decide(self, validation: Validation, outcome: Any, message: Any, message_error: str) -> Decision:
        if isinstance(outcome, ExpressionError):
            return self.error_decision(str(outcome))
        if message_error:
            return self.error_decision(f"failed messageExpression: {message_error}")
        if outcome is True:
            return Decision(ADMIT)
        return Decision(DENY, _message(validation, message), validation.reason or REASON_INVALID)

    def annotate(self, annotation: AuditAnnotation, budget: Budget) -> Annotation | None:
        """The annotation to publish, an error, or None (left out); OutOfBudget raised."""
        try:
            value = self.run(annotation.value, budget)
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


def _message(validation: Validation, value: Any) -> str:
    """messageExpression's string if usable, else message, else the expression named."""
    message = ""
    if isinstance(value, str):
        message = value.strip()
        if len(message.encode()) > MAX_MESSAGE_BYTES or "\n" in message:
            message = ""
    if not message and validation.message:
        message = validation.message.strip()
    return message or f"failed expression: {validation.expression.source.strip()}"


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
    budget = Budget(RUNTIME_BUDGET)
    try:
        outcomes = [evaluation.outcome(validation, budget) for validation in policy.validations]
    except OutOfBudget as exc:
        return Result([evaluation.error_decision(str(exc))])
    messages, message_error = evaluation.messages(budget)
    messages += [None] * (len(outcomes) - len(messages))
    decisions = [
        evaluation.decide(validation, outcome, message, message_error)
        for validation, outcome, message in zip(policy.validations, outcomes, messages, strict=True)
    ]
    annotations: list[Annotation] = []
    annotation_budget = Budget(RUNTIME_BUDGET)
    try:
        for annotation in policy.audit_annotations:
            outcome = evaluation.annotate(annotation, annotation_budget)
            if outcome is not None:
                annotations.append(outcome)
    except OutOfBudget as exc:
        return Result([evaluation.error_decision(str(exc))])
    return Result(decisions, annotations)
