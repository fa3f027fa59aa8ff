"""The audit webhook's POSTs against a real aiohttp server on loopback: the EventList body, the
kubeconfig's token, every failure retried (4xx as 5xx, as upstream's webhook retries any error),
and a kubeconfig that cannot be used named in one line."""

from __future__ import annotations

import json
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from apiserver.audit.webhook.backoff import Backoff, DeliveryError
from apiserver.audit.webhook.client import EncodedEvent, WebhookClient, WebhookConfigError, webhook_connection
from apiserver.cluster.connection import ClusterConnection


class Receiver:
    """Answers each POST with the next status of `answers` (then 200), keeping what it was sent."""

    def __init__(self, answers: list[int]) -> None:
        self.answers = answers
        self.received: list[tuple[str, Any]] = []

    async def handle(self, request: web.Request) -> web.Response:
        self.received.append((request.headers.get("Authorization", ""), await request.json()))
        status = self.answers.pop(0) if self.answers else 200
        return web.json_response({}, status=status)


@pytest.fixture
async def receiver(request: pytest.FixtureRequest) -> AsyncIterator[tuple[Receiver, str]]:
    answers: list[int] = list(getattr(request, "param", []))
    receiver = Receiver(answers)
    app = web.Application()
    app.router.add_post("/audit", receiver.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield receiver, f"http://127.0.0.1:{runner.addresses[0][1]}/audit"
    finally:
        await runner.cleanup()


def client(url: str, steps: int = 5) -> WebhookClient:
    return WebhookClient(ClusterConnection(url, True, token="audit-token"), Backoff(0.001, steps=steps))


EVENTS = [EncodedEvent("a", '{"auditID":"a"}'), EncodedEvent("b", '{"auditID":"b"}')]


@pytest.mark.parametrize("receiver", [[500, 400, 429]], indirect=True)
async def test_every_failure_is_retried_until_the_service_takes_the_events(
    receiver: tuple[Receiver, str],
) -> None:
    service, url = receiver
    sending = client(url)
    try:
        await sending.send(EVENTS)
    finally:
        await sending.close()
    assert len(service.received) == 4
    authorization, body = service.received[-1]
    assert authorization == "Bearer audit-token"
    assert body == {
        "kind": "EventList",
        "apiVersion": "audit.k8s.io/v1",
        "metadata": {},
        "items": [{"auditID": "a"}, {"auditID": "b"}],
    }


@pytest.mark.parametrize("receiver", [[503] * 5], indirect=True)
async def test_the_last_failure_is_the_error(receiver: tuple[Receiver, str]) -> None:
    service, url = receiver
    sending = client(url, steps=3)
    try:
        with pytest.raises(DeliveryError, match="503 Service Unavailable"):
            await sending.send(EVENTS)
    finally:
        await sending.close()
    assert len(service.received) == 3


async def test_an_answer_other_than_2xx_is_a_delivery_error(receiver: tuple[Receiver, str]) -> None:
    _service, url = receiver
    sending = client(url.replace("/audit", "/elsewhere"), steps=1)
    try:
        with pytest.raises(DeliveryError, match="404 Not Found"):
            await sending.send(EVENTS)
    finally:
        await sending.close()


async def test_a_service_that_is_down_is_a_delivery_error() -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    sending = client(f"http://127.0.0.1:{port}/audit", steps=2)
    try:
        with pytest.raises(DeliveryError, match="ClientConnectorError"):
            await sending.send(EVENTS)
    finally:
        await sending.close()


def test_a_kubeconfig_that_cannot_be_used_is_one_line(tmp_path: Path) -> None:
    missing = tmp_path / "missing.kubeconfig"
    with pytest.raises(WebhookConfigError, match=f"^stat {missing}: no such file or directory$"):
        webhook_connection(str(missing))
    listed = tmp_path / "list.kubeconfig"
    listed.write_text(json.dumps([1, 2]))
    with pytest.raises(WebhookConfigError, match="not a kubeconfig"):
        webhook_connection(str(listed))
    empty = tmp_path / "empty.kubeconfig"
    empty.write_text("clusters: []\n")
    with pytest.raises(WebhookConfigError, match="kubeconfig has no context ''"):
        webhook_connection(str(empty))
