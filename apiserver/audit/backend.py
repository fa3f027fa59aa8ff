"""Where the events go: the `coreio.audit` logger, one JSON line a record, silent until `configure`
gives it a destination, and the webhook (`apiserver.audit.webhook`), both at once if both are
configured (upstream's union backend); and the policy the requests are judged by (None: no audit).
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from collections.abc import Awaitable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from apiserver.audit.logfile import RotatingAuditFile, Rotation
from apiserver.audit.metrics import METRICS
from apiserver.audit.policy import DEFAULT_POLICY, Policy, load_policy
from apiserver.audit.webhook.backend import WebhookBackend, WebhookOptions, load

audit_log = logging.getLogger("coreio.audit")
log = logging.getLogger(__name__)
# How long shutting down waits for the webhook's last events (upstream waits without a bound).
SHUTDOWN_TIMEOUT = 10.0


@dataclass
class AuditBackend:
    policy: Policy | None = None
    webhook: WebhookBackend | None = None

    def write(self, event: dict[str, Any]) -> Awaitable[bool] | None:
        """The event logged and handed to the webhook; what a blocking webhook makes of it (True:
        the request may go on), or None when nothing is to be waited for."""
        line = json.dumps(event, separators=(",", ":"))
        METRICS.events.inc()
        audit_log.info(line)
        return self.webhook.process(event, line) if self.webhook is not None else None

    def start(self) -> None:
        """The webhook's batching started (on the running event loop)."""
        if self.webhook is not None:
            self.webhook.start()

    async def stop(self) -> None:
        """The webhook's last events sent, within SHUTDOWN_TIMEOUT."""
        if self.webhook is None:
            return
        try:
            async with asyncio.timeout(SHUTDOWN_TIMEOUT):
                await self.webhook.stop()
        except TimeoutError:
            log.warning("audit webhook: stopped before its last events were sent")


# The process's one audit backend (as upstream's, set up once from the flags).
BACKEND = AuditBackend()


@dataclass(frozen=True)
class AuditOptions:
    """The --audit-* flags."""

    log_path: str = ""
    policy_file: str = ""
    rotation: Rotation = field(default_factory=Rotation)
    webhook: WebhookOptions = field(default_factory=WebhookOptions)


def configure(options: AuditOptions) -> None:
    """The policy read (PolicyError), the log opened (OSError) and the webhook set up
    (WebhookOptionsError, WebhookConfigError); no audit without a log path or a webhook."""
    _close_log()
    BACKEND.policy, BACKEND.webhook = None, None
    if not options.log_path and not options.webhook.config_file:
        return
    policy = load_policy(options.policy_file) if options.policy_file else DEFAULT_POLICY
    if options.log_path:
        _open_log(options)
    webhook = load(options.webhook) if options.webhook.config_file else None
    BACKEND.policy, BACKEND.webhook = policy, webhook


def _close_log() -> None:
    audit_log.propagate = False
    for previous in list(audit_log.handlers):
        audit_log.removeHandler(previous)
        previous.close()
    audit_log.disabled = True


def _open_log(options: AuditOptions) -> None:
    handler: logging.Handler
    if options.log_path == "-":
        handler = logging.StreamHandler(sys.stdout)
    else:
        handler = RotatingAuditFile(Path(options.log_path), options.rotation)
    handler.setFormatter(logging.Formatter("%(message)s"))
    audit_log.addHandler(handler)
    audit_log.setLevel(logging.INFO)
    audit_log.disabled = False
