"""Which webhooks a request calls, decided as upstream's ShouldCallHook decides it: the namespace
and object selectors, the rules (matchPolicy finds nothing more here: each resource is served in one
version), then the matchConditions. A selector's error (a namespace that does not exist) counts
only for a webhook whose rules match; a matchCondition's error refuses the request (403) under
failurePolicy Fail and skips the webhook under Ignore."""

from __future__ import annotations

from apiserver.admission import matching
from apiserver.admission.authorization import checked
from apiserver.admission.conditions import conditions_hold
from apiserver.admission.objects import AdmissionSource
from apiserver.admission.policy.compiled import VARIABLES
from apiserver.admission.request import AdmissionRequest, cel_activation
from apiserver.admission.webhook.configuration import FAIL, Webhook
from apiserver.auth.authz import Authorizer
from apiserver.machinery import errors
from apiserver.machinery.errors import GroupResource, StatusError


async def _namespace_matches(
    hook: Webhook, request: AdmissionRequest, source: AdmissionSource
) -> bool | StatusError:
    try:
        return await matching.namespace_selector_matches(hook.spec.get("namespaceSelector"), request, source)
    except StatusError as exc:
        return exc


async def _conditions_match(hook: Webhook, request: AdmissionRequest, authorizer: Authorizer | None) -> bool:
    """True when no condition is false; errors as failurePolicy says (Fail: a 403)."""
    if not hook.conditions:
        return True
    activation = {**cel_activation(request), "params": None}

    def judge() -> tuple[bool, list[str]]:
        from apiserver.cel.program import Bindings  # loaded with the first expression compiled

        # Bound in the thread that evaluates (the engine's values belong to the thread's arena).
        bindings = Bindings(VARIABLES, activation)
        return conditions_hold(hook.conditions, lambda expression, budget: expression.run(bindings, budget))

    uses_authorizer = any("authorizer" in expression.source for _, expression in hook.conditions)
    holds, failures = await checked(judge, authorizer) if uses_authorizer else judge()
    if not holds:
        return False
    if not failures:
        return True
    if hook.failure_policy != FAIL:
        return False
    resource = GroupResource(request.group, request.resource)
    raise errors.forbidden_error(resource, request.name, errors.aggregate_message(failures))


async def should_call(
    hook: Webhook, request: AdmissionRequest, source: AdmissionSource, authorizer: Authorizer | None = None
) -> bool:
    """Whether `hook` is called for `request`; a StatusError when the request is refused instead."""
    namespace = await _namespace_matches(hook, request, source)
    if namespace is False:
        return False
    if not matching.object_selector_matches(hook.spec.get("objectSelector"), request):
        return False
    if not any(matching.rule_matches(rule, request) for rule in hook.rules):
        return False
    if isinstance(namespace, StatusError):
        raise namespace
    return await _conditions_match(hook, request, authorizer)
