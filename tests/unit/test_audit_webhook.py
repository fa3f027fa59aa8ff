"""The audit webhook's rules without a network: the backoff's waits and retries (a fake sleep), the
throttle's token bucket (a fake clock), batch mode's buffer and batches (a fake webhook that
records what it is sent), the modes, truncation, and the flags' validation in upstream's words."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from apiserver.audit.metrics import METRICS
from apiserver.audit.webhook import truncate
from apiserver.audit.webhook.backend import WebhookBackend, WebhookOptions
from apiserver.audit.webhook.backoff import Backoff, DeliveryError, with_backoff
from apiserver.audit.webhook.batch import BatchConfig, Batcher
from apiserver.audit.webhook.client import EncodedEvent, event_list
from apiserver.audit.webhook.throttle import TokenBucket
from apiserver.audit.webhook.truncate import TruncateConfig
from tests.support.waiting import async_wait_until


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class FakeSleep:
    """Records the waits instead of waiting."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


class FakeWebhook:
    """A sender that records each batch, failing the first `failures` sends."""

    def __init__(self, failures: int = 0) -> None:
        self.batches: list[list[str]] = []
        self.failures = failures
        self.closed = False

    async def send(self, events: Sequence[EncodedEvent]) -> None:
        if self.failures:
            self.failures -= 1
            raise DeliveryError("Post 'https://127.0.0.1/': 500 Internal Server Error")
        self.batches.append([event.audit_id for event in events])

    async def close(self) -> None:
        self.closed = True


def errors(plugin: str) -> float:
    registry = CollectorRegistry()
    registry.register(METRICS)
    return registry.get_sample_value("apiserver_audit_error_total", {"plugin": plugin}) or 0.0


def encoded(audit_id: str, size: int = 0) -> EncodedEvent:
    line = json.dumps({"auditID": audit_id, "pad": "x" * size})
    return EncodedEvent(audit_id, line)


# --- backoff ---------------------------------------------------------------------------------


def test_backoff_waits_grow_by_half_from_the_initial_wait() -> None:
    assert Backoff(10.0).delays(lambda: 0.0) == [10.0, 15.0, 22.5, 33.75]
    # Jitter lengthens each wait by up to a fifth of itself.
    assert Backoff(10.0).delays(lambda: 1.0) == pytest.approx([12.0, 18.0, 27.0, 40.5])


async def test_retries_with_a_fake_sleep_until_an_attempt_succeeds() -> None:
    sleep, outcomes = FakeSleep(), [DeliveryError("500"), DeliveryError("400"), None]

    async def attempt() -> None:
        if (outcome := outcomes.pop(0)) is not None:
            raise outcome

    await with_backoff(attempt, Backoff(1.0, jitter=0.0), sleep)
    assert sleep.waits == [1.0, 1.5] and not outcomes


async def test_five_failed_attempts_with_a_fake_sleep_raise_the_last_error() -> None:
    sleep, attempts = FakeSleep(), list[int]()

    async def attempt() -> None:
        attempts.append(len(attempts))
        raise DeliveryError(f"attempt {len(attempts)}")

    with pytest.raises(DeliveryError, match="attempt 5"):
        await with_backoff(attempt, Backoff(1.0, jitter=0.0), sleep)
    assert len(attempts) == 5 and len(sleep.waits) == 4


# --- throttle --------------------------------------------------------------------------------


def test_token_bucket_with_a_fake_clock_allows_the_burst_then_the_rate() -> None:
    clock = FakeClock()
    bucket = TokenBucket(qps=10.0, burst=15, clock=clock)
    assert [bucket.reserve() for _ in range(15)] == [0.0] * 15
    assert bucket.reserve() == pytest.approx(0.1)
    assert bucket.reserve() == pytest.approx(0.2)  # reservations queue up
    clock.now += 1.0  # ten tokens back, two of them owed
    assert [bucket.reserve() for _ in range(8)] == [0.0] * 8
    assert bucket.reserve() > 0


def test_token_bucket_with_a_fake_clock_saves_no_more_than_the_burst() -> None:
    clock = FakeClock()
    bucket = TokenBucket(qps=1.0, burst=2, clock=clock)
    clock.now += 3600
    assert [bucket.reserve() == 0 for _ in range(3)] == [True, True, False]


# --- batching --------------------------------------------------------------------------------


async def test_a_full_batch_goes_at_once_and_the_rest_after_the_wait() -> None:
    webhook = FakeWebhook()
    config = BatchConfig(max_batch_size=3, max_batch_wait=0.05, throttle_enable=False)
    batcher = Batcher(config, webhook.send)
    for audit_id in "abcde":
        batcher.offer(encoded(audit_id))
    assert await batcher.collect() == [encoded(a) for a in "abc"]
    # Fewer than a batch: what came within the wait.
    assert await batcher.collect() == [encoded(a) for a in "de"]


async def test_batches_of_one_wait_for_the_next_event_only() -> None:
    batcher = Batcher(
        BatchConfig(max_batch_size=1, max_batch_wait=3600, throttle_enable=False), FakeWebhook().send
    )
    collecting = asyncio.ensure_future(batcher.collect())
    await asyncio.sleep(0)  # it waits (a yield)
    batcher.offer(encoded("a"))
    assert await asyncio.wait_for(collecting, 10) == [encoded("a")]


async def test_a_full_buffer_drops_the_event_and_counts_it() -> None:
    batcher = Batcher(BatchConfig(buffer_size=2, max_batch_size=2), FakeWebhook().send)
    before = errors("buffered")
    for audit_id in "abc":
        batcher.offer(encoded(audit_id))  # never waits
    assert errors("buffered") == before + 1
    assert [event.audit_id for event in await batcher.collect()] == ["a", "b"]


async def test_stopping_sends_what_is_buffered() -> None:
    webhook = FakeWebhook()
    batcher = Batcher(BatchConfig(max_batch_size=2, max_batch_wait=3600), webhook.send)
    batcher.start()
    for audit_id in "abcde":
        batcher.offer(encoded(audit_id))
    await asyncio.wait_for(batcher.stop(), 10)
    assert sorted(a for batch in webhook.batches for a in batch) == list("abcde")
    assert all(len(batch) <= 2 for batch in webhook.batches)
    before = errors("buffered")
    batcher.offer(encoded("late"))
    assert errors("buffered") == before + 1


async def test_a_stop_cut_short_counts_what_was_never_sent() -> None:
    never, started = asyncio.Event(), asyncio.Event()

    async def stuck(_events: Sequence[EncodedEvent]) -> None:
        started.set()
        await never.wait()

    config = BatchConfig(max_batch_size=1, throttle_qps=0.001, throttle_burst=1)
    batcher = Batcher(config, stuck)
    batcher.start()
    for audit_id in "abc":
        batcher.offer(encoded(audit_id))
    await asyncio.wait_for(started.wait(), 10)
    # Until "b" is taken, to wait for the throttle (nothing signals it: a test's poll).
    await async_wait_until(lambda: batcher.buffered <= 1, interval=0, message='"b" taken')
    before = errors("buffered")
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(batcher.stop(), 0.05)
    # "a" was being sent, "b" waited for the throttle, "c" was still buffered.
    assert errors("buffered") == before + 2


# --- modes -----------------------------------------------------------------------------------


def backend(mode: str, webhook: FakeWebhook, **truncating: Any) -> WebhookBackend:
    options = WebhookOptions("webhook.kubeconfig", mode, truncate=TruncateConfig(**truncating))
    return WebhookBackend(options, webhook)


def event(audit_id: str, **fields: Any) -> tuple[dict[str, Any], str]:
    body = {"kind": "Event", "level": "Metadata", "auditID": audit_id, **fields}
    return body, json.dumps(body)


async def test_batch_mode_never_makes_the_request_wait() -> None:
    webhook = FakeWebhook()
    sending = backend("batch", webhook)
    assert sending.process(*event("a")) is None
    sending.start()
    await asyncio.wait_for(sending.stop(), 10)
    assert webhook.batches == [["a"]] and webhook.closed


async def outcome(sending: WebhookBackend, audit_id: str) -> bool:
    """What the request waits for, in a blocking mode."""
    delivery = sending.process(*event(audit_id))
    assert delivery is not None
    return await asyncio.wait_for(delivery, 10)


async def test_blocking_modes_answer_whether_the_request_may_go_on() -> None:
    before = errors("webhook")
    strict = backend("blocking-strict", FakeWebhook(failures=1))
    assert await outcome(strict, "a") is False
    assert await outcome(strict, "b") is True
    # Blocking waits too, but goes on whatever happened.
    blocking = backend("blocking", FakeWebhook(failures=1))
    assert await outcome(blocking, "c") is True
    assert errors("webhook") == before + 2


# --- truncation ------------------------------------------------------------------------------


def test_an_event_too_large_loses_its_bodies_then_is_dropped() -> None:
    body, line = event("a", level="RequestResponse", requestObject={"x": "y" * 500}, annotations={"k": "v"})
    fitted = truncate.fitted(body, EncodedEvent("a", line), 200)
    assert fitted is not None
    trimmed = json.loads(fitted.line)
    assert "requestObject" not in trimmed
    assert trimmed["annotations"] == {"k": "v", "audit.k8s.io/truncated": "true"}
    assert truncate.fitted(body, EncodedEvent("a", line), 20) is None
    # At Metadata there is no body to drop.
    metadata, metadata_line = event("b", userAgent="z" * 500)
    assert truncate.fitted(metadata, EncodedEvent("b", metadata_line), 200) is None


async def test_truncating_splits_batches_by_size_and_drops_what_cannot_fit() -> None:
    webhook = FakeWebhook()
    sending = backend("blocking", webhook, enabled=True, max_event_size=300, max_batch_size=500)
    events = [encoded(audit_id, 200) for audit_id in "abc"]
    assert await sending.deliver(events)
    assert webhook.batches == [["a", "b"], ["c"]]
    before = errors("truncate")
    assert sending.process(*event("big", userAgent="z" * 400)) is None
    assert errors("truncate") == before + 1


# --- the body and the flags ------------------------------------------------------------------


def test_the_body_is_an_event_list_of_the_events_as_logged() -> None:
    body = json.loads(
        event_list([EncodedEvent("a", '{"auditID":"a"}'), EncodedEvent("b", '{"auditID":"b"}')])
    )
    assert body == {
        "kind": "EventList",
        "apiVersion": "audit.k8s.io/v1",
        "metadata": {},
        "items": [{"auditID": "a"}, {"auditID": "b"}],
    }


@pytest.mark.parametrize(
    ("options", "problem"),
    [
        (
            WebhookOptions(batch=BatchConfig(buffer_size=0)),
            "invalid audit batch webhook buffer size 0, must be a positive number",
        ),
        (
            WebhookOptions(batch=BatchConfig(max_batch_size=-1)),
            "invalid audit batch webhook max batch size -1, must be a positive number",
        ),
        (
            WebhookOptions(batch=BatchConfig(throttle_qps=0)),
            "invalid audit batch webhook throttle QPS 0, must be a positive number",
        ),
        (
            WebhookOptions(truncate=TruncateConfig(max_batch_size=10, max_event_size=20)),
            "invalid audit truncate webhook max batch size 10, must be greater than max event size (20)",
        ),
        # Batch options are not checked in a blocking mode, nor the throttle's without a throttle.
        (WebhookOptions(mode="blocking", batch=BatchConfig(buffer_size=0)), ""),
        (WebhookOptions(batch=BatchConfig(throttle_enable=False, throttle_burst=0)), ""),
    ],
)
def test_options_are_checked_in_upstreams_words(options: WebhookOptions, problem: str) -> None:
    assert options.problem() == problem
