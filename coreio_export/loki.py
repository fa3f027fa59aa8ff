"""The Loki sink: batches pushed to Loki's push API (`POST /loki/api/v1/push`, its JSON form).

Each record is one log entry. Its streams' labels are few, as Loki asks: `job` (coreio-export),
the Event's `namespace` and its `type`. The line is the record's JSON (what a JSON-lines sink
writes, so `| json` in LogQL reads every field, the Event's own times included); the dedup key
rides along as structured metadata (`dedup_key`). An entry is timed when the exporter first sends
it: Loki refuses entries further behind a stream's newest than its window (an hour by default),
which an export catching up, or a deletion an hour after the Event, would make of the Event's own
time. A batch sent again by the same exporter keeps its times, and Loki drops an entry that
repeats one of its stream (same time, same line); one sent again after a restart is new to Loki,
its entries told apart by their dedup_key.

A 429 or 5xx is retried, as are 401, 403, 404 and 408 (what a fixed setup cures); a 400 or 413 is
a batch Loki refuses for good (a line too long, say): it is not sent again, and the export's status
counts its records as failed and says why (SinkRejected)."""

from __future__ import annotations

import ssl
import time
from urllib.parse import urlsplit

import aiohttp
import orjson

from apiserver.machinery.types import JSON
from apiserver.resources.eventexport import LokiSink
from coreio_export.sinkbase import SinkError, SinkRejected

PUSH_PATH = "/loki/api/v1/push"
JOB = "coreio-export"
TIMEOUT = aiohttp.ClientTimeout(total=30.0)
REFUSED = frozenset({400, 413})  # the batch itself is at fault: sending it again cannot help


def push_body(batch: list[JSON], stamp: int) -> JSON:
    """The batch as a push request, its entries timed `stamp` (Unix nanoseconds) and on: one stream
    for each (namespace, type), the entries of each in the batch's order."""
    streams: dict[tuple[str, str], list[list[object]]] = {}
    for offset, item in enumerate(batch):
        event = item["event"]
        namespace = str((event.get("metadata") or {}).get("namespace") or "")
        line = orjson.dumps(item).decode()
        entry: list[object] = [str(stamp + offset), line, {"dedup_key": item["dedupKey"]}]
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
        self.opening, self.stamp = "", 0  # the last batch's first dedup key, and its time

    async def send(self, batch: list[JSON]) -> None:
        opening = batch[0]["dedupKey"] if batch else ""
        if opening != self.opening:  # a new batch; one sent again keeps its times
            self.opening, self.stamp = opening, max(time.time_ns(), self.stamp + len(batch))
        body = orjson.dumps(push_body(batch, self.stamp))
        try:
            async with self.session.post(self.url, data=body, headers=self.headers, ssl=self.ssl) as answer:
                said = (await answer.read()).decode(errors="replace").strip()
        except (aiohttp.ClientError, TimeoutError, ssl.SSLError) as exc:
            raise SinkError(f"POST {self.url}: {exc or type(exc).__name__}") from None
        if 200 <= answer.status < 300:
            return
        first = said.splitlines()[0][:300] if said else ""
        if answer.status in REFUSED:
            raise SinkRejected(f"POST {self.url}: Loki refused the batch for good: {answer.status}: {first}")
        raise SinkError(f"POST {self.url}: {answer.status}{': ' + first if first else ''}")

    async def close(self) -> None:
        await self.session.close()
