"""The MutatingAdmissionWebhook plugin: the webhooks the request calls, one after the other, each
seeing the object as the ones before left it, their JSONPatches applied; then, if a webhook changed
the object, a second round calling again those with `reinvocationPolicy: IfNeeded` called before
the change (upstream reinvokes the whole mutating chain; its webhooks are the only plugin here that
mutates). Each call is noted in the audit annotation
`mutation.webhook.admission.k8s.io/round_<r>_index_<i>` (i: the webhook's place among all);
a failed call under failurePolicy Ignore in `failed-open.mutation.webhook.admission.k8s.io/...`;
the patch applied, at audit level Request and above, in `patch.webhook.admission.k8s.io/...`."""

from __future__ import annotations

from apiserver.admission.objects import AdmissionSource
from apiserver.admission.readiness import wait_ready
from apiserver.admission.request import AdmissionRequest
from apiserver.admission.webhook.call import call_webhook
from apiserver.admission.webhook.client import WebhookClient
from apiserver.admission.webhook.configuration import IF_NEEDED, IGNORE, Webhook, WebhookList
from apiserver.admission.webhook.errors import CallingError, denied
from apiserver.admission.webhook.patching import apply_patch, decode_patch
from apiserver.admission.webhook.reinvocation import Reinvocation
from apiserver.admission.webhook.review import JSON_PATCH
from apiserver.admission.webhook.selection import should_call
from apiserver.auth.authz import Authorizer
from apiserver.machinery import errors, requestnotes
from apiserver.machinery.gofmt import go_json
from apiserver.machinery.types import JSON

MUTATION = "mutation.webhook.admission.k8s.io/"
PATCH = "patch.webhook.admission.k8s.io/"
FAILED_OPEN = "failed-open.mutation.webhook.admission.k8s.io/"


class MutatingWebhooks:
    """The plugin over a source of MutatingWebhookConfigurations."""

    def __init__(
        self, source: AdmissionSource, client: WebhookClient, authorizer: Authorizer | None = None
    ) -> None:
        self.source = source
        self.client = client
        # What matchConditions' `authorizer` checks ask.
        self.authorizer = authorizer
        self.webhooks = WebhookList(source, lambda objects: objects.mutating_webhooks)

    async def admit(self, request: AdmissionRequest) -> JSON | None:
        """The object as the webhooks left it; None when they left it as it was."""
        await wait_ready(self.source, request)
        hooks = self.webhooks.current()
        if not hooks:
            return None
        state = Reinvocation()
        current = await self._round(hooks, request, 0, state)
        if state.should_reinvoke:
            current = await self._round(hooks, current, 1, state)
        return current.obj if current.obj is not request.obj else None

    async def _round(
        self, hooks: list[Webhook], request: AdmissionRequest, round_: int, state: Reinvocation
    ) -> AdmissionRequest:
        if round_ and state.last_output != request.obj:
            state.object_changed()
        for index, hook in enumerate(hooks):
            if not await should_call(hook, request, self.source, self.authorizer):
                continue
            if round_ and hook.uid not in state.reinvoke:
                continue
            where = f"round_{round_}_index_{index}"
            patched = await self._invoke(hook, request, where, state)
            if patched is not None:
                request = request.with_object(patched)
        state.last_output = request.obj
        return request

    async def _invoke(
        self, hook: Webhook, request: AdmissionRequest, where: str, state: Reinvocation
    ) -> JSON | None:
        """One webhook called and its failure acted on; the object it patched (None: untouched)."""
        patched: JSON | None = None
        try:
            patched = await self._call(hook, request, where)
        except CallingError as exc:
            if hook.failure_policy != IGNORE:
                raise exc.failed_closed() from None
            requestnotes.annotate(f"{FAILED_OPEN}{where}", hook.name)
        finally:
            changed = patched is not None and patched != request.obj
            note = {"configuration": hook.configuration, "webhook": hook.name, "mutated": changed}
            requestnotes.annotate(f"{MUTATION}{where}", go_json(note, struct=True))
            state.called(hook.uid, hook.reinvocation_policy == IF_NEEDED, changed)
        return patched if changed else None

    async def _call(self, hook: Webhook, request: AdmissionRequest, where: str) -> JSON | None:
        response = await call_webhook(self.client, hook, request, mutating=True)
        if not response.allowed:
            raise denied(hook.name, response.result)
        if not response.patch:
            return None
        operations = decode_patch(response.patch)
        if not operations:
            return None
        if request.obj is None:
            raise errors.internal_error(
                f"admission webhook {errors.go_quote(hook.name)} attempted to modify the object, "
                "which is not supported for this operation"
            )
        if response.patch_type != JSON_PATCH:
            reason = f'unsupported patch type "{response.patch_type}"'
            raise CallingError(hook.name, reason, denied(hook.name, response.result))
        patched = apply_patch(request.kind, request.obj, operations)
        _note_patch(hook, where, operations)
        return patched


def _note_patch(hook: Webhook, where: str, operations: list[JSON]) -> None:
    """The patch applied, for audit events at level Request and above (upstream's
    PatchAuditAnnotation: each operation's keys in order, as Go writes a map)."""
    patch = [{key: operation[key] for key in sorted(operation)} for operation in operations]
    note = {
        "configuration": hook.configuration,
        "webhook": hook.name,
        "patch": patch,
        "patchType": JSON_PATCH,
    }
    requestnotes.annotate(f"{PATCH}{where}", go_json(note, struct=True), requestnotes.REQUEST_LEVEL)
