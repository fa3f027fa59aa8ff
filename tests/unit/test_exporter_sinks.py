"""The exporter's sinks on their own, with real files and real TLS on loopback: a JSON-lines file
rotated by size, keeping `maxFiles` older ones; a webhook over https trusted through its caBundle
(and refused without it), sending the headers of its Secret; a Secret or caBundle that cannot be
used is one clear SinkError."""

from __future__ import annotations

import base64
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, cast

import orjson
import pytest
from aiohttp import web

from apiserver import pki
from apiserver.resources.eventexport import JSONLinesSink, KafkaSink, LokiSink, OTLPSink, Sink, WebhookSink
from coreio_export.connection import Api
from coreio_export.kafka import kafka_sink, message, producer_settings
from coreio_export.loki import Loki, push_body
from coreio_export.otlp import TooLarge, export_request, in_halves_if_too_large, occurred_nanos
from coreio_export.sinkbase import SinkError, SinkRejected
from coreio_export.sinks import JSONLines, Webhook, open_sink, secret_headers
from tests.support.exporter import read_lines

NOTE = "x" * 1000


def records(first: int, count: int) -> list[dict[str, Any]]:
    return [
        {"dedupKey": f"u/{i}", "type": "ADDED", "resourceVersion": str(i), "note": NOTE}
        for i in range(first, first + count)
    ]


def sizes(directory: Path) -> dict[str, int]:
    return {p.name: p.stat().st_size for p in directory.iterdir()}


async def test_a_file_is_rotated_by_size_keeping_max_files_older_ones(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    sink = JSONLines(JSONLinesSink(path=str(path), maxSizeMiB=1, maxFiles=2))
    for batch in range(10):  # about 300 KiB each: 3 a file
        await sink.send(records(batch * 280, 280))
    files = sizes(tmp_path)
    assert sorted(files) == ["events.jsonl", "events.jsonl.1", "events.jsonl.2"]
    assert all(size <= 1 << 20 for size in files.values())
    kept = [int(r["resourceVersion"]) for r in read_lines(path)]
    assert kept == list(range(kept[0], 2800))  # the newest, in order, whole batches
    assert kept[0] % 280 == 0 and kept[0] > 0  # the oldest file went


@pytest.fixture
async def https_receiver(tmp_path: Path) -> AsyncIterator[tuple[str, pki.KeyPair, list[Any]]]:
    """An https receiver on 127.0.0.1 with a certificate of a CA of its own: its URL, the CA and
    what it received (headers and body of each request)."""
    ca = pki.create_ca("receiver-ca")
    serving = pki.issue_serving_certificate(ca, ["127.0.0.1"])
    serving.save(tmp_path / "tls.crt", tmp_path / "tls.key")
    got: list[Any] = []

    async def take(request: web.Request) -> web.Response:
        got.append((dict(request.headers), await request.read()))
        return web.Response(status=204)

    app = web.Application()
    app.router.add_post("/events", take)
    runner = web.AppRunner(app)
    await runner.setup()
    context = pki.ServingCertificate(tmp_path / "tls.crt", tmp_path / "tls.key").context
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context)
    await site.start()
    try:
        yield f"https://127.0.0.1:{runner.addresses[0][1]}/events", ca, got
    finally:
        await runner.cleanup()


async def test_a_webhook_over_https_is_trusted_through_its_ca_bundle(
    https_receiver: tuple[str, pki.KeyPair, list[Any]],
) -> None:
    url, ca, got = https_receiver
    trusted = Webhook(
        WebhookSink(url=url, caBundle=ca.cert_pem.decode()), {"Authorization": "Bearer t"}, False
    )
    try:
        await trusted.send(records(0, 3))
    finally:
        await trusted.close()
    ((headers, body),) = got
    assert headers["Authorization"] == "Bearer t" and headers["Content-Type"] == "application/json"
    assert [r["dedupKey"] for r in orjson.loads(body)] == ["u/0", "u/1", "u/2"]
    untrusted = Webhook(WebhookSink(url=url), {}, False)  # the system's roots know no such CA
    try:
        with pytest.raises(SinkError, match="certificate verify failed"):
            await untrusted.send(records(3, 1))
    finally:
        await untrusted.close()
    with pytest.raises(SinkError, match="caBundle holds no usable certificate"):
        Webhook(WebhookSink(url=url, caBundle="not a certificate"), {}, False)


class FakeSecretApiForUnitTests:
    """A fake of the exporter's Api for these unit tests only: any GET answers `secret`."""

    def __init__(self, secret: dict[str, Any]) -> None:
        self.secret = secret

    async def get(self, path: str) -> dict[str, Any]:
        return self.secret


async def test_headers_come_from_the_secret_and_a_bad_secret_is_one_error() -> None:
    token = base64.b64encode(b"Bearer abc\n").decode()
    api = FakeSecretApiForUnitTests({"data": {"Authorization": token}})
    assert await secret_headers(api, "shop", "hook") == {"Authorization": "Bearer abc"}  # type: ignore[arg-type]
    bad = FakeSecretApiForUnitTests({"data": {"Authorization": "%%%"}})
    with pytest.raises(SinkError, match="Secret shop/hook of headersFrom cannot be read as headers"):
        await secret_headers(bad, "shop", "hook")  # type: ignore[arg-type]


def test_an_otlp_record_of_a_series_is_dated_by_its_last_observation_and_counts_it() -> None:
    event = {
        "metadata": {"name": "e", "namespace": "shop", "uid": "u1", "resourceVersion": "7"},
        "eventTime": "2026-11-27T10:00:00.000001Z",
        "series": {"count": 4, "lastObservedTime": "2026-11-27T10:05:00.250000Z"},
        "type": "Unusual",
        "note": "",
        "regarding": {"kind": "Node", "name": "n1", "uid": "n-uid"},
    }
    item = {"dedupKey": "u1/7", "type": "MODIFIED", "resourceVersion": "7", "event": event}
    request = export_request([item])
    (resource,) = request.resource_logs
    (record,) = resource.scope_logs[0].log_records
    assert record.time_unix_nano == 1_795_773_900_250_000_000  # not the eventTime
    attributes = {a.key: a.value for a in record.attributes}
    assert attributes["k8s.event.count"].int_value == 4
    assert attributes["k8s.event.change"].string_value == "MODIFIED"
    assert "k8s.event.reason" not in attributes  # empty fields are left out
    assert (record.severity_number, record.severity_text) == (0, "Unusual")  # unspecified
    assert {a.key: a.value.string_value for a in resource.resource.attributes} == {
        "k8s.object.kind": "Node",
        "k8s.object.name": "n1",
        "k8s.object.uid": "n-uid",
    }


async def test_an_otlp_sink_with_a_bad_ca_bundle_is_one_error() -> None:
    with pytest.raises(SinkError, match="otlp sink's caBundle holds no usable certificate"):
        sink = Sink(otlp=OTLPSink(endpoint="https://127.0.0.1:1", caBundle="not a certificate"))
        await open_sink(sink, cast(Api, None), "shop", 100)  # no Secret to read: no API asked


def test_kafka_settings_follow_tls_and_the_sasl_secret() -> None:
    sink = KafkaSink(brokers=["k:9092"], topic="events")
    assert producer_settings(sink, None, None)["security_protocol"] == "PLAINTEXT"
    context = ssl.create_default_context()
    scram = {"mechanism": "SCRAM-SHA-512", "username": "u", "password": "p"}
    settings = producer_settings(sink, scram, context)
    assert settings["security_protocol"] == "SASL_SSL" and settings["ssl_context"] is context
    assert (settings["sasl_mechanism"], settings["acks"], settings["enable_idempotence"]) == (
        "SCRAM-SHA-512",
        "all",
        True,
    )
    assert producer_settings(sink, scram, None)["security_protocol"] == "SASL_PLAINTEXT"
    with pytest.raises(SinkError, match="saslFrom cannot be used: its mechanism must be one of PLAIN"):
        kafka_sink(sink, {"mechanism": "GSSAPI", "username": "u", "password": "p"}, None, "shop/sasl")
    with pytest.raises(SinkError, match="must hold a username and a password"):
        kafka_sink(sink, {"mechanism": "PLAIN", "username": "u"}, None, "shop/sasl")
    with pytest.raises(SinkError, match="its mechanism must be one of"):  # an empty Secret: no SASL off
        kafka_sink(sink, {}, None, "shop/sasl")


def test_a_kafka_message_is_keyed_by_namespace_with_the_dedup_key_in_its_headers() -> None:
    item = {
        "dedupKey": "u1/7",
        "type": "DELETED",
        "resourceVersion": "7",
        "event": {"metadata": {"namespace": "shop"}},
    }
    key, value, headers = message(item)
    assert (key, orjson.loads(value), headers) == (
        b"shop",
        item,
        [("dedupKey", b"u1/7"), ("type", b"DELETED")],
    )


def test_a_loki_push_groups_records_by_namespace_and_type_in_order() -> None:
    def item(i: int, ns: str, kind: str) -> dict[str, Any]:
        event = {"metadata": {"namespace": ns}, "type": kind, "eventTime": f"2026-11-27T10:00:0{i}.000000Z"}
        return {"dedupKey": f"u/{i}", "type": "ADDED", "resourceVersion": str(i), "event": event}

    batch = [item(0, "a", "Normal"), item(1, "b", "Normal"), item(2, "a", "Normal"), item(3, "a", "Warning")]
    streams = push_body(batch, 1_795_773_600_000_000_000)["streams"]
    assert [s["stream"] for s in streams] == [
        {"job": "coreio-export", "namespace": ns, "type": kind}
        for ns, kind in (("a", "Normal"), ("b", "Normal"), ("a", "Warning"))
    ]
    first = streams[0]["values"]
    assert [v[2] for v in first] == [{"dedup_key": "u/0"}, {"dedup_key": "u/2"}]
    assert [v[0] for v in first] == ["1795773600000000000", "1795773600000000002"]  # its place in the batch
    assert orjson.loads(first[1][1]) == batch[2]


@pytest.mark.parametrize(
    ("status", "error"),
    [
        (204, None),
        (429, SinkError),
        (503, SinkError),
        (401, SinkError),
        (400, SinkRejected),
        (413, SinkRejected),
    ],
)
async def test_loki_answers_are_taken_retried_or_refused_for_good(
    status: int, error: type[Exception] | None
) -> None:
    got: list[Any] = []

    async def push(request: web.Request) -> web.Response:
        got.append((dict(request.headers), await request.json()))
        return web.Response(status=status, text="entry too far behind" if status == 400 else "")

    app = web.Application()
    app.router.add_post("/base/loki/api/v1/push", push)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    url = f"http://127.0.0.1:{runner.addresses[0][1]}/base/"
    sink = Loki(LokiSink(url=url, tenant="team-a"), {"Authorization": "Basic x"}, True)
    item = {"dedupKey": "u/1", "type": "ADDED", "resourceVersion": "1", "event": {"metadata": {}}}
    try:
        if error is None:
            await sink.send([item])
        else:
            with pytest.raises(error) as raised:
                await sink.send([item])
            assert isinstance(raised.value, SinkRejected) == (error is SinkRejected)
    finally:
        await sink.close()
        await runner.cleanup()
    headers, body = got[0]
    assert (headers["X-Scope-OrgID"], headers["Authorization"]) == ("team-a", "Basic x")
    assert body["streams"][0]["values"][0][2] == {"dedup_key": "u/1"}


async def test_a_batch_too_large_for_the_collector_goes_in_halves_one_too_large_alone_refused() -> None:
    sent: list[list[str]] = []

    async def send(batch: list[dict[str, Any]]) -> None:
        keys = [item["dedupKey"] for item in batch]
        if len(batch) > 2 or "u/3" in keys:  # u/3 is too large even alone
            raise TooLarge("grpc: received message larger than max")
        sent.append(keys)

    batch = [{"dedupKey": f"u/{i}"} for i in range(7)]
    with pytest.raises(SinkRejected, match="1 record"):
        await in_halves_if_too_large(send, batch)
    assert sorted(k for keys in sent for k in keys) == ["u/0", "u/1", "u/2", "u/4", "u/5", "u/6"]


def test_an_otlp_time_before_1970_is_no_time_and_no_crash() -> None:
    event = {
        "metadata": {"creationTimestamp": "2026-11-27T10:00:00Z"},
        "eventTime": "1969-12-31T23:59:59.000000Z",
    }
    assert occurred_nanos(event) == 1_795_773_600_000_000_000  # the next time given
    item = {"dedupKey": "u/1", "type": "ADDED", "resourceVersion": "1", "event": event | {"metadata": {}}}
    assert export_request([item]).resource_logs[0].scope_logs[0].log_records[0].time_unix_nano == 0
