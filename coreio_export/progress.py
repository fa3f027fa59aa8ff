"""What the exporter reports in its EventExport's status: the position delivered, the lag, the
last error, the counts and the Ready and Lagging conditions, kept here between two writes."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import UTC, datetime

from apiserver.machinery.types import JSON


def now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class Condition:
    status: str
    reason: str
    message: str
    since: str = field(default_factory=now_rfc3339)


@dataclass
class Progress:
    """The status as the exporter keeps it; `body()` is what it writes."""

    generation: int
    observed: int = 0  # the generation the status last said it acted on
    position: int = 0
    newest: int = 0  # the newest revision the watch has shown
    lag_seconds: float = 0.0
    sent: int = 0
    failed: int = 0
    batches: int = 0
    gaps: int = 0
    last_error: str = ""
    last_success: str | None = None
    conditions: dict[str, Condition] = field(default_factory=dict)

    @classmethod
    def from_status(cls, status: JSON, generation: int) -> Progress:
        counts = status.get("counts") or {}
        progress = cls(
            generation=generation,
            observed=int(status.get("observedGeneration") or 0),
            position=int(status.get("position") or 0),
            sent=counts.get("sent", 0),
            failed=counts.get("failed", 0),
            batches=counts.get("batches", 0),
            gaps=counts.get("gaps", 0),
            last_error=status.get("lastError", ""),
            last_success=status.get("lastSuccessTime"),
        )
        for item in status.get("conditions") or []:
            progress.conditions[item["type"]] = Condition(
                item["status"], item["reason"], item["message"], item["lastTransitionTime"]
            )
        return progress

    def condition(self, kind: str, status: bool, reason: str, message: str) -> None:
        """Sets a condition; its transition time moves only when its status does."""
        value = "True" if status else "False"
        before = self.conditions.get(kind)
        since = before.since if before is not None and before.status == value else now_rfc3339()
        self.conditions[kind] = Condition(value, reason, message, since)

    def delivered(self, records: int, waited_since: float) -> None:
        self.sent += records
        self.batches += 1
        self.last_success = now_rfc3339()
        self.lag_seconds = time.monotonic() - waited_since
        self.condition("Ready", True, "Delivering", "the sink acknowledged the last batch")

    def failure(self, records: int, error: str, waited_since: float) -> None:
        self.failed += records
        self.last_error = error
        self.lag_seconds = time.monotonic() - waited_since
        self.condition("Ready", False, "SinkFailed", error)

    def body(self) -> JSON:
        lag = {"revisions": max(self.newest - self.position, 0), "seconds": int(self.lag_seconds)}
        counts = {"sent": self.sent, "failed": self.failed, "batches": self.batches, "gaps": self.gaps}
        status: JSON = {
            "observedGeneration": self.generation,
            "position": str(self.position),
            "lag": lag,
            "lastError": self.last_error,
            "lastSuccessTime": self.last_success,
            "counts": counts,
            "conditions": [
                {
                    "type": kind,
                    "status": c.status,
                    "observedGeneration": self.generation,
                    "lastTransitionTime": c.since,
                    "reason": c.reason,
                    "message": c.message,
                }
                for kind, c in sorted(self.conditions.items())
            ],
        }
        return {"status": status}
