"""What every sink is: `send` returns once the receiver has the batch and raises SinkError
otherwise (the exporter then sends it again, after a pause); the exporter advances its position
only after `send` returned."""

from __future__ import annotations

from typing import Protocol

from apiserver.machinery.types import JSON


class SinkError(Exception):
    """The sink did not take the batch; the exporter retries it."""


class SinkRejected(SinkError):
    """The receiver refused the batch for good (Loki's 400 for entries too old, say): it is not
    sent again. The exporter counts its records as failed, says why in lastError, and goes on."""


class RecordSink(Protocol):
    name: str

    async def send(self, batch: list[JSON]) -> None: ...

    async def close(self) -> None: ...
