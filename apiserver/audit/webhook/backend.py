"""The webhook backend from its flags: validated as upstream validates them, then, by mode, each
event buffered for a batch (batch), or sent while its request waits (blocking: a failure only
counted; blocking-strict: a request whose RequestReceived event fails is refused)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from apiserver.audit.metrics import METRICS
from apiserver.audit.webhook import truncate
from apiserver.audit.webhook.backoff import Backoff, DeliveryError
from apiserver.audit.webhook.batch import BatchConfig, Batcher
from apiserver.audit.webhook.client import EncodedEvent, WebhookClient, webhook_connection
from apiserver.audit.webhook.truncate import TruncateConfig

BATCH, BLOCKING, BLOCKING_STRICT = "batch", "blocking", "blocking-strict"
MODES = (BATCH, BLOCKING, BLOCKING_STRICT)
VERSIONS = ("audit.k8s.io/v1",)


class WebhookOptionsError(Exception):
    """An option upstream's validation refuses."""


class Sender(Protocol):
    async def send(self, events: Sequence[EncodedEvent]) -> None: ...

    async def close(self) -> None: ...


@dataclass(frozen=True)
class WebhookOptions:
    """The --audit-webhook-* flags; no config file: no webhook."""

    config_file: str = ""
    mode: str = BATCH
    batch: BatchConfig = field(default_factory=BatchConfig)
    truncate: TruncateConfig = field(default_factory=TruncateConfig)
    initial_backoff: float = 10.0
    version: str = VERSIONS[0]

    def problem(self) -> str:
        """What upstream's validation says of these options (batch ones only in batch mode), or ''."""
        if self.mode not in MODES:
            return f"invalid audit webhook mode {self.mode}, allowed modes are {','.join(MODES)!r}"
        if self.version not in VERSIONS:
            return f"invalid group version, allowed versions are {list(VERSIONS)!r}"
        return (self._batch_problem() if self.mode == BATCH else "") or self._truncate_problem()

    def _batch_problem(self) -> str:
        batch = self.batch
        checks = [
            (batch.buffer_size, "buffer size"),
            (batch.max_batch_size, "max batch size"),
            *(
                [(batch.throttle_qps, "throttle QPS"), (batch.throttle_burst, "throttle burst")]
                if batch.throttle_enable
                else []
            ),
        ]
        for value, what in checks:
            if value <= 0:
                return f"invalid audit batch webhook {what} {value:g}, must be a positive number"
        return ""

    def _truncate_problem(self) -> str:
        limits = self.truncate
        if limits.max_event_size <= 0:
            size = limits.max_event_size
            return f"invalid audit truncate webhook max event size {size}, must be a positive number"
        if limits.max_batch_size < limits.max_event_size:
            return (
                f"invalid audit truncate webhook max batch size {limits.max_batch_size}, must be greater than"
                f" max event size ({limits.max_event_size})"
            )
        return ""


class WebhookBackend:
    """Events to the webhook, as the mode says."""

    def __init__(self, options: WebhookOptions, sender: Sender) -> None:
        self.options = options
        self.sender = sender
        self.batcher = Batcher(options.batch, self.deliver) if options.mode == BATCH else None
        self._blocking: set[asyncio.Task[bool]] = set()

    def process(self, event: dict[str, Any], line: str) -> Awaitable[bool] | None:
        """The event buffered (None), or being sent: a task whose result says whether the request
        may go on (False only in blocking-strict, when it failed)."""
        encoded = self._fitted(event, EncodedEvent(str(event.get("auditID", "")), line))
        if encoded is None:
            return None
        if self.batcher is not None:
            self.batcher.offer(encoded)
            return None
        task = asyncio.create_task(self.deliver([encoded]))
        self._blocking.add(task)
        task.add_done_callback(self._blocking.discard)
        return task

    def _fitted(self, event: dict[str, Any], encoded: EncodedEvent) -> EncodedEvent | None:
        limits = self.options.truncate
        if not limits.enabled:
            return encoded
        fitted = truncate.fitted(event, encoded, limits.max_event_size)
        if fitted is None:
            METRICS.failed("truncate", 1, "event is too large even after truncating", [encoded.audit_id])
        return fitted

    async def deliver(self, events: list[EncodedEvent]) -> bool:
        """The events sent (in batches under the size limit when truncating); False when some were
        lost, except in blocking mode, which ignores its failures."""
        limits = self.options.truncate
        delivered = True
        for batch in truncate.split(events, limits.max_batch_size) if limits.enabled else [events]:
            try:
                await self.sender.send(batch)
            except DeliveryError as exc:
                METRICS.failed("webhook", len(batch), str(exc), [event.audit_id for event in batch])
                delivered = False
            except asyncio.CancelledError:
                METRICS.failed(
                    "webhook", len(batch), "shut down before delivered", [e.audit_id for e in batch]
                )
                raise
        return delivered or self.options.mode == BLOCKING

    def start(self) -> None:
        if self.batcher is not None:
            self.batcher.start()

    async def stop(self) -> None:
        """What is buffered or being sent delivered, then the client closed. Cancelled (by a
        timeout around it), it cancels the sending, and what is lost is counted."""
        try:
            if self.batcher is not None:
                await self.batcher.stop()
            await asyncio.gather(*self._blocking, return_exceptions=True)
        finally:
            await self.sender.close()


def load(options: WebhookOptions) -> WebhookBackend:
    """The backend the options ask for; WebhookOptionsError for an option upstream refuses,
    WebhookConfigError for a kubeconfig that cannot be used."""
    if problem := options.problem():
        raise WebhookOptionsError(problem)
    connection = webhook_connection(options.config_file)
    return WebhookBackend(options, WebhookClient(connection, Backoff(options.initial_backoff)))
