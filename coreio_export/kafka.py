"""The Kafka sink: each record one message, produced with aiokafka (asyncio's Kafka client) to the
export's topic. The value is the record's JSON (as a JSON-lines sink writes it); the key is the
Event's namespace, so that one namespace's records land in one partition and keep their order; the
headers carry the dedup key and the change. The producer is idempotent and waits for every in-sync
replica (acks=all): a batch is acknowledged once each of its messages is. A producer that failed is
dropped and a new one made for the retry."""

from __future__ import annotations

import asyncio
import ssl

import orjson
from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError

from apiserver.machinery.types import JSON
from apiserver.resources.eventexport import KafkaSink
from coreio_export.sinkbase import SinkError

SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
REQUEST_TIMEOUT_MS = 30_000


def producer_settings(
    sink: KafkaSink, sasl: dict[str, str] | None, context: ssl.SSLContext | None
) -> dict[str, object]:
    """aiokafka's producer settings for the sink; `sasl` the Secret's mechanism, username and
    password (None: no SASL); `context` the TLS context (None: plaintext)."""
    settings: dict[str, object] = {
        "bootstrap_servers": list(sink.brokers),
        "acks": "all",
        "enable_idempotence": True,
        "request_timeout_ms": REQUEST_TIMEOUT_MS,
        "client_id": "coreio-export",
    }
    if context is not None:
        settings["ssl_context"] = context
    if sasl is not None:
        mechanism = sasl.get("mechanism", "")
        if mechanism not in SASL_MECHANISMS:
            raise ValueError(f"its mechanism must be one of {', '.join(SASL_MECHANISMS)}, not {mechanism!r}")
        if not sasl.get("username") or not sasl.get("password"):
            raise ValueError("it must hold a username and a password")
        settings |= {
            "sasl_mechanism": mechanism,
            "sasl_plain_username": sasl["username"],
            "sasl_plain_password": sasl["password"],
        }
    plain, secured = ("PLAINTEXT", "SSL") if sasl is None else ("SASL_PLAINTEXT", "SASL_SSL")
    settings["security_protocol"] = secured if context is not None else plain
    return settings


def message(item: JSON) -> tuple[bytes, bytes, list[tuple[str, bytes]]]:
    """(key, value, headers) of a record's message."""
    namespace = str((item["event"].get("metadata") or {}).get("namespace") or "")
    headers = [("dedupKey", str(item["dedupKey"]).encode()), ("type", str(item["type"]).encode())]
    return namespace.encode(), orjson.dumps(item), headers


class Kafka:
    """Batches produced to the sink's topic."""

    name = "kafka"

    def __init__(self, sink: KafkaSink, settings: dict[str, object]) -> None:
        self.topic = sink.topic
        self.settings = settings
        self.producer: AIOKafkaProducer | None = None

    async def _started(self) -> AIOKafkaProducer:
        if self.producer is None:
            producer = AIOKafkaProducer(**self.settings)
            try:
                await producer.start()
            except KafkaError as exc:
                await producer.stop()
                raise SinkError(f"Kafka {self.settings['bootstrap_servers']}: {exc}") from None
            except BaseException:  # cancelled while starting (SIGTERM): nothing left running
                await asyncio.shield(producer.stop())
                raise
            self.producer = producer
        return self.producer

    async def send(self, batch: list[JSON]) -> None:
        producer = await self._started()
        try:
            pending = []
            for item in batch:
                key, value, headers = message(item)
                pending.append(await producer.send(self.topic, value=value, key=key, headers=headers))
            await asyncio.gather(*pending)
        except KafkaError as exc:
            self.producer = None
            await producer.stop()
            raise SinkError(f"Kafka topic {self.topic}: {exc}") from None

    async def close(self) -> None:
        if self.producer is not None:
            await self.producer.stop()


def kafka_sink(
    sink: KafkaSink, sasl: dict[str, str] | None, context: ssl.SSLContext | None, where: str
) -> Kafka:
    """The sink (`context`: TLS, None for plaintext); `sasl` the Secret `where` names (None: no
    saslFrom)."""
    try:
        return Kafka(sink, producer_settings(sink, sasl, context))
    except ValueError as exc:
        raise SinkError(f"the Secret {where} of saslFrom cannot be used: {exc}") from None
