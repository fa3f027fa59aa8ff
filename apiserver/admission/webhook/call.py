"""One call of one webhook, as upstream's dispatchers make it: refused before calling when a dry
run would reach side effects, the review sent, the answer checked, the webhook's audit annotations
and warnings noted; every failure a CallingError (which failurePolicy may ignore) or a StatusError
(which it may not)."""

from __future__ import annotations

import orjson

from apiserver.admission.request import AdmissionRequest
from apiserver.admission.webhook import review as reviews
from apiserver.admission.webhook.client import CallFailure, ClientConfigError, WebhookClient, endpoint
from apiserver.admission.webhook.configuration import DRY_RUN_SAFE, Webhook
from apiserver.admission.webhook.errors import CallingError, dry_run_unsupported
from apiserver.machinery import deadlines, errors, requestnotes, uids


def _check_dry_run(hook: Webhook, request: AdmissionRequest) -> None:
    if not request.dry_run:
        return
    if hook.side_effects is None:
        raise CallingError(
            hook.name, "Webhook SideEffects is nil", errors.bad_request("Webhook SideEffects is nil")
        )
    if hook.side_effects not in DRY_RUN_SAFE:
        raise dry_run_unsupported(hook.name)


async def call_webhook(
    client: WebhookClient, hook: Webhook, request: AdmissionRequest, *, mutating: bool
) -> reviews.AdmissionResponse:
    """The webhook's verified answer to the request."""
    _check_dry_run(hook, request)
    try:
        version = reviews.review_version(hook.review_versions)
    except reviews.UnknownVersions as exc:
        reason = f"could not create admission objects: {exc}"
        raise CallingError(
            hook.name, reason, errors.bad_request("error creating admission objects")
        ) from None
    uid = uids.new()
    try:
        # The webhook's timeout, or what the request has left when that is less.
        # (A millisecond at least: aiohttp takes a timeout of 0 for none.)
        seconds = max(deadlines.capped(hook.timeout), 0.001)
        target = endpoint(hook.client_config, hook.name, seconds)
        body = orjson.dumps(reviews.review(request, uid, version))
        answer = await client.post(target, body, seconds)
    except ClientConfigError as exc:
        reason = f"could not get REST client: {exc}"
        raise CallingError(hook.name, reason, errors.bad_request("error getting REST client")) from None
    except CallFailure as exc:
        raise CallingError(hook.name, f"failed to call webhook: {exc.reason}", exc.status) from None
    try:
        response = reviews.verify_response(answer, uid, version, mutating=mutating)
    except reviews.InvalidResponse as exc:
        status = errors.service_unavailable("error validating webhook response")
        raise CallingError(hook.name, f"received invalid webhook response: {exc}", status) from None
    for key, value in response.audit_annotations.items():
        requestnotes.annotate(f"{hook.name}/{key}", value)
    for warning in response.warnings:
        requestnotes.warn(warning)
    return response
