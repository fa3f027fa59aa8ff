"""The exporter's Prometheus metrics, for its one export and sink: records sent, failed and
retried, batches, gaps, and the position's lag in revisions and seconds and last success time.
The labels are the export's namespace and name and the sink's kind, fixed for the process, so the
cardinality is one series a metric (never per Event or per object)."""

from __future__ import annotations

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, generate_latest

from coreio_export.connection import ExportError
from coreio_export.progress import Progress

LABELS = ("export_namespace", "export", "sink")


class ExportMetrics:
    def __init__(self, namespace: str, name: str) -> None:
        self.registry = CollectorRegistry()
        self.labels = {"export_namespace": namespace, "export": name, "sink": ""}

        def counter(metric: str, what: str) -> Counter:
            return Counter(f"coreio_export_{metric}", what, LABELS, registry=self.registry)

        def gauge(metric: str, what: str) -> Gauge:
            return Gauge(f"coreio_export_{metric}", what, LABELS, registry=self.registry)

        self.sent = counter("records_sent", "Records the sink acknowledged.")
        self.failed = counter("records_failed", "Records of batches the sink did not take (each retried).")
        self.retried = counter("records_retried", "Records sent again after a failed try.")
        self.batches = counter("batches", "Batches the sink acknowledged.")
        self.gaps = counter(
            "gaps", "Times the history after the position was gone and the Events were listed anew."
        )
        self.lag_revisions = gauge("lag_revisions", "Revisions written after the position.")
        self.lag_seconds = gauge("lag_seconds", "How long the oldest record not yet acknowledged has waited.")
        self.last_success = gauge(
            "last_success_timestamp_seconds", "When the sink last acknowledged a batch."
        )
        self.position = gauge("position", "The revision up to which every selected Event was delivered.")

    def sink(self, kind: str) -> None:
        """The sink's kind, known once the spec is read; every series starts then, at 0, so that
        `increase()` and absence alerts see it before anything happens."""
        self.labels["sink"] = kind
        for metric in (self.sent, self.failed, self.retried, self.batches, self.gaps, self.lag_revisions):
            metric.labels(**self.labels)
        for gauge in (self.lag_seconds, self.last_success, self.position):
            gauge.labels(**self.labels)

    def delivered(self, records: int, now: float) -> None:
        self.sent.labels(**self.labels).inc(records)
        self.batches.labels(**self.labels).inc()
        self.last_success.labels(**self.labels).set(now)

    def failure(self, records: int) -> None:
        self.failed.labels(**self.labels).inc(records)

    def retry(self, records: int) -> None:
        self.retried.labels(**self.labels).inc(records)

    def gap(self) -> None:
        self.gaps.labels(**self.labels).inc()

    def observe(self, progress: Progress) -> None:
        self.position.labels(**self.labels).set(progress.position)
        self.lag_revisions.labels(**self.labels).set(max(progress.newest - progress.position, 0))
        self.lag_seconds.labels(**self.labels).set(progress.lag_seconds)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


async def serve(metrics: ExportMetrics, address: str) -> web.AppRunner:
    """/metrics on `address` (HOST:PORT), until the runner is cleaned up."""
    host, _, port = address.rpartition(":")

    async def handle(_request: web.Request) -> web.Response:
        return web.Response(body=metrics.exposition(), headers={"Content-Type": CONTENT_TYPE_LATEST})

    app = web.Application()
    app.router.add_get("/metrics", handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    try:
        await web.TCPSite(runner, host or None, int(port)).start()
    except OSError as exc:
        await runner.cleanup()
        raise ExportError(f"cannot serve metrics on {address}: {exc.strerror or exc}") from None
    return runner
