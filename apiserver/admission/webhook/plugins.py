"""The two webhook plugins as a server turns them on: over one admission source, sharing one client
(its connection pool closed when the server stops)."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

from apiserver.admission.objects import AdmissionSource
from apiserver.admission.webhook.client import WebhookClient
from apiserver.admission.webhook.mutating import MutatingWebhooks
from apiserver.admission.webhook.validating import ValidatingWebhooks
from apiserver.auth.authz import Authorizer

MUTATING_ADMISSION_WEBHOOK = "MutatingAdmissionWebhook"
VALIDATING_ADMISSION_WEBHOOK = "ValidatingAdmissionWebhook"


@dataclass
class AdmissionWebhooks:
    client: WebhookClient
    mutating: MutatingWebhooks | None
    validating: ValidatingWebhooks | None

    @classmethod
    def over(
        cls,
        source: AdmissionSource,
        disabled: Collection[str] = (),
        services: Mapping[str, str] | None = None,
        authorizer: Authorizer | None = None,
    ) -> AdmissionWebhooks:
        """The plugins not `disabled` (upstream's plugin names); `services`: Service DNS names
        mapped to addresses (see client.py); `authorizer`: what matchConditions' checks ask."""
        client = WebhookClient(services)
        mutating = validating = None
        if MUTATING_ADMISSION_WEBHOOK not in disabled:
            mutating = MutatingWebhooks(source, client, authorizer)
        if VALIDATING_ADMISSION_WEBHOOK not in disabled:
            validating = ValidatingWebhooks(source, client, authorizer)
        return cls(client, mutating, validating)

    async def close(self) -> None:
        await self.client.close()
