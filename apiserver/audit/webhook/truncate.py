"""Events and batches kept under a size (--audit-webhook-truncate-*), as upstream's truncate
plugin: an event too large loses its request and response bodies (and says so in an annotation),
and is dropped if still too large; a batch too large goes as several."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from apiserver.audit.webhook.client import EncodedEvent

TRUNCATED_ANNOTATION = "audit.k8s.io/truncated"
_BODY_LEVELS = frozenset({"Request", "RequestResponse"})


@dataclass(frozen=True)
class TruncateConfig:
    enabled: bool = False
    max_batch_size: int = 10 * 1024 * 1024
    max_event_size: int = 100 * 1024


def fitted(event: dict[str, Any], encoded: EncodedEvent, max_size: int) -> EncodedEvent | None:
    """`encoded` if it fits in `max_size` bytes; else the event without its bodies, if that fits
    (only events at a level that keeps bodies are trimmed, as upstream); else None."""
    if encoded.size <= max_size:
        return encoded
    if event.get("level") not in _BODY_LEVELS:
        return None
    trimmed = {key: value for key, value in event.items() if key not in ("requestObject", "responseObject")}
    trimmed["annotations"] = {**(event.get("annotations") or {}), TRUNCATED_ANNOTATION: "true"}
    smaller = EncodedEvent(encoded.audit_id, json.dumps(trimmed, separators=(",", ":")))
    return smaller if smaller.size <= max_size else None


def split(events: Sequence[EncodedEvent], max_size: int) -> list[list[EncodedEvent]]:
    """`events` in order, as batches of at most `max_size` bytes of events (one event, alone, may
    be larger: the event limit is below the batch limit)."""
    batches: list[list[EncodedEvent]] = []
    size = 0
    for event in events:
        if not batches or size + event.size > max_size:
            batches.append([])
            size = 0
        batches[-1].append(event)
        size += event.size
    return batches
