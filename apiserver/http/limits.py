"""Overload protection, as kube-apiserver's generic filters: the max-in-flight limit
(k8s.io/apiserver/pkg/server/filters/maxinflight.go), the request timeout (filters/timeout.go with
endpoints/filters/request_deadline.go) and the long-running request check (filters/longrunning.go).

Unlike Go handlers, aiohttp handlers return their response and the server writes it afterwards. Both
middlewares here write the response themselves (`send`) so that, as upstream, sending it counts
against the in-flight slot and the timeout: a client that stops reading an answer larger than the
transport's buffers holds its slot no longer than the request timeout, then loses the connection.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.typedefs import Middleware
from prometheus_client import generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric

from apiserver.auth.attributes import attributes_from_request, request_user
from apiserver.auth.requestinfo import RequestInfo, is_long_running
from apiserver.http.middleware import PUBLIC_PREFIXES, Handler
from apiserver.machinery import deadlines, errors
from apiserver.machinery.gofmt import parse_go_duration
from apiserver.machinery.user import UserInfo

# Verbs that do not count against --max-mutating-requests-inflight.
READ_ONLY_VERBS = frozenset({"get", "list", "watch"})
# A member never waits for a slot (upstream: user.SystemPrivilegedGroup).
PRIVILEGED_GROUP = "system:masters"
RETRY_AFTER_SECONDS = 1
METRICS_PATH = "/metrics"
TIMEOUT_MESSAGE = "request did not complete within the allotted timeout"
INVALID_TIMEOUT = "invalid timeout specified in the request URL"


def _info(request: web.Request) -> RequestInfo:
    return attributes_from_request(request)


async def send(request: web.Request, response: web.StreamResponse) -> None:
    """Writes `response` completely, unless it was written already; aiohttp's own prepare and
    write_eof after the middleware chain then do nothing. A client that went away is left to aiohttp
    (it retries the write and drops the connection quietly)."""
    if response.prepared:
        return
    try:
        await response.prepare(request)
        await response.write_eof()
    except ConnectionError:
        pass


@dataclass
class _Slots:
    limit: int  # 0: unlimited
    in_flight: int = 0


class InFlightLimit:
    """At most `read_only_limit` get/list requests and `mutating_limit` others at once (0: no
    limit); long-running requests (watches) are not counted, and system:masters is never refused.
    The rest are answered 429 with Retry-After: 1, as kube-apiserver without priority and fairness.
    Health checks are not counted either (upstream's default priority and fairness configuration
    exempts them: the "probes" flow schema), nor /metrics, so that an overload can be watched.
    `collect` shows the requests in flight, and the long-running ones, in upstream's names."""

    def __init__(self, read_only_limit: int, mutating_limit: int) -> None:
        self.read_only = _Slots(read_only_limit)
        self.mutating = _Slots(mutating_limit)
        self.long_running: dict[tuple[str, ...], int] = {}

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path.startswith(PUBLIC_PREFIXES) or request.path == METRICS_PATH:
            return await handler(request)
        info = _info(request)
        if is_long_running(info):
            return await self._long_running(request, handler, info)
        slots = self.read_only if info.verb in READ_ONLY_VERBS else self.mutating
        if slots.limit == 0:
            return await handler(request)
        if slots.in_flight >= slots.limit:
            user = request_user(request)
            if isinstance(user, UserInfo) and PRIVILEGED_GROUP in user.groups:
                return await handler(request)
            raise errors.too_many_requests(RETRY_AFTER_SECONDS)
        slots.in_flight += 1
        try:
            response = await handler(request)
            await send(request, response)
            return response
        finally:
            slots.in_flight -= 1

    async def _long_running(
        self, request: web.Request, handler: Handler, info: RequestInfo
    ) -> web.StreamResponse:
        labels = _long_running_labels(info)
        self.long_running[labels] = self.long_running.get(labels, 0) + 1
        try:
            return await handler(request)
        finally:
            self.long_running[labels] -= 1
            if not self.long_running[labels]:
                del self.long_running[labels]  # label values come from any path a client sends

    def collect(self) -> Iterator[Metric]:
        """The requests in flight, and the long-running ones, in upstream's names (a collector of
        the server's metrics registry)."""
        in_flight = GaugeMetricFamily(
            "apiserver_current_inflight_requests",
            "Number of requests in flight, by kind (read-only or mutating), counted against"
            " --max-requests-inflight and --max-mutating-requests-inflight.",
            labels=("request_kind",),
        )
        in_flight.add_metric(("mutating",), self.mutating.in_flight)
        in_flight.add_metric(("readOnly",), self.read_only.in_flight)
        yield in_flight
        long_running = GaugeMetricFamily(
            "apiserver_longrunning_requests",
            "Gauge of all active long-running apiserver requests broken out by verb, group, version,"
            " resource, scope and component.",
            labels=_LONG_RUNNING_LABELS,
        )
        for labels, count in sorted(self.long_running.items()):
            long_running.add_metric(labels, count)
        yield long_running

    def metrics_text(self) -> str:
        return generate_latest(self).decode()


_LONG_RUNNING_LABELS = ("component", "group", "resource", "scope", "subresource", "verb", "version")


def _long_running_labels(info: RequestInfo) -> tuple[str, ...]:
    scope = "resource" if info.name else "namespace" if info.namespace else "cluster"
    verb = info.verb.upper()
    return ("apiserver", info.api_group, info.resource, scope, info.subresource, verb, info.api_version)


def request_timeout(seconds: float) -> Middleware:
    """Ends every request that is not long-running after `seconds` (or the shorter `?timeout=` it
    asks for) with 504 Timeout; 0: no limit. The handler is cancelled where it waits. A response
    that had begun to go out when time ran out cannot become a 504: the connection is cut instead
    (upstream panics with http.ErrAbortHandler), so no client takes half a body for a whole one."""

    @web.middleware
    async def limit_time(request: web.Request, handler: Handler) -> web.StreamResponse:
        if is_long_running(_info(request)):
            return await handler(request)
        allowed = seconds
        asked = _asked_timeout(request.query)
        if asked is not None and asked > 0 and (allowed <= 0 or asked < allowed):
            allowed = asked
        if allowed <= 0:
            return await handler(request)
        # One look at the running loop for both (each costs a getpid() system call on Python 3.11).
        when = asyncio.get_running_loop().time() + allowed
        deadline = asyncio.timeout_at(when)
        try:
            async with deadline:
                with deadlines.ending_at(when):
                    response = await handler(request)
                await send(request, response)
                return response
        except TimeoutError:
            if not deadline.expired():
                raise  # someone else's timeout, not this request's
        if request.writer.output_size > 0:
            # Part of an answer went out: no 504 can follow it. Cut the connection instead; what
            # is returned here is never sent.
            if request.transport is not None:
                request.transport.abort()
            return web.Response(status=504)
        raise errors.timeout_error(TIMEOUT_MESSAGE)

    return limit_time


def _asked_timeout(query: Mapping[str, str]) -> float | None:
    value = query.get("timeout")
    if not value:
        return None
    try:
        return parse_go_duration(value)
    except ValueError as exc:
        raise errors.bad_request(f"{INVALID_TIMEOUT} - {exc}") from None


class QuietMalformedRequests(logging.Filter):
    """For the `aiohttp.server` logger: aiohttp answers a malformed request (bad request line, a
    header over 8 KiB, a control character) 400 and logs a traceback at ERROR, so any client could
    fill the log. Those are the client's errors: one line at DEBUG, as Go's server says nothing."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if isinstance(error, HttpProcessingError) and 400 <= error.code < 500:
            record.msg = f"{record.msg}: %s"
            record.args = (*(record.args if isinstance(record.args, tuple) else ()), error.message)
            record.levelno, record.levelname = logging.DEBUG, "DEBUG"
            record.exc_info = record.exc_text = None
            return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)
        return True
