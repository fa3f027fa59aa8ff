"""The ValidatingAdmissionPolicy plugin: each policy that matches the request, each of its bindings
that matches, each param the binding names; the decisions acted on as the binding says (Deny, Warn,
Audit), with upstream's words and codes."""

from __future__ import annotations

import functools
from collections.abc import Sequence

from apiserver.admission import matching
from apiserver.admission.authorization import checked
from apiserver.admission.objects import AdmissionSource
from apiserver.admission.policy.compiled import FAIL, CompiledPolicy, compile_policy
from apiserver.admission.policy.evaluation import DENY, REASON_INVALID, Decision, Result, evaluate
from apiserver.admission.readiness import forbidden, wait_ready
from apiserver.admission.request import AdmissionRequest, cel_activation
from apiserver.auth.authz import Authorizer
from apiserver.machinery import errors, offload, requestnotes
from apiserver.machinery.errors import GroupResource, StatusError
from apiserver.machinery.gofmt import go_json
from apiserver.machinery.types import JSON

VALIDATION_FAILURE = "validation.policy.admission.k8s.io/validation_failure"
MAX_ANNOTATION_VALUE = 10 * 1024
_CODES = {"Forbidden": 403, "Unauthorized": 401, "RequestEntityTooLarge": 413, "Invalid": 422}


class ConfigurationError(Exception):
    """A binding or policy that cannot be applied (its params, its match rules)."""


class ValidatingPolicies:
    """The plugin over a source of policies and bindings; policies compiled once per generation."""

    def __init__(self, source: AdmissionSource, authorizer: Authorizer | None = None) -> None:
        self.source = source
        # What `authorizer` checks in expressions ask (none: they answer with an error).
        self.authorizer = authorizer
        self._generation = -1
        self._policies: list[tuple[CompiledPolicy, list[JSON]]] = []

    def _compiled(self) -> list[tuple[CompiledPolicy, list[JSON]]]:
        objects = self.source.objects()
        if objects.generation != self._generation:
            by_policy: dict[str, list[JSON]] = {}
            for name in sorted(objects.bindings):
                binding = objects.bindings[name]
                by_policy.setdefault(str((binding.get("spec") or {}).get("policyName") or ""), []).append(
                    binding
                )
            self._policies = [
                (compile_policy(objects.policies[name]), by_policy.get(name, []))
                for name in sorted(objects.policies)
                if by_policy.get(name)
            ]
            self._generation = objects.generation
        return self._policies

    async def validate(self, request: AdmissionRequest) -> None:
        await wait_ready(self.source, request)
        denials: list[tuple[CompiledPolicy, JSON | None, Decision]] = []
        for policy, bindings in self._compiled():
            await self._dispatch(policy, bindings, request, denials)
        if denials:
            raise _denied(request, *denials[0])

    async def _dispatch(
        self,
        policy: CompiledPolicy,
        bindings: Sequence[JSON],
        request: AdmissionRequest,
        denials: list[tuple[CompiledPolicy, JSON | None, Decision]],
    ) -> None:
        if not await matching.constraints_match(
            policy.spec.get("matchConstraints") or {}, request, self.source
        ):
            return
        annotations: dict[str, list[str]] = {}
        for binding in bindings:
            spec = binding.get("spec") or {}
            resources = spec.get("matchResources")
            if resources and not await matching.constraints_match(resources, request, self.source):
                continue
            try:
                results = await self._evaluate(policy, spec, request)
            except ConfigurationError as exc:
                if policy.failure_policy == FAIL:
                    denials.append((policy, binding, Decision(DENY, f"failed to configure binding: {exc}")))
                continue
            for result in results:
                _act(policy, binding, result, denials, annotations)
        for key, values in annotations.items():
            requestnotes.annotate(f"{policy.name}/{key}", ", ".join(values))

    async def _evaluate(self, policy: CompiledPolicy, spec: JSON, request: AdmissionRequest) -> list[Result]:
        namespace = await self.source.namespace(request.namespace) if request.namespace else None
        if request.namespace and namespace is None:
            raise errors.not_found_error(GroupResource("", "namespaces"), request.namespace)
        activation = cel_activation(request, namespace)
        results = []
        for param in await self._params(policy, spec.get("paramRef"), request):
            activation["params"] = param
            step = functools.partial(evaluate, policy, dict(activation))
            if policy.uses_authorizer:
                results.append(await checked(step, self.authorizer))
            else:
                results.append(await offload.run(step))
        return results

    async def _params(
        self, policy: CompiledPolicy, ref: JSON | None, request: AdmissionRequest
    ) -> list[JSON | None]:
        """Upstream's CollectParams: one evaluation without params, one per param found, or an
        error (a Deny parameterNotFoundAction with none found)."""
        kind = policy.param_kind
        if kind is None or not ref:
            return [None]
        api_version, kind_name = str(kind.get("apiVersion") or ""), str(kind.get("kind") or "")
        namespaced = await self.source.namespaced(api_version, kind_name)
        if namespaced is None:
            raise ConfigurationError(f"paramKind kind `{api_version}, Kind={kind_name}` not known")
        namespace = ""
        if namespaced:
            namespace = str(ref.get("namespace") or request.namespace)
            if not namespace:
                raise ConfigurationError(
                    "cannot use namespaced paramRef in policy binding that matches cluster-scoped resources"
                )
        elif ref.get("namespace"):
            raise ConfigurationError(
                "paramRef.namespace must not be provided for a cluster-scoped `paramKind`"
            )
        name, selector = str(ref.get("name") or ""), ref.get("selector")
        if name and selector is not None:
            raise ConfigurationError("paramRef.name and paramRef.selector are mutually exclusive")
        if not name and selector is None:
            raise ConfigurationError("one of name or selector must be provided")
        params = await self.source.params(api_version, kind_name, namespace, name, selector)
        if not params and ref.get("parameterNotFoundAction") == "Deny":
            raise ConfigurationError("no params found for policy binding with `Deny` parameterNotFoundAction")
        return list(params)


def _act(
    policy: CompiledPolicy,
    binding: JSON,
    result: Result,
    denials: list[tuple[CompiledPolicy, JSON | None, Decision]],
    annotations: dict[str, list[str]],
) -> None:
    """The binding's validationActions on each denial; the audit annotations collected."""
    spec = binding.get("spec") or {}
    actions: list[str] = list(spec.get("validationActions") or [])
    binding_name = str((binding.get("metadata") or {}).get("name") or "")
    for index, decision in enumerate(result.decisions):
        if decision.action != DENY:
            continue
        if "Deny" in actions:
            denials.append((policy, binding, decision))
        if "Audit" in actions:
            failure = [
                {
                    "message": decision.message,
                    "policy": str(spec.get("policyName") or ""),
                    "binding": binding_name,
                    "expressionIndex": index,
                    "validationActions": actions,
                }
            ]
            requestnotes.annotate(VALIDATION_FAILURE, go_json(failure, struct=True))
        if "Warn" in actions:
            requestnotes.warn(
                f"Validation failed for ValidatingAdmissionPolicy '{policy.name}' "
                f"with binding '{binding_name}': {decision.message}"
            )
    for annotation in result.annotations:
        if annotation.error:
            denials.append((policy, binding, Decision(DENY, annotation.error, error=True)))
            continue
        values = annotations.setdefault(annotation.key, [])
        value = annotation.value[:MAX_ANNOTATION_VALUE]
        if value not in values:
            values.append(value)


def _denied(
    request: AdmissionRequest, policy: CompiledPolicy, binding: JSON | None, decision: Decision
) -> StatusError:
    if binding is not None:
        binding_name = str((binding.get("metadata") or {}).get("name") or "")
        message = (
            f"ValidatingAdmissionPolicy '{policy.name}' with binding '{binding_name}' "
            f"denied request: {decision.message}"
        )
    else:
        message = f"ValidatingAdmissionPolicy '{policy.name}' denied request: {decision.message}"
    error = forbidden(request, message)
    reason = decision.reason or REASON_INVALID
    error.reason = reason
    error.code = _CODES.get(reason, 422)
    details = error.details if error.details is not None else {}
    details.setdefault("causes", []).append({"message": message})
    error.details = details
    return error
