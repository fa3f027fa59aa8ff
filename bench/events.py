"""The Event every measurement writes: the same shape for events.core.io/v1 and events.k8s.io/v1,
with a note of about 1 KB (coreio and upstream allow 1024 characters)."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from typing import Any

NOTE_SIZE = 1000
NAME_PLACEHOLDER = "__NAME__"
SENT_ANNOTATION = "bench.core.io/sent"
_NOTE = ("Back-off restarting failed container bench in pod bench-0; " * 40)[:NOTE_SIZE]


def micro_time(at: float | None = None) -> str:
    moment = datetime.fromtimestamp(time.time() if at is None else at, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def event_body(group_version: str, namespace: str, name: str, *, sent: float | None = None) -> dict[str, Any]:
    """One Event named `name` in `namespace`; `sent` (a Unix time) is stored as an annotation."""
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if sent is not None:
        metadata["annotations"] = {SENT_ANNOTATION: f"{sent:.6f}"}
    return {
        "apiVersion": group_version,
        "kind": "Event",
        "metadata": metadata,
        "eventTime": micro_time(),
        "reportingController": "bench.core.io/load",
        "reportingInstance": "bench-load-0",
        "action": "Benchmark",
        "reason": "BackOff",
        "type": "Warning",
        "regarding": {"kind": "Pod", "namespace": namespace, "name": "subject-0", "apiVersion": "v1"},
        "note": _NOTE,
    }


def body_template(group_version: str, namespace: str) -> str:
    """The body wrk's create script sends, with NAME_PLACEHOLDER where each request's name goes."""
    return json.dumps(event_body(group_version, namespace, NAME_PLACEHOLDER), separators=(",", ":"))


def generated_name_template(group_version: str, namespace: str) -> str:
    """The body of a create that asks the server to name the Event (`metadata.generateName`), as
    client-go's event recorders do not but many controllers do: the same Event otherwise."""
    body = event_body(group_version, namespace, NAME_PLACEHOLDER)
    body["metadata"] = {"generateName": "bench-", "namespace": namespace}
    return json.dumps(body, separators=(",", ":"))
