"""Which webhooks a request calls, decided as upstream's ShouldCallHook decides it: the namespace
and object selectors, the rules (matchPolicy finds nothing more here: each resource is served in one
version), then the matchConditions. A selector's error (a namespace that does not exist) counts
only for a webhook whose rules match; a matchCondition's error refuses the request (403) under
failurePolicy Fail and skips the webhook under Ignore."""

from __future__ import annotations

from typing import Any

from apiserver.admission import matching
from apiserver.admission.conditions import conditions_hold
from apiserver.admission.objects import AdmissionSource
from apiserver.admission.request import AdmissionRequest, request_object
from apiserver.admission.webhook.configuration import FAIL, Webhook
from apiserver.machinery import errors
from apiserver.machinery.errors import GroupResource, StatusError


async def _namespace_matches(
    hook: Webhook, request: AdmissionRequest, source: AdmissionSource
) -> bool | StatusError:
    try:
        return await matching.namespace_selector_matches(hook.spec.get("namespaceSelector"), request, source)
    except StatusError as exc:
        return exc


def _conditions_match(hook: Webhook, request: AdmissionRequest) -> bool:
    """True when no condition is false; errors as failurePolicy says (Fail: a 403)."""
    if not hook.conditions:
        return True
    activation: dict[str, Any] = {
        "object": request.obj,
        "oldObject": request.old,
        "request": request_object(request),
        "params": None,
        "namespaceObject": None,
    }
    holds, failures = conditions_hold(hook.conditions, lambda expression: expression.run(activation))
    if not holds:
        return False
    if not failures:
        return True
    if hook.failure_policy != FAIL:
        return False
    resource = GroupResource(request.group, request.resource)
    raise errors.forbidden_error(resource, request.name, errors.aggregate_message(failures))


async def should_call(hook: Webhook, request: AdmissionRequest, source: AdmissionSource) -> bool:
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
    return _conditions_match(hook, request)
