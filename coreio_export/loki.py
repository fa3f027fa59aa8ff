"""The Loki sink: batches pushed to Loki's push API (`POST /loki/api/v1/push`, its JSON form).

Each record is one log entry. Its streams' labels are few, as Loki asks: `job` (coreio-export),
the Event's `namespace` and its `type`. The line is the record's JSON (what a JSON-lines sink
writes, so `| json` in LogQL reads every field), timed by the Event's latest occurrence; the dedup
key rides along as structured metadata (`dedup_key`). Loki drops an entry that repeats one of its
stream (same time, same line), so a replayed batch stores nothing twice.

As Loki's own clients do (Promtail, Alloy), a 429 or 5xx is retried and any other 4xx is a batch
Loki refuses for good (too old, too large, a bad label): it is not sent again, and the export's
status counts its records as failed and says why (SinkRejected)."""

from __future__ import annotations

import ssl
import time
from urllib.parse import urlsplit

import aiohttp
import orjson

from apiserver.machinery.types import JSON
from apiserver.resources.eventexport import LokiSink
from coreio_export.otlp import occurred_nanos
from coreio_export.sinkbase import SinkError, SinkRejected

PUSH_PATH = "/loki/api/v1/push"
JOB = "coreio-export"
TIMEOUT = aiohttp.ClientTimeout(total=30.0)


def push_body(batch: list[JSON]) -> JSON:
    """The batch as a push request: one stream for each (namespace, type), the entries of each in
    the batch's order."""
    streams: dict[tuple[str, str], list[list[object]]] = {}
    for item in batch:
        event = item["event"]
        namespace = str((event.get("metadata") or {}).get("namespace") or "")
        stamp = occurred_nanos(event) or time.time_ns()
        entry: list[object] = [str(stamp), orjson.dumps(item).decode(), {"dedup_key": item["dedupKey"]}]
        streams.setdefault((namespace, str(event.get("type") or "")), []).append(entry)
    return {
        "streams": [
            {"stream": {"job": JOB, "namespace": namespace, "type": kind}, "values": values}
            for (namespace, kind), values in streams.items()
        ]
    }


class Loki:
    name = "loki"

    def __init__(self, sink: LokiSink, headers: dict[str, str], context: ssl.SSLContext | bool) -> None:
        parts = urlsplit(sink.url)
        self.url = parts._replace(path=parts.path.rstrip("/") + PUSH_PATH).geturl()
        self.headers = headers | {"Content-Type": "application/json"}
        if sink.tenant:
            self.headers["X-Scope-OrgID"] = sink.tenant
        self.ssl = context
        self.session = aiohttp.ClientSession(timeout=TIMEOUT)

    async def send(self, batch: list[JSON]) -> None:
        body = orjson.dumps(push_body(batch))
        try:
            async with self.session.post(self.url, data=body, headers=self.headers, ssl=self.ssl) as answer:
                said = (await answer.read()).decode(errors="replace").strip()
        except (aiohttp.ClientError, TimeoutError, ssl.SSLError) as exc:
            raise SinkError(f"POST {self.url}: {exc or type(exc).__name__}") from None
        if 200 <= answer.status < 300:
            return
        first = said.splitlines()[0][:300] if said else ""
        if answer.status == 429 or answer.status >= 500:
            raise SinkError(f"POST {self.url}: {answer.status}{': ' + first if first else ''}")
        raise SinkRejected(f"POST {self.url}: Loki refused the batch for good: {answer.status}: {first}")

    async def close(self) -> None:
        await self.session.close()
