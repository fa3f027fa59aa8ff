"""Where the events go: the `coreio.audit` logger, one JSON line a record, silent until `configure`
gives it a destination; and the policy the requests are judged by (None: no audit log)."""

from __future__ import annotations

import json
import logging
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from apiserver.audit.logfile import RotatingAuditFile, Rotation
from apiserver.audit.policy import DEFAULT_POLICY, Policy, load_policy

audit_log = logging.getLogger("coreio.audit")


@dataclass
class AuditBackend:
    policy: Policy | None = None

    def write(self, event: dict[str, Any]) -> None:
        audit_log.info(json.dumps(event, separators=(",", ":")))


# The process's one audit backend (as upstream's, set up once from the flags).
BACKEND = AuditBackend()


@dataclass(frozen=True)
class AuditOptions:
    """The --audit-* flags."""

    log_path: str = ""
    policy_file: str = ""
    rotation: Rotation = field(default_factory=Rotation)


def configure(options: AuditOptions) -> None:
    """The policy read (PolicyError) and the log opened (OSError); nothing logged without a path."""
    audit_log.propagate = False
    for previous in list(audit_log.handlers):
        audit_log.removeHandler(previous)
        previous.close()
    if not options.log_path:
        BACKEND.policy = None
        audit_log.disabled = True
        return
    policy = load_policy(options.policy_file) if options.policy_file else DEFAULT_POLICY
    handler: logging.Handler
    if options.log_path == "-":
        handler = logging.StreamHandler(sys.stdout)
    else:
        handler = RotatingAuditFile(Path(options.log_path), options.rotation)
    handler.setFormatter(logging.Formatter("%(message)s"))
    audit_log.addHandler(handler)
    audit_log.setLevel(logging.INFO)
    audit_log.disabled = False
    BACKEND.policy = policy
