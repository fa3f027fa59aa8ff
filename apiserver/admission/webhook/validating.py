"""The ValidatingAdmissionWebhook plugin: every webhook the request calls, called at once; the
request refused with the first failure to arrive (a denial, or a failed call under failurePolicy
Fail), as upstream's dispatcher takes the first error off its channel. A failed call under Ignore
lets the request through and says so in the audit annotation
`failed-open.validating.webhook.admission.k8s.io/round_0_index_<i>` (i: the webhook's place among
those called)."""

from __future__ import annotations

import asyncio

from apiserver.admission.objects import AdmissionSource
from apiserver.admission.readiness import wait_ready
from apiserver.admission.request import AdmissionRequest
from apiserver.admission.webhook.call import call_webhook
from apiserver.admission.webhook.client import WebhookClient
from apiserver.admission.webhook.configuration import IGNORE, Webhook, WebhookList
from apiserver.admission.webhook.errors import CallingError, denied
from apiserver.admission.webhook.selection import should_call
from apiserver.auth.authz import Authorizer
from apiserver.machinery import requestnotes
from apiserver.machinery.errors import StatusError

FAILED_OPEN = "failed-open.validating.webhook.admission.k8s.io/"


class ValidatingWebhooks:
    """The plugin over a source of ValidatingWebhookConfigurations."""

    def __init__(
        self, source: AdmissionSource, client: WebhookClient, authorizer: Authorizer | None = None
    ) -> None:
        self.source = source
        self.client = client
        # What matchConditions' `authorizer` checks ask.
        self.authorizer = authorizer
        self.webhooks = WebhookList(source, lambda objects: objects.validating_webhooks)

    async def validate(self, request: AdmissionRequest) -> None:
        await wait_ready(self.source, request)
        called = [
            hook
            for hook in self.webhooks.current()
            if await should_call(hook, request, self.source, self.authorizer)
        ]
        if not called:
            return
        failures: list[StatusError] = []
        await asyncio.gather(
            *(self._call(hook, index, request, failures) for index, hook in enumerate(called))
        )
        if failures:
            raise failures[0]

    async def _call(
        self, hook: Webhook, index: int, request: AdmissionRequest, failures: list[StatusError]
    ) -> None:
        """One webhook; its failure appended when it ends (so the list is in order of arrival)."""
        try:
            response = await call_webhook(self.client, hook, request, mutating=False)
        except CallingError as exc:
            if hook.failure_policy == IGNORE:
                requestnotes.annotate(f"{FAILED_OPEN}round_0_index_{index}", hook.name)
            else:
                failures.append(exc.failed_closed())
            return
        except StatusError as exc:
            failures.append(exc)
            return
        if not response.allowed:
            failures.append(denied(hook.name, response.result))
