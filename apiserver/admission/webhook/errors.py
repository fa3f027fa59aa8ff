"""The ways a webhook call ends other than with an answer that lets the request through, worded as
k8s.io/apiserver words them: a failed call (which the webhook's failurePolicy may ignore) and a
denial (which it may not)."""

from __future__ import annotations

from typing import Any

from apiserver.machinery import errors
from apiserver.machinery.errors import StatusError
from apiserver.machinery.types import JSON

WITHOUT_EXPLANATION = "without explanation"


class CallingError(Exception):
    """The webhook could not be asked, or answered nothing usable (upstream's ErrCallingWebhook):
    `reason` says why, `status` is the error the call itself met."""

    def __init__(self, webhook: str, reason: str, status: StatusError) -> None:
        super().__init__(f"failed calling webhook {errors.go_quote(webhook)}: {reason}")
        self.webhook = webhook
        self.reason = reason
        self.status = status

    def failed_closed(self) -> StatusError:
        """What the request answers when the webhook's failurePolicy is Fail: a 500."""
        return errors.internal_error(str(self))


class WebhookStatusError(StatusError):
    """A Status the webhook wrote itself: answered as it is, an empty reason left out (Go's
    omitempty), its details and any other field kept."""

    def __init__(self, body: JSON) -> None:
        super().__init__(int(body["code"]), str(body.get("reason") or ""), str(body.get("message") or ""))
        self.body = body
        self.details = body.get("details") if isinstance(body.get("details"), dict) else None

    @property
    def status(self) -> JSON:
        return dict(self.body)


def denied(webhook: str, result: Any) -> StatusError:
    """The error of a denial (upstream's ToStatusErr): the webhook's Status, at least a 400 and a
    Failure, its message prefixed with the webhook's name (else its reason, else no explanation)."""
    given: JSON = dict(result) if isinstance(result, dict) else {}
    code = given.get("code")
    if not isinstance(code, int) or isinstance(code, bool) or code < 400:
        code = 400
    status = given.get("status")
    if not status or status == "Success":
        status = "Failure"
    denied_by = f"admission webhook {errors.go_quote(webhook)} denied the request"
    if given.get("message"):
        message = f"{denied_by}: {given['message']}"
    elif given.get("reason"):
        message = f"{denied_by}: {given['reason']}"
    else:
        message = f"{denied_by} {WITHOUT_EXPLANATION}"
    body: JSON = {"kind": "Status", "apiVersion": "v1", "metadata": given.get("metadata") or {}}
    body["status"] = status
    body["message"] = message
    for key in ("reason", "details"):
        if given.get(key):
            body[key] = given[key]
    body["code"] = code
    return WebhookStatusError(body)


def dry_run_unsupported(webhook: str) -> StatusError:
    """A dry run reaching a webhook whose side effects a dry run must not have: a 400, whatever
    its failurePolicy says."""
    return errors.bad_request(f"admission webhook {errors.go_quote(webhook)} does not support dry run")
